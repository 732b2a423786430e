"""go-tpc's `tpcc` (TPC-C-like) as a WorkloadDriver (blocklab.workloads.base).

Experiment file: `workload = { driver = "tpcc", warehouses = 1, threads = 4 }`. The
dataset is `warehouses`: `go-tpc tpcc prepare` loads the nine tables into the database
`tpcc` (without go-tpc's consistency checks: gotpc.tpcc_prepare_argv). `threads` is the
run's concurrency (the variant's clients). A given matrix.scale S (--scale) caps warehouses at S.

Throughput: go-tpc's tpmC (NEW_ORDER transactions per minute; not a TPC-C-compliant
tpmC: no keying or thinking time); metrics tpm_total and nopm (the same NEW_ORDER rate,
HammerDB's name), per-operation latencies; per-second series of NEW_ORDER per minute
and latency. Any "execute ... failed" line or OP_ERR count is a failure (go-tpc exits 0
when the server dies).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from blocklab.model import DatasetRequest, WorkloadRequest
from blocklab.postgres.installation import Installation
from blocklab.workloads import driver_common, gotpc, tools
from blocklab.workloads.base import DriverSpec, Endpoint, RecordPart, WorkloadResult

DATABASE = "tpcc"
KEYS = ("warehouses", "threads")
# rough loaded bytes at fillfactor 100 (8 kB pages): per warehouse (stock, customer,
# order_line, history, orders, new_order, district with their indexes) and once (item)
WAREHOUSE_BYTES = 90 * 1024 * 1024
ITEM_BYTES = 12 * 1024 * 1024


class TpccDriver:
    name = "tpcc"
    throughput_metric = "tpmC"
    throughput_unit = "NEW_ORDER/min"
    database = DATABASE
    sets_fillfactor = False
    vacuum_after_load = True

    def read_spec(
        self, table: Mapping[str, Any], path: str, *, scale: int | None = None
    ) -> DriverSpec:
        keys = driver_common.Keys(table, path, KEYS)
        warehouses = keys.integer("warehouses", 1, 1, gotpc.MAX_WAREHOUSES)
        threads = keys.integer("threads", None, 1, 1024)
        assert warehouses is not None
        if scale is not None:
            warehouses = min(warehouses, scale)
        label = f"tpcc-w{warehouses}" + (f" thr={threads}" if threads else "")
        return DriverSpec(
            label=label,
            dataset={"warehouses": warehouses},
            run={"warehouses": warehouses},  # go-tpc tpcc run picks warehouses by it
            clients=threads,
        )

    def check_machine(self) -> str:
        return tools.locate(self.name).version

    def dataset_bytes(self, dataset: DatasetRequest, block_size_bytes: int) -> tuple[int, str]:
        w = _warehouses(dataset)
        nbytes = (w * WAREHOUSE_BYTES + ITEM_BYTES) * 100 // dataset.fillfactor
        return nbytes, f"go-tpc tpcc {w} warehouse(s) (~{WAREHOUSE_BYTES >> 20} MB each)"

    def load_estimate_s(self, dataset: DatasetRequest) -> float:
        """go-tpc's INSERTs and checks: about 45 s per warehouse here, plus VACUUM."""
        return 15.0 + 50.0 * _warehouses(dataset)

    def dataset_label(self, dataset: DatasetRequest) -> str:
        return f"go-tpc tpcc prepare --warehouses {_warehouses(dataset)}"

    def init_commands(
        self, inst: Installation, endpoint: Endpoint, dataset: DatasetRequest
    ) -> list[list[str]]:
        w = _warehouses(dataset)
        opts = gotpc.TpccOptions(warehouses=w, threads=min(w, 4))
        return [gotpc.tpcc_prepare_argv(_program(), opts, _target(endpoint))]

    def prepare_sql(self, workload: WorkloadRequest) -> str | None:
        return None  # the dataset was vacuumed after the load

    def command(
        self,
        inst: Installation,
        endpoint: Endpoint,
        workload: WorkloadRequest,
        *,
        raw_dir: Path | None,
        duration_s: int | None = None,
    ) -> list[str]:
        opts = gotpc.TpccOptions(
            warehouses=int(workload.option("warehouses", 1) or 1),
            threads=workload.clients,
            time_s=duration_s or workload.duration_s,
        )
        return gotpc.tpcc_run_argv(_program(), opts, _target(endpoint))

    def parse(self, stdout: str, stderr: str) -> WorkloadResult:
        report = gotpc.parse_tpcc(stdout, stderr, 0)
        new_order = report.summary.get("NEW_ORDER")
        counted = sum(s.count for s in report.summary.values()) if report.summary else None
        return WorkloadResult(
            throughput=report.tpmc,
            throughput_unit=self.throughput_unit,
            latency_avg_ms=new_order.latency_avg_ms if new_order else None,
            latency_stddev_ms=None,
            transactions=counted,
            failed=sum(report.errors.values()) if report.errors or report.ok else None,
            errors=tuple(report.error_lines),
            version=None,
            report={
                "tpmc": report.tpmc,
                "tpm_total": report.tpm_total,
                "summary": {op: asdict(s) for op, s in report.summary.items()},
                "errors": report.errors,
                "failure": report.failure,
            },
        )

    def verdict(self, exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
        return driver_common.verdict("go-tpc", exit_code, result, server_alive=server_alive)

    def record(self, result: WorkloadResult, stderr: str, raw_dir: Path) -> RecordPart:
        r = result.report
        metrics: dict[str, float | None] = {
            "tpm_total": r.get("tpm_total"),
            "nopm": r.get("tpmc"),
        }
        for op, s in r.get("summary", {}).items():
            metrics[f"{op.lower()}_latency_avg_ms"] = s["latency_avg_ms"]
            metrics[f"{op.lower()}_latency_p95_ms"] = s["latency_p95_ms"]
        stdout = (raw_dir / "tpcc.stdout").read_text()
        intervals = gotpc.parse_tpcc(stdout, stderr, 0).intervals
        return RecordPart(metrics=metrics, series=_series(intervals))


def _series(intervals: list[list[gotpc.OpStats]]) -> dict[str, list[tuple[float, float | None]]]:
    """Per interval (go-tpc's 1 s): NEW_ORDER per minute (tpmC over time), its mean and
    95th-percentile latency, and all operations per minute (tpmTotal over time)."""
    tpmc: list[tuple[float, float | None]] = []
    lat: list[tuple[float, float | None]] = []
    p95: list[tuple[float, float | None]] = []
    total: list[tuple[float, float | None]] = []
    for i, ops in enumerate(intervals, start=1):
        t = float(i * gotpc.INTERVAL_S)
        by_op = {o.op: o for o in ops}
        no = by_op.get("NEW_ORDER")
        tpmc.append((t, no.tpm if no else 0.0))
        lat.append((t, no.latency_avg_ms if no else None))
        p95.append((t, no.latency_p95_ms if no else None))
        total.append((t, sum(o.tpm for o in ops if not o.op.endswith("_ERR"))))
    return {"tpmc": tpmc, "latency_ms": lat, "latency_p95_ms": p95, "tpm_total": total}


def _warehouses(dataset: DatasetRequest) -> int:
    return int(dataset.option("warehouses", 1) or 1)


def _target(endpoint: Endpoint) -> gotpc.Target:
    return gotpc.Target(endpoint.socket_dir, endpoint.port, endpoint.user, DATABASE)


@functools.cache
def _program() -> str:
    return str(tools.locate("tpcc").path)

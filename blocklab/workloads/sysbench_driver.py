"""sysbench (oltp_* tests, pgsql driver) as a WorkloadDriver (blocklab.workloads.base).

Experiment file: `workload = { driver = "sysbench", test = "oltp_write_only", tables = 4,
table_size = 100000, threads = 8 }`. The dataset is (tables, table_size): every oltp_*
test runs on the same `sbtest1..N` tables, which `sysbench oltp_read_write prepare`
loads into the database `sbtest`. `threads` is the run's concurrency (the variant's
clients). A given matrix.scale S (--scale) caps table_size at S x 1,000 rows.

Throughput: sysbench's transactions per second from its final report; latency avg, 95th
percentile and max in ms; per-second tps, qps, 95th-percentile latency and errors/s from
`--report-interval=1`. "ignored errors" (deadlocks, serialization failures sysbench
retries by design) are a metric, not a failure.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from blocklab.model import DatasetRequest, WorkloadRequest
from blocklab.postgres.installation import Installation
from blocklab.workloads import driver_common, sysbench, tools
from blocklab.workloads.base import DriverSpec, Endpoint, RecordPart, WorkloadResult

DATABASE = "sbtest"
PREPARE_TEST = "oltp_read_write"  # every oltp_* test prepares the same tables
SCALE_ROWS = 1000  # matrix.scale S caps table_size at S x SCALE_ROWS
ROW_DATA_BYTES = 4 + 4 + 121 + 61  # id, k int4; c char(120), pad char(60) with headers
KEYS = ("test", "tables", "table_size", "threads")


class SysbenchDriver:
    name = "sysbench"
    throughput_metric = "tps"
    throughput_unit = "transactions/s"
    database = DATABASE
    sets_fillfactor = False
    vacuum_after_load = True

    def read_spec(
        self, table: Mapping[str, Any], path: str, *, scale: int | None = None
    ) -> DriverSpec:
        keys = driver_common.Keys(table, path, KEYS)
        test = keys.choice("test", "oltp_read_write", sysbench.TESTS)
        tables = keys.integer("tables", 1, 1, sysbench.MAX_TABLES)
        size = keys.integer("table_size", 10000, 1, sysbench.MAX_TABLE_SIZE)
        threads = keys.integer("threads", None, 1, sysbench.MAX_TABLES)
        assert tables is not None and size is not None
        if scale is not None:
            size = min(size, scale * SCALE_ROWS)
        label = f"{test} {tables}x{size}" + (f" thr={threads}" if threads else "")
        return DriverSpec(
            label=label,
            dataset={"tables": tables, "table_size": size},
            run={"test": test, "tables": tables, "table_size": size},  # sysbench run needs them
            clients=threads,
        )

    def check_machine(self) -> str:
        return tools.locate(self.name).version

    def dataset_bytes(self, dataset: DatasetRequest, block_size_bytes: int) -> tuple[int, str]:
        tables, rows = _size(dataset)
        row = driver_common.row_bytes(ROW_DATA_BYTES)
        heap = driver_common.table_bytes(rows, row, block_size_bytes, dataset.fillfactor)
        indexes = 2 * driver_common.btree_bytes(rows, 4, block_size_bytes)
        return tables * (heap + indexes), f"sysbench {tables} table(s) x {rows} rows"

    def load_estimate_s(self, dataset: DatasetRequest) -> float:
        """Multi-row INSERTs, the k_N index, VACUUM: about 25,000 rows/s here."""
        tables, rows = _size(dataset)
        return 5.0 + tables * rows / 25_000

    def dataset_label(self, dataset: DatasetRequest) -> str:
        tables, rows = _size(dataset)
        return f"sysbench {PREPARE_TEST} prepare --tables={tables} --table-size={rows}"

    def init_commands(
        self, inst: Installation, endpoint: Endpoint, dataset: DatasetRequest
    ) -> list[list[str]]:
        tables, rows = _size(dataset)
        opts = sysbench.Options(PREPARE_TEST, tables, rows, threads=tables)
        return [sysbench.prepare_argv(_program(), opts, _target(endpoint))]

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
        """`sysbench TEST ... run`: the workload's options carry the dataset's tables and
        table_size too (sysbench picks rows by them)."""
        opts = sysbench.Options(
            test=str(workload.option("test")),
            tables=int(workload.option("tables", 1) or 1),
            table_size=int(workload.option("table_size", 1) or 1),
            threads=workload.clients,
            time_s=duration_s or workload.duration_s,
        )
        return sysbench.run_argv(_program(), opts, _target(endpoint))

    def parse(self, stdout: str, stderr: str) -> WorkloadResult:
        report = sysbench.parse(stdout, stderr, 0)
        clean = report.failure is None
        return WorkloadResult(
            throughput=report.tps,
            throughput_unit=self.throughput_unit,
            latency_avg_ms=report.latency_avg_ms,
            latency_stddev_ms=None,
            transactions=report.transactions,
            failed=0 if clean else None,
            errors=tuple(_fatal_lines(stdout, stderr)),
            version=report.version,
            report={k: v for k, v in asdict(report).items() if k != "series"},
        )

    def verdict(self, exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
        return driver_common.verdict(self.name, exit_code, result, server_alive=server_alive)

    def record(self, result: WorkloadResult, stderr: str, raw_dir: Path) -> RecordPart:
        r = result.report
        metrics = {
            k: _num(r.get(k))
            for k in ("qps", "ignored_errors", "reconnects", "latency_p95_ms", "latency_max_ms")
        }
        lines = sysbench.parse_intervals((raw_dir / f"{self.name}.stdout").read_text())
        series: dict[str, list[tuple[float, float | None]]] = {
            "tps": [(x.t_s, x.tps) for x in lines],
            "qps": [(x.t_s, x.qps) for x in lines],
            "latency_p95_ms": [(x.t_s, x.latency_p95_ms) for x in lines],
            "errors_per_s": [(x.t_s, x.errors_per_s) for x in lines],
        }
        return RecordPart(metrics=metrics, series=series)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def _size(dataset: DatasetRequest) -> tuple[int, int]:
    return int(dataset.option("tables", 1) or 1), int(dataset.option("table_size", 1) or 1)


def _target(endpoint: Endpoint) -> sysbench.Target:
    return sysbench.Target(endpoint.socket_dir, endpoint.port, endpoint.user, DATABASE)


@functools.cache
def _program() -> str:
    return str(tools.locate("sysbench").path)


def _fatal_lines(stdout: str, stderr: str) -> list[str]:
    return [ln for ln in (stdout + "\n" + stderr).splitlines() if ln.startswith("FATAL:")]

"""pgbench as a WorkloadDriver (blocklab.workloads.base): the command lines and parsers
of blocklab.workloads.pgbench behind the interface the runner and datasets call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from blocklab.model import DatasetRequest, WorkloadRequest
from blocklab.postgres.installation import Installation
from blocklab.workloads import pages, pgbench, pgbench_latency
from blocklab.workloads.base import DriverSpec, Endpoint, RecordPart, WorkloadResult
from blocklab.workloads.execution import DRIVER_DIR

# pgbench writes its per-transaction logs (sampled) itself, as the driver's user, into its
# working directory (a relative --log-prefix); blocklab.workloads.execution copies them
# into raw_dir/DRIVER_DIR
LOG_NAME = "pgbench_log"
LOG_PREFIX = f"{DRIVER_DIR}/{LOG_NAME}"


def _target(endpoint: Endpoint) -> pgbench.Target:
    return pgbench.Target(endpoint.socket_dir, endpoint.port, endpoint.user, endpoint.dbname)


class PgbenchDriver:
    name = "pgbench"
    throughput_metric = "tps"
    throughput_unit = "transactions/s"
    database = "postgres"
    sets_fillfactor = True  # pgbench -i -F
    vacuum_after_load = False  # pgbench -i vacuums its tables

    def read_spec(
        self, table: Mapping[str, Any], path: str, *, scale: int | None = None
    ) -> DriverSpec:
        """pgbench's keys (builtin, scripts, query_mode) are read by
        blocklab.experiment_file.workload,
        which resolves script files against the experiment file's directory."""
        raise NotImplementedError(
            "pgbench's workload keys are read by blocklab.experiment_file.workload"
        )

    def check_machine(self) -> str:
        """pgbench is built with every PostgreSQL build: nothing to look for."""
        return "built with the server"

    def dataset_bytes(self, dataset: DatasetRequest, block_size_bytes: int) -> tuple[int, str]:
        nbytes = pages.pgbench_tables_bytes(dataset.scale, dataset.fillfactor, block_size_bytes)
        return nbytes, f"pgbench scale {dataset.scale}"

    def load_estimate_s(self, dataset: DatasetRequest) -> float:
        """pgbench -i, VACUUM and the snapshot: a few seconds plus 0.6 s per scale unit."""
        return 5.0 + 0.6 * dataset.scale

    def dataset_label(self, dataset: DatasetRequest) -> str:
        return f"pgbench -i -s {dataset.scale} -F {dataset.fillfactor}"

    def init_commands(
        self, inst: Installation, endpoint: Endpoint, dataset: DatasetRequest
    ) -> list[list[str]]:
        target = _target(endpoint)
        return [
            pgbench.init_command(inst, target, scale=dataset.scale, fillfactor=dataset.fillfactor)
        ]

    def prepare_sql(self, workload: WorkloadRequest) -> str | None:
        """The vacuum pgbench would do before a built-in script (see pgbench's docstring)."""
        return pgbench.PREPARE_SQL if workload.builtin is not None else None

    def command(
        self,
        inst: Installation,
        endpoint: Endpoint,
        workload: WorkloadRequest,
        *,
        raw_dir: Path | None,
        duration_s: int | None = None,
    ) -> list[str]:
        target = _target(endpoint)
        if raw_dir is None:  # warm-up: no logs, no progress lines
            return pgbench.command(
                inst, target, workload, log_prefix=None, duration_s=duration_s, progress=False
            )
        return pgbench.command(
            inst, target, workload, log_prefix=Path(LOG_NAME), duration_s=duration_s
        )

    def parse(self, stdout: str, stderr: str) -> WorkloadResult:
        report = pgbench.parse_report(stdout)
        return WorkloadResult(
            throughput=report.tps,
            throughput_unit="tps",
            latency_avg_ms=report.latency_avg_ms,
            latency_stddev_ms=report.latency_stddev_ms,
            transactions=report.transactions,
            failed=report.failed_transactions,
            errors=tuple(pgbench.parse_errors(stderr)),
            version=report.version,
            report=asdict(report),
        )

    def verdict(self, exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
        report = pgbench.PgbenchReport(**result.report)
        return pgbench.verdict(
            exit_code, report, server_alive=server_alive, errors=list(result.errors)
        )

    def record(self, result: WorkloadResult, stderr: str, raw_dir: Path) -> RecordPart:
        """The latency percentiles and the coverage of the sampled per-transaction log
        (blocklab.workloads.pgbench_latency; None without a log), the initial connection
        time and the progress lines' per-second series; the log's sampling rate and counts
        go to the run's provenance (`transaction_log`)."""
        hist, facts = transaction_log(raw_dir / LOG_PREFIX)
        logged = hist.logged if hist is not None else 0
        metrics: dict[str, float | None] = {
            **pgbench_latency.metrics(hist),
            "transaction_log_coverage_ratio": pgbench_latency.coverage_ratio(
                logged, result.transactions
            )
            if hist is not None
            else None,
        }
        initial_connection_ms = result.report.get("initial_connection_ms")
        if initial_connection_ms is not None:
            metrics["initial_connection_ms"] = initial_connection_ms
        series = pgbench.series_from_progress(pgbench.parse_progress(stderr))
        return RecordPart(metrics=metrics, series=series, provenance={"transaction_log": facts})


def transaction_log(
    log_prefix: Path,
) -> tuple[pgbench_latency.LatencyHistogram | None, dict[str, Any]]:
    """pgbench's per-transaction log files for `log_prefix`, streamed into one histogram
    (None when there is none, or one is not a per-transaction log), and what the
    provenance says of them."""
    files = pgbench.log_files(log_prefix)
    facts: dict[str, Any] = {"sampling_rate": pgbench_latency.SAMPLING_RATE, "files": len(files)}
    if not files:
        return None, facts
    hist = pgbench_latency.LatencyHistogram()
    try:
        for path in files:
            with path.open() as lines:
                hist.add_lines(lines)
    except ValueError as e:
        return None, {**facts, "error": f"{path.name}: {e}"}
    return hist, {**facts, "logged": hist.logged, "without_latency": hist.without_latency}

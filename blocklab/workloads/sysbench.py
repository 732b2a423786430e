"""sysbench (Debian's 1.0.20, pgsql driver): command lines and a pure parser of its output.

The oltp_* tests create their own tables (`sbtest1..N`, `CREATE TABLE` then multi-row
INSERTs, then the secondary index `k_N`) in `prepare`, run in `run` and drop them in
`cleanup`. blocklab connects over the server's private unix socket: `--pgsql-host` takes
the socket directory (libpq).

Output (stdout): with `--report-interval=1`, one line per second
"[ 1s ] thds: 2 tps: 968.12 qps: 19472.54 (r/w/o: ...) lat (ms,95%): 5.28 err/s: 4.96
reconn/s: 0.00", then the final report ("transactions: 1067 (353.75 per sec.)",
"ignored errors: 10 (3.32 per sec.)", "reconnects:", "Latency (ms): avg/95th percentile").

Failures: a dead server ends sysbench with a crash (exit -11 here) or "FATAL:" lines and no
final report. "ignored errors" are not failures: they are deadlocks and serialization
failures (SQLSTATE 40P01, 40001) and duplicate keys that sysbench's pgsql driver rolls
back and retries by design; they are recorded as a count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blocklab.errors import UserError
from blocklab.workloads.options import int_in_range, threads_and_time

TESTS = (
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
    "oltp_point_select",
    "oltp_update_index",
    "oltp_insert",
)
MAX_TABLES = 1024
MAX_TABLE_SIZE = 1_000_000_000
REPORT_INTERVAL_S = 1


@dataclass(frozen=True)
class Target:
    """A server's unix socket directory, port, user and database."""

    socket_dir: str
    port: int
    user: str
    dbname: str = "sbtest"

    def args(self) -> list[str]:
        return [
            "--db-driver=pgsql",
            f"--pgsql-host={self.socket_dir}",
            f"--pgsql-port={self.port}",
            f"--pgsql-user={self.user}",
            f"--pgsql-db={self.dbname}",
        ]


@dataclass(frozen=True)
class Options:
    test: str = "oltp_read_write"
    tables: int = 1
    table_size: int = 10000
    threads: int = 1
    time_s: int = 60

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise UserError(
                f"workload.test: unknown sysbench test {self.test!r} (allowed: {', '.join(TESTS)})"
            )
        int_in_range("workload.tables", self.tables, 1, MAX_TABLES)
        int_in_range("workload.table_size", self.table_size, 1, MAX_TABLE_SIZE)
        threads_and_time(self.threads, self.time_s)


def _base(program: str, opts: Options, target: Target) -> list[str]:
    size = [f"--tables={opts.tables}", f"--table-size={opts.table_size}"]
    return [program, opts.test, *target.args(), *size]


def prepare_argv(program: str, opts: Options, target: Target) -> list[str]:
    """Creates and loads the tables (one thread per table, at most opts.threads)."""
    return [*_base(program, opts, target), f"--threads={min(opts.threads, opts.tables)}", "prepare"]


def run_argv(program: str, opts: Options, target: Target) -> list[str]:
    timing = [f"--threads={opts.threads}", f"--time={opts.time_s}"]
    report = [f"--report-interval={REPORT_INTERVAL_S}"]
    return [*_base(program, opts, target), *timing, *report, "run"]


def cleanup_argv(program: str, opts: Options, target: Target) -> list[str]:
    return [*_base(program, opts, target), "cleanup"]


@dataclass(frozen=True)
class IntervalLine:
    t_s: float
    threads: int
    tps: float
    qps: float
    latency_p95_ms: float
    errors_per_s: float
    reconnects_per_s: float


@dataclass(frozen=True)
class Report:
    """sysbench's final report; `failure` is None only for a complete, clean run, and
    only then is there a tps."""

    tps: float | None
    qps: float | None
    transactions: int | None
    queries: int | None
    ignored_errors: int | None
    reconnects: int | None
    latency_avg_ms: float | None
    latency_p95_ms: float | None
    latency_max_ms: float | None
    total_time_s: float | None
    series: list[IntervalLine]
    version: str | None
    failure: str | None

    @property
    def ok(self) -> bool:
        return self.failure is None


_INTERVAL = re.compile(
    r"^\[ *(?P<t>[\d.]+)s \] thds: (?P<thds>\d+) tps: (?P<tps>[\d.]+) qps: (?P<qps>[\d.]+) "
    r"\(r/w/o: [\d./]+\) lat \(ms,95%\): (?P<p95>[\d.]+) err/s: (?P<err>[\d.]+) "
    r"reconn/s: (?P<reconn>[\d.]+)",
    re.MULTILINE,
)


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else None


def _float(pattern: str, text: str) -> float | None:
    found = _find(pattern, text)
    return float(found) if found is not None else None


def _int(pattern: str, text: str) -> int | None:
    found = _find(pattern, text)
    return int(found) if found is not None else None


def parse_intervals(text: str) -> list[IntervalLine]:
    return [
        IntervalLine(
            t_s=float(m["t"]),
            threads=int(m["thds"]),
            tps=float(m["tps"]),
            qps=float(m["qps"]),
            latency_p95_ms=float(m["p95"]),
            errors_per_s=float(m["err"]),
            reconnects_per_s=float(m["reconn"]),
        )
        for m in _INTERVAL.finditer(text)
    ]


def parse(stdout: str, stderr: str, exit_code: int) -> Report:
    """The report of one `sysbench ... run`; never a number without a clean, complete run."""
    transactions = _int(r"^\s+transactions:\s+(\d+)\s+\(", stdout)
    failure = _failure(stdout, stderr, exit_code, transactions)
    tps = _float(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec\.\)", stdout)
    return Report(
        tps=tps if failure is None else None,
        qps=_float(r"^\s+queries:\s+\d+\s+\(([\d.]+) per sec\.\)", stdout),
        transactions=transactions,
        queries=_int(r"^\s+queries:\s+(\d+)\s+\(", stdout),
        ignored_errors=_int(r"^\s+ignored errors:\s+(\d+)\s+\(", stdout),
        reconnects=_int(r"^\s+reconnects:\s+(\d+)\s+\(", stdout),
        latency_avg_ms=_float(r"^\s+avg:\s+([\d.]+)$", stdout),
        latency_p95_ms=_float(r"^\s+95th percentile:\s+([\d.]+)$", stdout),
        latency_max_ms=_float(r"^\s+max:\s+([\d.]+)$", stdout),
        total_time_s=_float(r"^\s+total time:\s+([\d.]+)s$", stdout),
        series=parse_intervals(stdout),
        version=_find(r"^sysbench (\S+)", stdout),
        failure=failure,
    )


def _failure(stdout: str, stderr: str, exit_code: int, transactions: int | None) -> str | None:
    fatal = _find(r"^(FATAL: .*)$", stdout + "\n" + stderr)
    if exit_code != 0:
        return f"sysbench exited with code {exit_code}" + (f": {fatal}" if fatal else "")
    if fatal:
        return fatal
    if transactions is None:
        return "sysbench printed no final report"
    if transactions == 0:
        return "sysbench completed no transaction"
    return None

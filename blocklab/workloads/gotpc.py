"""go-tpc v1.0.12 against PostgreSQL (`-d postgres`): command lines and pure parsers for
its `tpcc` (TPC-C-like) and `tpch` (TPC-H-like) output.

Connection: go-tpc builds the URL postgres://USER:@HOST:PORT/DB?CONN_PARAMS for lib/pq.
`-H '""'` (a CSV-quoted empty host) leaves the URL's host empty and
`--conn-params host=SOCKET_DIR` makes lib/pq use the server's private unix socket, so no
TCP listener is needed. go-tpc creates the database only through a connection to the
database named like the user: blocklab creates it itself before `prepare`.

Output (stdout, `--output plain`): with `--interval 1s` one "[Current] OP - Takes(s): ..,
Count: .., TPM: .., Sum(ms): .., Avg(ms): .., 50th(ms): .., 90th(ms): .., 95th(ms): ..,
99th(ms): .., 99.9th(ms): .., Max(ms): .." line per operation and interval; at the end
"[Summary] OP - ..." lines (OP_ERR for failed ones) and, for tpcc,
"tpmC: N, tpmTotal: N, efficiency: N%". go-tpc's tpmC is the NEW_ORDER rate per minute
(what HammerDB calls NOPM), not a TPC-C-compliant tpmC: no keying or thinking time.
tpch prints "[Summary] Q1: 0.10s", the mean per query in seconds with two decimals, and
records any query faster than 100 ms as 100 ms (its histogram's lowest value): such times
are marked `at_floor`, not believed.

Failures: go-tpc exits 0 even when the server died mid-run. A thread that meets an error
prints "execute run failed, err ..." and stops (no --ignore-error), the other threads go on
and a tpmC is still printed. Such a run is a failure, and so is any OP_ERR count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from blocklab.errors import UserError
from blocklab.workloads.options import int_in_range, threads_and_time

MAX_WAREHOUSES = 10_000
TPCH_QUERIES = tuple(f"q{n}" for n in range(1, 23))
TPCH_FLOOR_S = 0.10  # go-tpc tpch's lowest recorded latency (100 ms)
INTERVAL_S = 1


@dataclass(frozen=True)
class Target:
    """A server's unix socket directory, port, user and database."""

    socket_dir: str
    port: int
    user: str
    dbname: str

    def args(self) -> list[str]:
        return [
            "-d",
            "postgres",
            "-H",
            '""',
            "-P",
            str(self.port),
            "-U",
            self.user,
            "-D",
            self.dbname,
            "--conn-params",
            f"host={self.socket_dir}&sslmode=disable",
        ]


@dataclass(frozen=True)
class TpccOptions:
    warehouses: int = 1
    threads: int = 1
    time_s: int = 60

    def __post_init__(self) -> None:
        int_in_range("workload.warehouses", self.warehouses, 1, MAX_WAREHOUSES)
        threads_and_time(self.threads, self.time_s)


def tpcc_prepare_argv(program: str, opts: TpccOptions, target: Target) -> list[str]:
    """Creates and loads the nine tables, without go-tpc's consistency checks: they check
    go-tpc's own generator, not the database, and took 58 of a 1-warehouse load's 68 s
    here (`go-tpc tpcc check` runs them against a restored dataset by hand)."""
    threads = min(opts.threads, opts.warehouses)
    return [program, "tpcc", *target.args(), "--warehouses", str(opts.warehouses),
            "-T", str(threads), "prepare", "--no-check"]  # fmt: skip


def tpcc_run_argv(program: str, opts: TpccOptions, target: Target) -> list[str]:
    return [program, "tpcc", *target.args(), "--warehouses", str(opts.warehouses),
            "-T", str(opts.threads), "--time", f"{opts.time_s}s",
            "--interval", f"{INTERVAL_S}s", "--output", "plain", "run"]  # fmt: skip


def tpcc_cleanup_argv(program: str, opts: TpccOptions, target: Target) -> list[str]:
    return [program, "tpcc", *target.args(), "--warehouses", str(opts.warehouses), "cleanup"]


@dataclass(frozen=True)
class TpchOptions:
    """The TPC-H-like run: go-tpc's 22 queries over data blocklab loads (tpchgen-cli)."""

    scale_factor: float = 0.01
    queries: tuple[str, ...] = TPCH_QUERIES
    threads: int = 1

    def __post_init__(self) -> None:
        sf = self.scale_factor
        if isinstance(sf, bool) or not isinstance(sf, int | float) or not 0.01 <= sf <= 100:
            raise UserError(f"workload.scale_factor: {sf!r} is not a number from 0.01 to 100")
        unknown = [q for q in self.queries if q not in TPCH_QUERIES]
        if unknown or not self.queries:
            raise UserError(
                f"workload.queries: {unknown or 'none'} not allowed "
                f"(allowed: q1 to q22, at least one)"
            )
        threads_and_time(self.threads, None)


def tpch_run_argv(program: str, opts: TpchOptions, target: Target) -> list[str]:
    """Each query once per thread, in the order given. `--sf 1` only tells go-tpc which
    answers its --check would use; the data's scale is the one blocklab loaded."""
    count = len(opts.queries) * opts.threads
    return [program, "tpch", *target.args(), "--sf", "1", "--queries", ",".join(opts.queries),
            "-T", str(opts.threads), "--count", str(count),
            "--interval", f"{INTERVAL_S}s", "--output", "plain", "run"]  # fmt: skip


@dataclass(frozen=True)
class OpStats:
    """One operation's line: a [Current] interval or the [Summary]."""

    op: str
    takes_s: float
    count: int
    tpm: float
    sum_ms: float
    latency_avg_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_p999_ms: float
    latency_max_ms: float


@dataclass(frozen=True)
class TpccReport:
    """go-tpc's tpcc report. tpmC and tpmTotal are None unless the run was clean; the
    per-operation lines are kept either way (they show where it failed)."""

    tpmc: float | None  # NEW_ORDER per minute (go-tpc's tpmC)
    tpm_total: float | None
    summary: dict[str, OpStats]  # by operation, without the _ERR ones
    errors: dict[str, int]  # OP -> count of OP_ERR
    intervals: list[list[OpStats]]  # one list of operations per interval
    error_lines: list[str]
    failure: str | None

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class QueryTime:
    query: str  # "q1"
    mean_s: float
    at_floor: bool  # at go-tpc's 100 ms floor: the query took 100 ms or less


@dataclass(frozen=True)
class TpchReport:
    """Per-query times, empty unless the run was clean."""

    queries: dict[str, QueryTime]  # from the [Summary] lines
    failed_queries: list[str]  # queries with a [Summary] QN_ERR line (count not printed)
    error_lines: list[str]
    failure: str | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None


_OP = re.compile(
    r"^\[(?P<kind>Current|Summary)\] (?P<op>[A-Z_]+) - Takes\(s\): (?P<takes>[\d.]+), "
    r"Count: (?P<count>\d+), TPM: (?P<tpm>[\d.]+), Sum\(ms\): (?P<sum>[\d.]+), "
    r"Avg\(ms\): (?P<avg>[\d.]+), 50th\(ms\): (?P<p50>[\d.]+), 90th\(ms\): (?P<p90>[\d.]+), "
    r"95th\(ms\): (?P<p95>[\d.]+), 99th\(ms\): (?P<p99>[\d.]+), "
    r"99\.9th\(ms\): (?P<p999>[\d.]+), Max\(ms\): (?P<max>[\d.]+)$",
    re.MULTILINE,
)
_TPMC = re.compile(r"^tpmC: ([\d.]+), tpmTotal: ([\d.]+), efficiency: [\d.]+%$", re.MULTILINE)
_QUERY = re.compile(r"^\[Summary\] Q(\d+)(_ERR)?: ([\d.]+)s$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(?:\[[\d: -]+\] )?(execute \w+ failed, err .*)$", re.MULTILINE)
_NOT_CONTINUATION = re.compile(r"^(\[|Finished$|tpmC: |\d{4}/\d\d/\d\d )")
_PANIC = re.compile(r"^panic: (.*)$", re.MULTILINE)


def _op(m: re.Match[str]) -> OpStats:
    return OpStats(
        op=m["op"],
        takes_s=float(m["takes"]),
        count=int(m["count"]),
        tpm=float(m["tpm"]),
        sum_ms=float(m["sum"]),
        latency_avg_ms=float(m["avg"]),
        latency_p50_ms=float(m["p50"]),
        latency_p90_ms=float(m["p90"]),
        latency_p95_ms=float(m["p95"]),
        latency_p99_ms=float(m["p99"]),
        latency_p999_ms=float(m["p999"]),
        latency_max_ms=float(m["max"]),
    )


def _intervals(current: list[OpStats]) -> list[list[OpStats]]:
    """[Current] lines in groups: an interval's operations are printed in sorted order, so
    a name that does not sort after the previous one starts the next interval."""
    groups: list[list[OpStats]] = []
    for stats in current:
        if not groups or stats.op <= groups[-1][-1].op:
            groups.append([])
        groups[-1].append(stats)
    return groups


def _error_lines(stdout: str, stderr: str) -> list[str]:
    """Each "execute ... failed, err ..." message (the failed SQL spans lines; they are
    joined) and any Go panic."""
    errors: list[str] = []
    inside = False
    for line in (stdout + "\n" + stderr).splitlines():
        start = _ERROR_LINE.match(line)
        if start:
            errors.append(start.group(1))
            inside = True
        elif inside and line and not _NOT_CONTINUATION.match(line):
            errors[-1] += " " + line.strip()
        else:
            inside = False
    return errors + [f"panic: {m.group(1)}" for m in _PANIC.finditer(stdout + "\n" + stderr)]


def _failure(exit_code: int, errors: dict[str, int], error_lines: list[str]) -> str | None:
    if exit_code != 0:
        return f"go-tpc exited with code {exit_code}" + (
            f": {error_lines[0]}" if error_lines else ""
        )
    if error_lines:
        return f"{len(error_lines)} error line(s), the first: {error_lines[0]}"
    failed = {op: n for op, n in errors.items() if n}
    if failed:
        return f"failed operations: {failed}"
    return None


def parse_tpcc(stdout: str, stderr: str, exit_code: int) -> TpccReport:
    current, summary, errors = [], {}, {}
    for m in _OP.finditer(stdout):
        stats = _op(m)
        if m["kind"] == "Current":
            current.append(stats)
        elif stats.op.endswith("_ERR"):
            errors[stats.op.removesuffix("_ERR")] = stats.count
        else:
            summary[stats.op] = stats
    error_lines = _error_lines(stdout, stderr)
    tpm = _TPMC.search(stdout)
    failure = _failure(exit_code, errors, error_lines)
    if failure is None and (tpm is None or "NEW_ORDER" not in summary):
        failure = "go-tpc printed no tpmC summary"
    believed = tpm if failure is None else None
    return TpccReport(
        tpmc=float(believed.group(1)) if believed else None,
        tpm_total=float(believed.group(2)) if believed else None,
        summary=summary,
        errors=errors,
        intervals=_intervals(current),
        error_lines=error_lines,
        failure=failure,
    )


def parse_tpch(
    stdout: str, stderr: str, exit_code: int, expected: tuple[str, ...] = TPCH_QUERIES
) -> TpchReport:
    """Per-query mean times from the [Summary] lines; every expected query must be there."""
    queries: dict[str, QueryTime] = {}
    failed: list[str] = []
    summary = re.split(r"^Finished$", stdout, maxsplit=1, flags=re.MULTILINE)[-1]
    for m in _QUERY.finditer(summary):
        name = f"q{m.group(1)}"
        if m.group(2):
            failed.append(name)
            continue
        mean_s = float(m.group(3))
        queries[name] = QueryTime(name, mean_s, at_floor=mean_s <= TPCH_FLOOR_S)
    error_lines = _error_lines(stdout, stderr)
    missing = [q for q in expected if q not in queries]
    failure = _failure(exit_code, dict.fromkeys(failed, 1), error_lines)
    if failure is None and missing:
        failure = f"go-tpc reported no time for {', '.join(missing)}"
    return TpchReport(queries if failure is None else {}, failed, error_lines, failure, missing)

"""pgbench: command lines and pure parsers for its report, progress lines and aggregate log.

VACUUM: pgbench normally vacuums pgbench_branches and pgbench_tellers and truncates
pgbench_history before a built-in script runs. blocklab does the same work itself
(`PREPARE_SQL`, run by the runner before its CHECKPOINT) and always passes `-n`, so that
the measured window holds the workload only and custom scripts that do not use the
pgbench tables work unchanged. The result is what pgbench users expect from a default
run, with the vacuum outside the timed part.

Per-second series come from the `-P 1` progress lines: they cover the whole run (their
tps add up to the reported transactions), but for its last second at times: pgbench's first
thread prints a line when it finds the second passed and leaves its loop once its clients
are done, which at the end of the run can come first (threadRun). The measured run writes
a per-transaction log sampled at blocklab.workloads.pgbench_latency.SAMPLING_RATE (`-l
--sampling-rate`), for its latency percentiles; it is kept raw, and its coverage is
recorded. Runs stored before
wrote the aggregate log (`--aggregate-interval=1`, parsed below) instead, which has no
percentiles and does not cover the whole run: pgbench writes an interval only when a later
transaction completes, so the last interval(s) of each thread are lost (measured here: 4
of 5 seconds logged, 9002 of 9960 transactions; with two threads 1655 of 2397). The
per-transaction log loses nothing (measured: 21,744 lines for 21,744 transactions).

Formats (PG 15-18): the report on stdout ends with "tps = N (without initial connection
time)"; `-P 1` writes "progress: 1.0 s, 5009.4 tps, lat 0.760 ms stddev 0.308, 0 failed"
lines to stderr; `-l` writes per thread a file `PREFIX.PID[.THREAD]`: per transaction
(see blocklab.workloads.pgbench_latency) or, with `--aggregate-interval=1`, with lines
"interval_start num_transactions sum_latency sum_latency_2 min_latency max_latency sum_lag
sum_lag_2 min_lag max_lag skipped retried retries failures serialization_failures
deadlock_failures" (latencies in microseconds, interval_start in Unix epoch seconds; PG 15
fixed this column order).
"""

from __future__ import annotations

import os
import pwd
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import UserError
from blocklab.model import WorkloadRequest
from blocklab.paths import untraversable
from blocklab.postgres.cluster import SERVER_USER
from blocklab.postgres.installation import Installation
from blocklab.workloads.pgbench_latency import SAMPLING_RATE

PREPARE_SQL = "VACUUM pgbench_branches; VACUUM pgbench_tellers; TRUNCATE pgbench_history;"
AGGREGATE_INTERVAL_S = 1  # of the aggregate logs runs stored before wrote


@dataclass(frozen=True)
class Target:
    """Where pgbench connects: a unix socket directory, port, user and database."""

    host: str
    port: int
    user: str
    dbname: str = "postgres"

    def args(self) -> list[str]:
        return ["-h", self.host, "-p", str(self.port), "-U", self.user]


@dataclass(frozen=True)
class PgbenchReport:
    tps: float | None  # the "without initial connection time" number
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    transactions: int | None
    failed_transactions: int | None
    scaling_factor: int | None
    query_mode: str | None
    clients: int | None
    threads: int | None
    duration_s: int | None
    initial_connection_ms: float | None
    transaction_type: str | None
    version: str | None


@dataclass(frozen=True)
class ProgressLine:
    t_s: float
    tps: float
    latency_ms: float | None
    latency_stddev_ms: float | None
    failed: int | None


@dataclass(frozen=True)
class AggregateRow:
    interval_start: int  # Unix epoch seconds
    num_transactions: int
    sum_latency_us: float
    sum_latency_2_us2: float
    min_latency_us: float
    max_latency_us: float
    failures: int  # total failures (serialization + deadlock + other) where logged

    @property
    def latency_avg_ms(self) -> float | None:
        if self.num_transactions == 0:
            return None
        return self.sum_latency_us / self.num_transactions / 1000.0


# -- command lines -------------------------------------------------------------------------


def script_args(workload: WorkloadRequest) -> list[str]:
    args: list[str] = []
    if workload.builtin is not None:
        args += ["-b", workload.builtin]
    for script in workload.scripts:
        path = script.rsplit("@", 1)[0] if "@" in script else script
        if not Path(path).is_file():
            raise UserError(
                f"workload.scripts: {path} does not exist (give absolute paths to pgbench "
                "script files, optionally with @weight)"
            )
        closed = closed_to_driver(Path(path))
        if closed:
            raise UserError(
                f"workload.scripts: {path}: pgbench runs as the OS user {SERVER_USER!r}, "
                f"which {closed}; allowed: a script file every user may read (chmod o+r, "
                "and o+x on its directories)"
            )
        args += ["-f", script]
    return args


def closed_to_driver(path: Path) -> str:
    """Why the driver's user (the server user, when it exists) cannot read `path`
    ("" when it can, or when blocklab runs as that user). By owner, group and other bits,
    as blocklab.paths.untraversable."""
    try:
        pw = pwd.getpwnam(SERVER_USER)
    except KeyError:
        return ""
    if pw.pw_uid == os.geteuid():
        return ""
    blocked = untraversable(path.parent, pw.pw_uid, pw.pw_gid)
    if blocked is not None:
        return f"cannot enter {blocked}"
    st = path.stat()
    if st.st_uid == pw.pw_uid:
        bit = stat.S_IRUSR
    elif st.st_gid == pw.pw_gid:
        bit = stat.S_IRGRP
    else:
        bit = stat.S_IROTH
    return "" if st.st_mode & bit else f"may not read it (mode {stat.S_IMODE(st.st_mode):04o})"


def command(
    inst: Installation,
    target: Target,
    workload: WorkloadRequest,
    *,
    log_prefix: Path | None,
    duration_s: int | None = None,
    progress: bool = True,
) -> list[str]:
    """The pgbench argv for one measured (or, without log_prefix, warm-up) execution."""
    argv = [str(inst.bin("pgbench")), *target.args(), "-n"]
    if progress:
        argv += ["-P", "1"]
    if log_prefix is not None:
        argv += ["-l", f"--sampling-rate={SAMPLING_RATE}", f"--log-prefix={log_prefix}"]
    argv += script_args(workload)
    argv += [
        "-M",
        workload.query_mode,
        "-c",
        str(workload.clients),
        "-j",
        str(workload.threads),
        "-T",
        str(duration_s if duration_s is not None else workload.duration_s),
        target.dbname,
    ]
    return argv


def init_command(inst: Installation, target: Target, *, scale: int, fillfactor: int) -> list[str]:
    return [
        str(inst.bin("pgbench")),
        *target.args(),
        "-i",
        "-s",
        str(scale),
        "-F",
        str(fillfactor),
        target.dbname,
    ]


def log_files(log_prefix: Path) -> list[Path]:
    """The per-thread files pgbench wrote for `log_prefix` (PREFIX.PID and PREFIX.PID.N)."""
    found = log_prefix.parent.glob(log_prefix.name + ".*")
    return sorted(
        (p for p in found if re.fullmatch(r"\d+(\.\d+)?", p.name[len(log_prefix.name) + 1 :])),
        key=lambda p: [int(x) for x in p.name[len(log_prefix.name) + 1 :].split(".")],
    )


# -- parsers (pure) ------------------------------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_REPORT_PATTERNS = {
    "version": r"^pgbench \((.+)\)$",
    "transaction_type": r"^transaction type: (.+)$",
    "scaling_factor": r"^scaling factor: (\d+)$",
    "query_mode": r"^query mode: (\w+)$",
    "clients": r"^number of clients: (\d+)$",
    "threads": r"^number of threads: (\d+)$",
    "duration_s": r"^duration: (\d+) s$",
    "transactions": r"^number of transactions actually processed: (\d+)",
    "failed_transactions": r"^number of failed transactions: (\d+)",
    "latency_avg_ms": rf"^latency average = {_NUM} ms$",
    "latency_stddev_ms": rf"^latency stddev = {_NUM} ms$",
    "initial_connection_ms": rf"^initial connection time = {_NUM} ms$",
    "tps": rf"^tps = {_NUM} \(without initial connection time\)$",
}
_INTS = {
    "scaling_factor",
    "clients",
    "threads",
    "duration_s",
    "transactions",
    "failed_transactions",
}
_FLOATS = {"latency_avg_ms", "latency_stddev_ms", "initial_connection_ms", "tps"}


def parse_report(stdout: str) -> PgbenchReport:
    """The final report pgbench prints on stdout. Missing fields are None."""
    found: dict[str, object] = {}
    for key, pattern in _REPORT_PATTERNS.items():
        m = re.search(pattern, stdout, re.MULTILINE)
        if m is None:
            found[key] = None
        elif key in _INTS:
            found[key] = int(m.group(1))
        elif key in _FLOATS:
            found[key] = float(m.group(1))
        else:
            found[key] = m.group(1).strip()
    return PgbenchReport(**found)  # type: ignore[arg-type]


_PROGRESS = re.compile(
    rf"^progress: {_NUM} s, {_NUM} tps, lat (?:{_NUM} ms stddev ({_NUM}|NaN)|NaN ms stddev NaN)"
    r"(?:, (\d+) failed)?"
)


def parse_progress(stderr: str) -> list[ProgressLine]:
    """The `-P` lines pgbench writes to stderr (other lines are ignored)."""
    rows = []
    for line in stderr.splitlines():
        m = _PROGRESS.match(line)
        if m is None:
            continue
        t, tps, lat, sd, _sd_raw, failed = m.groups()
        rows.append(
            ProgressLine(
                t_s=float(t),
                tps=float(tps),
                latency_ms=float(lat) if lat is not None else None,
                latency_stddev_ms=float(sd) if sd not in (None, "NaN") else None,
                failed=int(failed) if failed is not None else None,
            )
        )
    return rows


def parse_errors(stderr: str) -> list[str]:
    """pgbench's own error lines ("pgbench: error: ..."), in order."""
    return [
        line.split("error: ", 1)[1]
        for line in stderr.splitlines()
        if line.startswith("pgbench: error: ")
    ]


def verdict(
    exit_code: int | None,
    report: PgbenchReport,
    *,
    server_alive: bool,
    errors: Sequence[str] = (),
) -> str:
    """Why a measured execution is not a result ("" when it is one). Pure."""
    reasons = []
    if exit_code != 0:
        detail = f": {errors[0]}" if errors else ""
        if len(errors) > 1 and errors[-1] != errors[0]:
            detail += f" (last error: {errors[-1]})"
        reasons.append(f"pgbench exit code {exit_code}{detail}")
    if not server_alive:
        reasons.append("the server died during the run")
    if report.failed_transactions:
        reasons.append(f"{report.failed_transactions} failed transactions")
    if report.tps is None:
        reasons.append("pgbench printed no tps line")
    elif not report.transactions:
        reasons.append("no transaction was processed")
    return "; ".join(reasons)


def parse_aggregate_log(text: str) -> list[AggregateRow]:
    """One thread's aggregate log (PG 15-18 column order, see module docstring)."""
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 6:
            raise ValueError(f"aggregate log line {n}: expected at least 6 columns: {line!r}")
        failures = int(fields[13]) if len(fields) >= 14 else 0
        rows.append(
            AggregateRow(
                interval_start=int(fields[0]),
                num_transactions=int(fields[1]),
                sum_latency_us=float(fields[2]),
                sum_latency_2_us2=float(fields[3]),
                min_latency_us=float(fields[4]),
                max_latency_us=float(fields[5]),
                failures=failures,
            )
        )
    return rows


def merge_aggregates(per_thread: Iterable[Sequence[AggregateRow]]) -> list[AggregateRow]:
    """Combine the threads' logs interval by interval (sums add, min/max combine)."""
    merged: dict[int, AggregateRow] = {}
    for rows in per_thread:
        for r in rows:
            m = merged.get(r.interval_start)
            merged[r.interval_start] = r if m is None else _combine(m, r)
    return [merged[k] for k in sorted(merged)]


def _combine(a: AggregateRow, b: AggregateRow) -> AggregateRow:
    lo = [r.min_latency_us for r in (a, b) if r.num_transactions]
    hi = [r.max_latency_us for r in (a, b) if r.num_transactions]
    return AggregateRow(
        interval_start=a.interval_start,
        num_transactions=a.num_transactions + b.num_transactions,
        sum_latency_us=a.sum_latency_us + b.sum_latency_us,
        sum_latency_2_us2=a.sum_latency_2_us2 + b.sum_latency_2_us2,
        min_latency_us=min(lo) if lo else a.min_latency_us,
        max_latency_us=max(hi) if hi else a.max_latency_us,
        failures=a.failures + b.failures,
    )


def series_from_progress(
    rows: Sequence[ProgressLine],
) -> dict[str, list[tuple[float, float | None]]]:
    """Per-second series from the `-P 1` lines: t_s is pgbench's own time stamp, the end
    of the second the row covers (1.0 = the workload's first second)."""
    return {
        "tps": [(r.t_s, r.tps) for r in rows],
        "latency_ms": [(r.t_s, r.latency_ms) for r in rows],
        "latency_stddev_ms": [(r.t_s, r.latency_stddev_ms) for r in rows],
    }


def series_from_aggregates(
    rows: Sequence[AggregateRow], interval_s: int = AGGREGATE_INTERVAL_S
) -> dict[str, list[tuple[float, float | None]]]:
    """Per-second series; t_s counts seconds from the first logged interval's start."""
    if not rows:
        return {"tps": [], "latency_ms": [], "latency_max_ms": []}
    t0 = rows[0].interval_start
    tps: list[tuple[float, float | None]] = []
    lat: list[tuple[float, float | None]] = []
    lat_max: list[tuple[float, float | None]] = []
    for r in rows:
        t = float(r.interval_start - t0)
        tps.append((t, r.num_transactions / interval_s))
        lat.append((t, r.latency_avg_ms))
        lat_max.append((t, r.max_latency_us / 1000.0 if r.num_transactions else None))
    return {"tps": tps, "latency_ms": lat, "latency_max_ms": lat_max}

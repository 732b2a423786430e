"""What the instrumentation costs: bare and instrumented pgbench, interleaved, one server.

Each pair runs both arms back to back against the same server and data; the order
alternates between pairs (bare first, then instrumented first, ...), so that drift of a
shared machine falls on both arms alike. The figure is the paired ratio of tps
(instrumented / bare) with its 95 % CI from blocklab.analysis.stats.compare_paired.

The instrumented arm runs everything that happens while pgbench runs (begin snapshot,
the 1 Hz sampler, the final snapshot and the log parse). The arms differ in that only
(`arm_steps`): both build the probes' context (a psql for the server version) before
the run, both connect and wait for the previous run's backends to exit, hold that
connection open while pgbench runs and wait for pgbench's backends to exit after it (the
bare arm through probes.Bystander). Before, only the instrumented arm did these, and so
started each run on a settled server after a pause, while the bare arm started the instant
the run before it ended: the suspected reason two sessions found the bare arm about 3 %
slower. The pgstattuple space pass is
off here: it runs after the workload, outside the timed window, and on a server that is
not restored between runs it would prune and warm the tables for the next run and so
bias whichever arm comes next.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from blocklab import proc
from blocklab.analysis.stats import Comparison, compare_paired
from blocklab.errors import RunError
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, open_home
from blocklab.postgres.installation import Installation
from blocklab.probes import Bystander, Device, Instrumentation, ProbeContext
from blocklab.state import State
from blocklab.storage.devices import device_for_path
from blocklab.units import fmt_number
from blocklab.workloads.execution import run_driver
from blocklab.workloads.pgbench import parse_report

SETTINGS = {"shared_buffers": "128MB", "max_wal_size": "1GB", "checkpoint_timeout": "5min"}
TARGET_RATIO = 0.99
ARMS = ("bare", "instrumented")


@dataclass
class OverheadResult:
    bare_tps: dict[int, float] = field(default_factory=dict)  # pair -> tps
    instrumented_tps: dict[int, float] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    samples_per_run: list[int] = field(default_factory=list)
    comparison: Comparison | None = None

    def verdict(self) -> str:
        return verdict(self.comparison)


def verdict(c: Comparison | None) -> str:
    """Whether a ratio's CI meets TARGET_RATIO (the probes cost 1 % of tps or less)."""
    if c is None or c.ci95_low is None or c.ci95_high is None:
        return "too few pairs for a CI"
    if c.ci95_low >= TARGET_RATIO:
        return f"target met: the whole CI is >= {TARGET_RATIO}"
    if c.ci95_high < TARGET_RATIO:
        return f"target missed: the whole CI is below {TARGET_RATIO}"
    return f"inconclusive at this precision: the CI straddles {TARGET_RATIO}"


def pair_order(pair: int) -> tuple[str, str]:
    return ("bare", "instrumented") if pair % 2 == 0 else ("instrumented", "bare")


def measure_overhead(
    inst: Installation,
    paths: Paths,
    *,
    pairs: int,
    duration_s: int,
    scale: int,
    clients: int,
    interval_s: float = 1.0,
    log: Callable[[str], None] = print,
) -> OverheadResult:
    with selftest_server(inst, paths, scale=scale, log=log) as cluster:
        return _pairs(cluster, pairs, duration_s, clients, interval_s, log)


@contextmanager
def selftest_server(
    inst: Installation, paths: Paths, *, scale: int, log: Callable[[str], None]
) -> Iterator[Cluster]:
    """A fresh server in the work directory with pgbench's tables at `scale`; stopped and
    removed afterwards."""
    user = open_home(paths, log)  # a home made by `mktemp -d` (0700) gets o+x, as for `run`
    base = paths.work / f"selftest-overhead-{uuid.uuid4().hex[:8]}"
    cluster = Cluster(
        inst,
        base / "data",
        socket_dir=base / "sock",
        user=user,
        state=State(paths.state_file),
        log_path=base / "server.log",
    )
    try:
        cluster.initdb(data_checksums=False)
        cluster.write_settings(SETTINGS)
        cluster.start()
        log(f"server {inst.key} ({inst.version}) up; pgbench -i -s {scale}")
        _pgbench(cluster, ["-i", "-s", str(scale), "-q"])
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def _pairs(
    cluster: Cluster,
    pairs: int,
    duration_s: int,
    clients: int,
    interval_s: float,
    log: Callable[[str], None],
) -> OverheadResult:
    res = OverheadResult()
    for pair in range(pairs):
        for arm in pair_order(pair):
            tps = _one(cluster, arm, duration_s, clients, interval_s, res)
            (res.bare_tps if arm == "bare" else res.instrumented_tps)[pair] = tps
            res.order.append(arm)
            log(f"pair {pair + 1}/{pairs} {arm:>12}: {fmt_number(tps):>10} tps")
    res.comparison = compare_paired(res.bare_tps, res.instrumented_tps)
    return res


@dataclass(frozen=True)
class ArmSteps:
    """What one run of an arm does. The arms share everything but `probes`: the same
    pgbench argv, the same server and settings, and the same connection held open
    with the same waits for client backends to exit before and after the run (a
    probes.Bystander in the bare arm, the Instrumentation in the other)."""

    pgbench_args: tuple[str, ...]
    settings: tuple[tuple[str, str], ...]
    probes: bool  # the counters, the sampler and the final snapshot and log parse


def arm_steps(arm: str, *, duration_s: int, clients: int) -> ArmSteps:
    if arm not in ARMS:
        raise ValueError(f"arm: one of {', '.join(ARMS)}, got {arm!r}")
    args = ("-n", "-c", str(clients), "-j", str(clients), "-T", str(duration_s))
    return ArmSteps(args, tuple(sorted(SETTINGS.items())), probes=arm == "instrumented")


def _one(
    cluster: Cluster,
    arm: str,
    duration_s: int,
    clients: int,
    interval_s: float,
    res: OverheadResult,
) -> float:
    steps = arm_steps(arm, duration_s=duration_s, clients=clients)
    ctx = context_for(cluster, interval_s=interval_s)
    probes = Instrumentation(ctx) if steps.probes else Bystander(ctx)
    probes.begin()  # both: connect, wait for the last run's backends to exit
    started = time.monotonic()
    try:
        out = _pgbench(cluster, list(steps.pgbench_args)).stdout
    except BaseException:
        probes.close()
        raise
    report = parse_report(out)
    if isinstance(probes, Instrumentation):
        result = probes.end(report.transactions or 0, time.monotonic() - started)
        res.samples_per_run.append(int(result.facts.get("samples", 0)))
    else:
        probes.end()  # the same wait for this run's backends to exit
    if report.tps is None:
        raise RunError(f"pgbench printed no tps:\n{out[-2000:]}")
    return report.tps


def context_for(
    cluster: Cluster, *, interval_s: float = 1.0, measure_space: bool = False
) -> ProbeContext:
    """Probes for a running server whose data directory sits on a host file system: the
    block device under it is counted, shared with whatever else uses that device."""
    assert cluster.pid is not None
    return ProbeContext(
        conninfo=cluster.conninfo,
        data_dir=cluster.data_dir,
        server_log=cluster.log_path,
        devices=[Device(name=device_for_path(cluster.data_dir), role="data", shared=True)],
        block_size_bytes=cluster.inst.block_size_bytes,
        wal_block_size_bytes=cluster.inst.wal_block_size_bytes,
        server_pid=cluster.pid,
        server_version_num=cluster.version_num(),
        measure_space=measure_space,
        interval_s=interval_s,
    )


def _pgbench(cluster: Cluster, args: list[str]) -> proc.Result:
    argv = [str(cluster.inst.bin("pgbench")), *cluster.conn_args(), *args, "postgres"]
    return run_driver(argv, timeout_s=3600)

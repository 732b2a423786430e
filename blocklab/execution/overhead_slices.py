"""What each probe costs, in slices of one pgbench run on one server.

One pgbench run (`-P 1`) is cut into slices of `slice_s` seconds after a lead-in; in each
slice one probe is on or off, in ABBA/BAAB blocks with the probes taking turns
(blocklab.analysis.slices.schedule). A thread reads pgbench's progress lines as they are
written and switches the probes at the slices' bounds; afterwards each slice's tps comes
from the same lines and each probe's tps ratio (on / off) with its 95 % CI from its
blocks (blocklab.analysis.slices.probe_ratios). At each slice's bound (after the probe
of the slice before is switched off, before the next one is switched on) the CPU seconds
so far are read (`CpuReadings`): of the probes' own processes (this process, whose
threads the probes are, and the backend that answers the sampler) and of the measured
system (the server's process tree and this process's, pgbench in it); from them each
probe's share of the CPU with its 95 % CI (blocklab.analysis.slices.probe_cpu_shares),
the estimator precise enough to see a 1 % cost. Against pairs of whole runs
(blocklab.execution.overhead) nothing restarts between the arms (no connection set-up,
no backends' exit, no cold start), and a drift of the shared machine cancels within each
block of a dozen seconds.

The probes switched within the window: `sampler` (the 1 Hz snapshot: one query of the
counters over the probes' connection, the devices' and the host's counters) and
`cpu_log` (the placement's CPU log, blocklab.execution.controls.CpuSampler, 4 Hz, when a
placement is asked for); and, when asked for, `both`: the two switched on and off together,
as a run with a placement has them, so that the whole set's cost is measured, not summed
from two intervals. The probes of begin() and end() (pg_stat_io, the CPU and device
account, the space pass) run before or after the workload's window and cannot slow its
tps; their time per run is measured once at the end (`end_probe_s`).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from blocklab import proc
from blocklab.analysis.slices import (
    CpuShare,
    Slice,
    probe_cpu_shares,
    probe_ratios,
    schedule,
    slice_growth,
    slice_tps,
)
from blocklab.analysis.stats import Comparison
from blocklab.errors import RunError
from blocklab.execution import controls
from blocklab.execution.overhead import context_for, selftest_server
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster
from blocklab.postgres.installation import Installation
from blocklab.probes import Instrumentation
from blocklab.probes.sampler import Sampler, read_pid_stats
from blocklab.workloads.execution import driver_user
from blocklab.workloads.pgbench import parse_progress

PROBES = ("sampler", "cpu_log")  # measured by default, each on its own
BOTH = "both"  # the two on together, as a run with a placement has them: the whole set
SLICE_S = 3
LEAD_IN_S = 5  # pgbench's first seconds (connections, a cold cache) belong to no slice
POLL_S = 0.02  # how often the switching thread looks for a new progress line


@dataclass
class SliceResult:
    plan: list[Slice]
    tps: list[float | None]
    ratios: dict[str, Comparison] = field(default_factory=dict)
    end_probe_s: dict[str, float] = field(default_factory=dict)
    max_switch_delay_s: float = 0.0  # from a progress line written to its switch
    # per slice: CPU seconds of the probes' own processes, and of the measured system
    probe_cpu_s: list[float | None] = field(default_factory=list)
    total_cpu_s: list[float | None] = field(default_factory=list)
    shares: dict[str, CpuShare] = field(default_factory=dict)


class Switch(Protocol):
    """A probe that measure_slices switches on and off."""

    def on(self) -> None: ...
    def off(self) -> None: ...


@dataclass
class CpuReadings:
    """Cumulative CPU seconds at each slice's bound (the module's docstring): bound ->
    (the probes' own processes, the measured system). The probes' to the microsecond:
    this process's from getrusage(RUSAGE_SELF) (every thread's, ended ones included), the
    backend's from /proc/<pid>/schedstat (blocklab.proc.read_runtime_s); the system's from
    /proc/<pid>/stat of the processes of the two trees, in clock ticks
    (blocklab.probes.sampler.read_pid_stats: each one's own and its reaped children's
    time, so a tree's sum only grows), walked, not scanned. The share's numerator is a
    difference of a few milliseconds and needs the finer clock; its denominator, seconds,
    does not."""

    server_pid: int
    backend_pid: int | None
    at: dict[int, tuple[float, float]] = field(default_factory=dict)

    def read(self, bound: int) -> None:
        own = resource.getrusage(resource.RUSAGE_SELF)
        backend_s = proc.read_runtime_s(self.backend_pid) if self.backend_pid else 0.0
        stats = read_pid_stats([os.getpid(), self.server_pid])
        if backend_s is None or not stats:
            return
        probes_s = own.ru_utime + own.ru_stime + backend_s
        self.at[bound] = (probes_s, sum(cpu_s for _ppid, cpu_s in stats.values()))

    def per_slice(self, n_slices: int) -> tuple[list[float | None], list[float | None]]:
        """(the probes' CPU seconds, the measured system's) of each slice."""
        probes = slice_growth({k: v[0] for k, v in self.at.items()}, n_slices)
        return probes, slice_growth({k: v[1] for k, v in self.at.items()}, n_slices)


class _SamplerSwitch:
    """The 1 Hz sampler: a snapshot at once, then one a second, as in a run."""

    def __init__(self, probes: Instrumentation):
        self.probes = probes
        self.sampler: Sampler | None = None

    def on(self) -> None:
        self.probes.sample()
        self.sampler = Sampler(self.probes.sample, self.probes.ctx.interval_s)
        self.sampler.start()

    def off(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None


class _CpuLogSwitch:
    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.log: controls.CpuSampler | None = None

    def on(self) -> None:
        self.log = controls.CpuSampler(self.server_pid).__enter__()

    def off(self) -> None:
        if self.log is not None:
            self.log.__exit__()
            self.log = None


class _Together:
    """Switches switched as one: on in their order, off in the reverse."""

    def __init__(self, *parts: Switch):
        self.parts = parts

    def on(self) -> None:
        for p in self.parts:
            p.on()

    def off(self) -> None:
        for p in reversed(self.parts):
            p.off()


def switches_for(
    instrumentation: Instrumentation, server_pid: int, extra: Mapping[str, Switch] | None = None
) -> dict[str, Switch]:
    """Every probe's switch by name: the real ones, `both` made of them (one probe is on
    at a time: the plan's slices take turns), and `extra`."""
    sampler, cpu_log = _SamplerSwitch(instrumentation), _CpuLogSwitch(server_pid)
    return {
        "sampler": sampler,
        "cpu_log": cpu_log,
        BOTH: _Together(sampler, cpu_log),
        **(extra or {}),
    }


def measure_slices(
    inst: Installation,
    paths: Paths,
    *,
    probes: Sequence[str] = PROBES,
    blocks_per_probe: int,
    slice_s: int = SLICE_S,
    scale: int,
    clients: int,
    interval_s: float = 1.0,
    log: Callable[[str], None] = print,
    extra: Mapping[str, Switch] | None = None,
) -> SliceResult:
    """`extra`: more probes by name, switched like the real ones (a test's deliberately
    costly probe, to check that the CPU share finds a known cost)."""
    known = [*PROBES, BOTH, *(extra or {})]
    unknown = sorted(set(probes) - set(known))
    if unknown:
        raise ValueError(f"probes: one of {', '.join(known)}, got {', '.join(unknown)}")
    plan = schedule(list(probes), blocks_per_probe)
    with selftest_server(inst, paths, scale=scale, log=log) as cluster:
        ctx = context_for(cluster, interval_s=interval_s, measure_space=True)
        instrumentation = Instrumentation(ctx)
        instrumentation.prepare()
        try:
            switches = switches_for(instrumentation, ctx.server_pid, extra)
            cpu = CpuReadings(ctx.server_pid, instrumentation.backend_pid)
            total_s = LEAD_IN_S + len(plan) * slice_s + 1
            log(f"one pgbench run of {total_s} s: {len(plan)} slices of {slice_s} s")
            per_second, delay = _run(cluster, plan, switches, cpu, slice_s, total_s, clients)
            res = SliceResult(plan, slice_tps(per_second, len(plan), slice_s, LEAD_IN_S))
            res.max_switch_delay_s = delay
            res.probe_cpu_s, res.total_cpu_s = cpu.per_slice(len(plan))
            res.end_probe_s = instrumentation.end_probe_seconds()
        finally:
            instrumentation.close()
    res.ratios = probe_ratios(res.plan, res.tps)
    res.shares = probe_cpu_shares(res.plan, res.probe_cpu_s, res.total_cpu_s)
    return res


def _run(
    cluster: Cluster,
    plan: list[Slice],
    switches: dict[str, Switch],
    cpu: CpuReadings,
    slice_s: int,
    total_s: int,
    clients: int,
) -> tuple[dict[int, float], float]:
    """pgbench -P 1 for total_s while the plan is switched; (second -> tps, the longest
    delay of a switch after its progress line was written)."""
    out = cluster.log_path.parent / f"pgbench-slices-{os.getpid()}"
    argv = [str(cluster.inst.bin("pgbench")), *cluster.conn_args(), "-n", "-P", "1"]
    argv += ["-c", str(clients), "-j", str(clients), "-T", str(total_s), "postgres"]
    child = proc.spawn(
        argv,
        stdout_path=out.with_suffix(".out"),
        stderr_path=out.with_suffix(".err"),
        cwd="/",
        user=driver_user(),
    )
    try:
        delay = _switch_along(
            child.poll, out.with_suffix(".err"), plan, switches, slice_s, at_bound=cpu.read
        )
        if child.wait(timeout=60) != 0:
            raise RunError(f"pgbench exited {child.returncode}: {_tail(out.with_suffix('.err'))}")
    finally:
        for s in switches.values():
            s.off()
        if child.poll() is None:
            proc.end_group(child)
    lines = parse_progress(out.with_suffix(".err").read_text())
    return {round(x.t_s): x.tps for x in lines}, delay


def _switch_along(
    running: Callable[[], int | None],
    progress_path: Path,
    plan: list[Slice],
    switches: Mapping[str, Switch],
    slice_s: int,
    at_bound: Callable[[int], None] | None = None,
) -> float:
    """Follow pgbench's progress lines; at each slice's first second, switch the probe
    that slice wants on (and the one before off), and call `at_bound(k)` at each slice's
    bound k (0 opens the first slice, len(plan) closes the last) between the two. The
    longest delay, in seconds, from a line's arrival in the file (its modification time)
    to the switch."""
    state: str | None = None
    seconds, offset, worst, bound = 0, 0, 0.0, -1
    while True:
        ended = running() is not None  # the lines written before the end are read too
        data = _read_from(progress_path, offset)
        if data:
            offset += len(data)
            seconds += len(parse_progress(data.decode("utf-8", "replace")))
            i = (seconds - LEAD_IN_S) // slice_s if seconds >= LEAD_IN_S else -1
            want = plan[i].probe if 0 <= i < len(plan) and plan[i].on else None
            if want != state and state is not None:
                switches[state].off()
            while at_bound is not None and bound < min(i, len(plan)):
                bound += 1
                at_bound(bound)
            if want != state:
                if want is not None:
                    switches[want].on()
                state = want
                worst = max(worst, time.time() - progress_path.stat().st_mtime)
        if ended:
            return worst
        time.sleep(POLL_S)


def _read_from(path: Path, offset: int) -> bytes:
    """The whole lines written to `path` after `offset` bytes (b"" when none yet)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return b""
    return data[: data.rfind(b"\n") + 1]


def _tail(path: Path) -> str:
    try:
        return path.read_text()[-2000:]
    except OSError:
        return ""

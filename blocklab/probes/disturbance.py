"""Other processes' use of the CPUs during a measured window: was the run disturbed?

pyperf and hyperfine warn when a benchmark ran on a busy machine; this is blocklab's
version, measured rather than guessed. At the window's begin and end (the instants of
Instrumentation's first and last snapshot) one `CpuAccount` is taken:

- `capacity_s`: every field of /proc/stat's aggregate `cpu` line (idle and iowait
  included), i.e. the online CPUs x wall time, in seconds;
- `busy_s`: user + nice + system + irq + softirq + steal of that line (guest time is
  already inside user and nice);
- `known_s`: the CPU seconds of the run's own process trees: the postmaster and every
  descendant, and blocklab's own process (its threads: the 1 Hz sampler, the placement
  sampler) and every descendant (the workload driver, which blocklab spawns and reaps).
  Each live process counts utime + stime + cutime + cstime: a backend or a driver that
  starts and ends inside the window is in its parent's cutime/cstime once reaped, and a
  process that is still alive (or a zombie) is counted itself, so the sum over a tree
  only grows, whatever is forked and reaped inside it;
- `kernel_s`: kernel threads (kthreadd and its children) plus irq and softirq time.

Disturbance = the growth of busy_s - known_s - kernel_s over the window: the CPU seconds
of every other process (and steal: another virtual machine on the same host), as
`disturbance_cpu_s` and as a share of capacity, `disturbance_cpu_share` (0..1). Kernel
work is reported apart (`disturbance_kernel_cpu_s`) and not counted: most of it is done
on the run's behalf (writeback of the server's dirty pages, the loop devices' threads,
the journal, interrupts of its own I/O) and cannot be told from the kernel work of others.

Exact: /proc/stat's totals and each process's times (clock ticks, 1/CLK_TCK s).
Approximate: each process's times are truncated to a tick (at most 4 ticks per process
per account: with 20 processes in the trees, < 0.8 s, in practice much less); the two
clocks (the per-CPU tick counts of /proc/stat and the per-task times) are sampled apart,
which on this machine agreed to within a few per cent (tests/probes/test_disturbance.py);
a process of the trees that exits and is reaped outside them (a daemonising grandchild,
reparented to init) leaves its CPU in "other"; the /proc scan itself (milliseconds) lies
inside the window. Values below 0 from rounding are clamped to 0.

Devices are not attributed here: on blocklab's own loop devices the server is the only
user, and on a shared device (kind 'dir') the device counters cannot be split by
process (/proc/<pid>/io has no totals of reaped children, and what PostgreSQL counts in
pg_stat_io reaches the device through the page cache at another time).

Whether that makes a run disturbed is the analysis's call (blocklab.analysis.disturbance).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from blocklab.probes.sampler import CLK_TCK, read_cpu, read_pid_stats

BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
KERNEL_FIELDS = ("irq", "softirq")
KTHREADD_PID = 2
CPU_S = "disturbance_cpu_s"
CPU_SHARE = "disturbance_cpu_share"
KERNEL_CPU_S = "disturbance_kernel_cpu_s"
METRICS = (CPU_S, CPU_SHARE, KERNEL_CPU_S)
BASIS = (
    "/proc/stat busy (user+nice+system+irq+softirq+steal) minus the server's and "
    "blocklab's process trees (utime+stime+cutime+cstime of each live process) minus "
    "kernel threads and irq/softirq; share of all CPUs' time over the window"
)

PidStats = Mapping[int, tuple[int, float]]  # pid -> (ppid, own + reaped children's CPU s)


@dataclass(frozen=True)
class CpuAccount:
    """Cumulative CPU seconds at one instant (see the module's docstring)."""

    capacity_s: float
    busy_s: float
    known_s: float
    kernel_s: float


def tree_pids(stats: PidStats, roots: Iterable[int]) -> set[int]:
    """The roots present in `stats` and all their descendants (pure)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [r for r in roots if r in stats]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def account(stats: PidStats, cpu_ticks: Mapping[str, int], roots: Iterable[int]) -> CpuAccount:
    """The account of one instant from a /proc scan and /proc/stat's cpu line (pure)."""
    known = tree_pids(stats, roots)
    kthreads = tree_pids(stats, [KTHREADD_PID])
    kernel_ticks = sum(cpu_ticks.get(f, 0) for f in KERNEL_FIELDS)
    return CpuAccount(
        capacity_s=sum(cpu_ticks.values()) / CLK_TCK,
        busy_s=sum(cpu_ticks.get(f, 0) for f in BUSY_FIELDS) / CLK_TCK,
        known_s=sum(stats[p][1] for p in known),
        kernel_s=sum(stats[p][1] for p in kthreads - known) + kernel_ticks / CLK_TCK,
    )


def metrics(before: CpuAccount | None, after: CpuAccount | None) -> dict[str, float | None]:
    """The run's disturbance metrics; None where an account is missing (pure)."""
    if before is None or after is None:
        return dict.fromkeys(METRICS)
    capacity = after.capacity_s - before.capacity_s
    kernel = max(0.0, after.kernel_s - before.kernel_s)
    other = (after.busy_s - before.busy_s) - (after.known_s - before.known_s) - kernel
    other = max(0.0, other)
    return {
        CPU_S: other,
        CPU_SHARE: min(1.0, other / capacity) if capacity > 0 else None,
        KERNEL_CPU_S: kernel,
    }


def read_account(server_pid: int, stats: PidStats | None = None) -> CpuAccount | None:
    """This instant's account: the server's tree and blocklab's own (this process's);
    `stats`: a /proc scan already made (blocklab.probes.sampler.read_pid_stats)."""
    ticks = read_cpu()
    if ticks is None:
        return None
    scan = read_pid_stats() if stats is None else stats
    roots = [os.getpid()] + ([server_pid] if server_pid > 0 else [])
    return account(scan, ticks, roots)

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
clocks (the per-CPU tick counts of /proc/stat and the per-task times) are kept apart by
the kernel and may differ by a little (tests/probes/test_disturbance.py checks the
per-task side against the processes' own clocks to 0.05 s, and that a burner's seconds
reach the disturbance; on a busy machine it cannot calibrate the /proc/stat side); a
process of the trees that exits and is reaped outside them (a daemonising grandchild,
reparented to init) leaves its CPU in "other"; the reading itself (the three trees are
walked through /proc/<pid>/task/*/children, not a scan of /proc: milliseconds) lies
inside the window. Values below 0 from rounding are clamped to 0.

Devices: under each of the run's own loop devices (not a shared one) lies a backing device
(the host's disk or partition holding the image file, found from
/sys/class/block/loopN/loop/backing_file). Loop devices run with direct I/O, so each of
their requests reaches the backing device as such: the growth of the backing device's
bytes (read + written, /sys/class/block/<dev>/stat) minus that of the run's loop devices
on it is other processes' I/O on the run's disk, `disturbance_device_bytes`, and its share
of the backing device's bytes, `disturbance_device_share`. Approximate: the host file
system's own metadata and journal writes for the image files (allocating blocks of a
sparse image) count as other; requests still queued at an instant are counted on the loop
device before the backing one. On a shared device (kind 'dir') the counters cannot be
split by process (/proc/<pid>/io has no totals of reaped children, and what PostgreSQL
counts in pg_stat_io reaches the device through the page cache at another time): no
device metrics there (None).

Whether that makes a run disturbed is the analysis's call (blocklab.analysis.disturbance).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from blocklab.errors import StorageError
from blocklab.probes.sampler import CLK_TCK, read_cpu, read_device, read_pid_stats
from blocklab.storage.devices import SYS_CLASS_BLOCK, device_for_path

if TYPE_CHECKING:
    from blocklab.probes import DeviceLike

BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
KERNEL_FIELDS = ("irq", "softirq")
KTHREADD_PID = 2
CPU_S = "disturbance_cpu_s"
CPU_SHARE = "disturbance_cpu_share"
KERNEL_CPU_S = "disturbance_kernel_cpu_s"
DEVICE_BYTES = "disturbance_device_bytes"
DEVICE_SHARE = "disturbance_device_share"
METRICS = (CPU_S, CPU_SHARE, KERNEL_CPU_S, DEVICE_BYTES, DEVICE_SHARE)
BASIS = (
    "/proc/stat busy (user+nice+system+irq+softirq+steal) minus the server's and "
    "blocklab's process trees (utime+stime+cutime+cstime of each live process) minus "
    "kernel threads and irq/softirq; share of all CPUs' time over the window; devices: "
    "the bytes of the disk under the run's loop devices minus theirs"
)

PidStats = Mapping[int, tuple[int, float]]  # pid -> (ppid, own + reaped children's CPU s)


@dataclass(frozen=True)
class CpuAccount:
    """Cumulative CPU seconds at one instant (see the module's docstring)."""

    capacity_s: float
    busy_s: float
    known_s: float
    kernel_s: float
    # backing device -> (its bytes, its bytes minus the run's loop devices' on it)
    devices: Mapping[str, tuple[int, int]] = field(default_factory=dict)


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
    """The account of one instant from read_stats() and /proc/stat's cpu line (pure)."""
    known = tree_pids(stats, roots)
    kthreads = tree_pids(stats, [KTHREADD_PID])
    kernel_ticks = sum(cpu_ticks.get(f, 0) for f in KERNEL_FIELDS)
    return CpuAccount(
        capacity_s=sum(cpu_ticks.values()) / CLK_TCK,
        busy_s=sum(cpu_ticks.get(f, 0) for f in BUSY_FIELDS) / CLK_TCK,
        known_s=sum(stats[p][1] for p in known),
        kernel_s=sum(stats[p][1] for p in kthreads - known) + kernel_ticks / CLK_TCK,
    )


def other_cpu_s(before: CpuAccount, after: CpuAccount) -> tuple[float, float, float]:
    """(other processes' CPU seconds, kernel CPU seconds, capacity in CPU seconds) between
    two accounts (pure; rounding below 0 clamped to 0)."""
    capacity = after.capacity_s - before.capacity_s
    kernel = max(0.0, after.kernel_s - before.kernel_s)
    other = (after.busy_s - before.busy_s) - (after.known_s - before.known_s) - kernel
    return max(0.0, other), kernel, capacity


def metrics(before: CpuAccount | None, after: CpuAccount | None) -> dict[str, float | None]:
    """The run's disturbance metrics; None where an account is missing (pure)."""
    if before is None or after is None:
        return dict.fromkeys(METRICS)
    other, kernel, capacity = other_cpu_s(before, after)
    return {
        CPU_S: other,
        CPU_SHARE: min(1.0, other / capacity) if capacity > 0 else None,
        KERNEL_CPU_S: kernel,
    } | device_metrics(before.devices, after.devices)


def device_metrics(
    before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]
) -> dict[str, float | None]:
    """Other processes' bytes on the backing devices (pure; None without one)."""
    names = sorted(set(before) & set(after))
    if not names:
        return dict.fromkeys((DEVICE_BYTES, DEVICE_SHARE))
    total = sum(after[n][0] - before[n][0] for n in names)
    other = sum(max(0, after[n][1] - before[n][1]) for n in names)
    return {DEVICE_BYTES: float(other), DEVICE_SHARE: min(1.0, other / total) if total else 0.0}


def device_account(
    bytes_of: Mapping[str, int | None], backing: Mapping[str, Sequence[str]]
) -> dict[str, tuple[int, int]]:
    """backing device -> (its bytes, minus its loop devices' bytes), from one reading of
    each device's read + written bytes (pure; a device that could not be read is left out)."""
    out = {}
    for name, loops in backing.items():
        total, mine = bytes_of.get(name), [bytes_of.get(x) for x in loops]
        if total is not None and None not in mine:
            out[name] = (total, total - sum(x or 0 for x in mine))
    return out


def backing_devices(devices: Iterable[DeviceLike]) -> dict[str, list[str]]:
    """backing device -> the run's own loop devices whose image files it holds."""
    out: dict[str, list[str]] = {}
    for dev in devices:
        if dev.shared:
            continue
        try:
            text = (SYS_CLASS_BLOCK / dev.name / "loop" / "backing_file").read_text()
            name = device_for_path(Path(text.strip().removesuffix(" (deleted)")))
        except (OSError, StorageError):
            continue  # not a loop device, or its image is gone
        out.setdefault(name, []).append(dev.name)
    return out


def _read_bytes(names: Iterable[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in names:
        c = read_device(name)
        out[name] = None if c is None else c.read_bytes + c.write_bytes
    return out


def read_account(
    server_pids: Sequence[int],
    stats: PidStats | None = None,
    backing: Mapping[str, Sequence[str]] | None = None,
) -> CpuAccount | None:
    """This instant's account: the servers' trees (one run's server, or the interleaved
    design's two of a round) and blocklab's own (this process's); `stats`: read_stats()
    already made (or a scan: blocklab.probes.sampler.read_pid_stats); `backing`:
    backing_devices() of the run's devices (none: no device account)."""
    ticks = read_cpu()
    if ticks is None:
        return None
    backing = backing or {}
    names = {*backing, *(x for loops in backing.values() for x in loops)}
    devices = device_account(_read_bytes(names), backing)
    scan = read_stats(server_pids) if stats is None else stats
    roots = [os.getpid(), *_live(server_pids)]
    return dataclasses.replace(account(scan, ticks, roots), devices=devices)


def read_stats(server_pids: Sequence[int]) -> dict[int, tuple[int, float]]:
    """What account() needs and no more: the servers' trees, blocklab's own and the kernel
    threads' (kthreadd's), walked from their roots (every other process is "other" by
    subtraction from /proc/stat, so /proc is not scanned)."""
    return read_pid_stats([os.getpid(), KTHREADD_PID, *_live(server_pids)])


def _live(server_pids: Sequence[int]) -> list[int]:
    return [p for p in server_pids if p > 0]

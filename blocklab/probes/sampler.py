"""Snapshots of cumulative counters, and the 1 Hz thread that takes them.

A snapshot is one instant: the PostgreSQL counters (one query over one persistent
connection), /sys/class/block/<dev>/stat per device (sectors of 512 bytes, whatever the
device's logical block size), the host CPU line of /proc/stat and /proc/meminfo. The
PostgreSQL process tree's CPU time (/proc/<pid>/stat, blocklab.proc.parse_pid_stat) is read
at begin and end only, from the processes of the trees asked for (walked through
/proc/<pid>/task/*/children), never from a scan of every entry of /proc. Parsers are pure;
readers do the file I/O.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from blocklab import proc
from blocklab.errors import StorageError
from blocklab.storage.devices import parse_stat, stat_path

if TYPE_CHECKING:
    from blocklab.probes.disturbance import CpuAccount

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class DeviceCounters:
    read_bytes: int
    write_bytes: int
    read_ios: int
    write_ios: int
    busy_ms: int


@dataclass
class Snapshot:
    epoch: float  # time.time()
    pg: dict[str, float | None]
    devices: dict[str, DeviceCounters | None]
    cpu_ticks: dict[str, int] | None
    mem: dict[str, int] | None
    server_cpu_s: float | None = None  # only at begin and end
    # pg_stat_io per object and context (blocklab.probes.stat_io: bytes, and 18+ requests),
    # only at begin and end; None where the server has no pg_stat_io or the query failed
    io: dict[str, float] | None = None
    errors: list[str] = field(default_factory=list)
    # other processes' CPU (blocklab.probes.disturbance), only at begin and end
    cpu_account: CpuAccount | None = None


# -- pure parsers -------------------------------------------------------------------------


def parse_block_stat(text: str) -> DeviceCounters:
    """/sys/block/<dev>/stat (blocklab.storage.devices.parse_stat: bytes, not sectors)."""
    s = parse_stat("", text)
    return DeviceCounters(
        read_bytes=s.read_bytes,
        write_bytes=s.write_bytes,
        read_ios=s.read_ios,
        write_ios=s.write_ios,
        busy_ms=s.busy_ms,
    )


def parse_proc_stat_cpu(text: str) -> dict[str, int]:
    """The aggregate `cpu` line of /proc/stat, in clock ticks."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(x) for x in line.split()[1:]]
            return dict(zip(CPU_FIELDS, values, strict=False))
    raise ValueError("no aggregate cpu line in /proc/stat")


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo in bytes (the file says kB and means KiB)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def tree_cpu_s(stats: Mapping[int, tuple[int, float]], root: int) -> float | None:
    """CPU seconds of `root` and its direct children (pure). Children that already exited
    are in root's cutime/cstime once reaped; live ones (and zombies) are counted here."""
    if root not in stats:
        return None
    return stats[root][1] + sum(cpu for ppid, cpu in stats.values() if ppid == root)


# -- readers (I/O) ------------------------------------------------------------------------


def read_device(name: str) -> DeviceCounters | None:
    try:
        return parse_block_stat(stat_path(name).read_text())
    except (OSError, ValueError, IndexError, StorageError):
        return None


def read_cpu() -> dict[str, int] | None:
    try:
        return parse_proc_stat_cpu(Path("/proc/stat").read_text())
    except (OSError, ValueError):
        return None


def read_mem() -> dict[str, int] | None:
    try:
        return parse_meminfo(Path("/proc/meminfo").read_text())
    except (OSError, ValueError):
        return None


def pid_cpu(stat: proc.PidStat) -> tuple[int, float]:
    """(ppid, own + reaped children's CPU seconds) of one process (pure)."""
    return stat.ppid, stat.cpu_ticks / CLK_TCK


def read_pid_stats(roots: Iterable[int] | None = None) -> dict[int, tuple[int, float]]:
    """pid -> pid_cpu of the processes in the trees under `roots` (each root and all its
    descendants, walked), or of every process in /proc when `roots` is None (a scan: for
    tests; a process that ends meanwhile is left out)."""
    if roots is None:
        return {pid: pid_cpu(st) for pid, st in proc.scan_pid_stats().items()}
    stats: dict[int, tuple[int, float]] = {}
    for root in roots:
        for pid in proc.tree_pids(root):
            st = None if pid in stats else proc.read_pid_stat(pid)
            if st is not None:
                stats[pid] = pid_cpu(st)
    return stats


def read_server_cpu_s(postmaster_pid: int) -> float | None:
    """The server's CPU seconds (tree_cpu_s) from its own process tree."""
    return tree_cpu_s(read_pid_stats([postmaster_pid]), postmaster_pid)


def host_snapshot(
    pg: dict[str, float | None], device_names: Iterable[str], errors: list[str]
) -> Snapshot:
    return Snapshot(
        epoch=time.time(),
        pg=pg,
        devices={name: read_device(name) for name in device_names},
        cpu_ticks=read_cpu(),
        mem=read_mem(),
        errors=errors,
    )


# -- the thread ---------------------------------------------------------------------------


class Sampler:
    """Calls `take()` every `interval_s` (on a fixed grid from `start()`) in a thread."""

    def __init__(self, take: Callable[[], Snapshot], interval_s: float):
        self._take = take
        self.interval_s = interval_s
        self.samples: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="blocklab-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        t0 = time.monotonic()
        tick = 1
        while not self._stop.wait(max(0.0, t0 + tick * self.interval_s - time.monotonic())):
            try:
                self.samples.append(self._take())
            except Exception as e:  # noqa: BLE001 - recorded, then the thread ends
                self.failure = f"{type(e).__name__}: {e}"
                return
            tick = max(tick + 1, int((time.monotonic() - t0) / self.interval_s) + 1)

    def stop(self) -> list[Snapshot]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return self.samples

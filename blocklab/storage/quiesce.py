"""Quiesce: before a measured run, wait (bounded) until the kernel's dirty page cache and
the run's storage have drained, so that a run does not pay for the writeback of the one
before it (its restore, its warm-up, the previous variant's checkpoint).

Drained means Dirty + Writeback of /proc/meminfo below DIRTY_THRESHOLD_BYTES and no I/O in
flight on the run's block devices (/sys/class/block/<dev>/inflight: "reads writes", the
requests the device has been given and not yet completed). The parsers are pure; `wait`
takes its reader, clock and sleep as arguments so that its loop is tested without a
machine. What it found is recorded per run: `quiesce_wait_s` (how long it waited) and
`quiesce_dirty_bytes` (Dirty + Writeback when it stopped waiting, drained or not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import StorageError
from blocklab.storage.devices import SYS_CLASS_BLOCK

MEMINFO = Path("/proc/meminfo")
DIRTY_THRESHOLD_BYTES = 16 * 1024 * 1024
POLL_S = 0.25
DIRTY_FIELDS = ("Dirty", "Writeback")


@dataclass(frozen=True)
class Sample:
    dirty_bytes: int  # Dirty + Writeback
    inflight_ios: int  # reads + writes in flight, summed over the devices


@dataclass(frozen=True)
class Quiesce:
    drained: bool
    wait_s: float
    dirty_bytes: int
    inflight_ios: int
    max_s: float

    def metrics(self) -> dict[str, float | None]:
        return {"quiesce_wait_s": round(self.wait_s, 3), "quiesce_dirty_bytes": self.dirty_bytes}

    def to_json(self) -> dict[str, object]:
        return {
            "drained": self.drained,
            "wait_s": round(self.wait_s, 3),
            "dirty_bytes": self.dirty_bytes,
            "inflight_ios": self.inflight_ios,
            "max_s": self.max_s,
            "threshold_bytes": DIRTY_THRESHOLD_BYTES,
        }


def parse_meminfo_dirty_bytes(text: str) -> int:
    """Dirty + Writeback of /proc/meminfo in bytes ("Dirty:  1234 kB"; kB = 1024 bytes)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in DIRTY_FIELDS:
            parts = rest.split()
            if not parts or not parts[0].isdigit():
                raise ValueError(f"/proc/meminfo: unreadable line {line!r}")
            unit = parts[1] if len(parts) > 1 else ""
            found[name] = int(parts[0]) * (1024 if unit == "kB" else 1)
    missing = [f for f in DIRTY_FIELDS if f not in found]
    if missing:
        raise ValueError(f"/proc/meminfo: no {', '.join(missing)} line")
    return sum(found.values())


def parse_inflight(text: str) -> int:
    """Requests in flight from a block device's inflight file ("   0    3": reads, writes)."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"inflight: expected two counts, got {text.strip()!r}")
    return int(parts[0]) + int(parts[1])


def read_sample(devices: Sequence[str]) -> Sample:
    """The machine now: dirty memory and the devices' in-flight requests."""
    try:
        dirty = parse_meminfo_dirty_bytes(MEMINFO.read_text())
        inflight = sum(
            parse_inflight((SYS_CLASS_BLOCK / name / "inflight").read_text()) for name in devices
        )
    except (OSError, ValueError) as e:
        raise StorageError(f"cannot read the dirty memory or in-flight I/O: {e}") from e
    return Sample(dirty, inflight)


def drained(sample: Sample, threshold_bytes: int = DIRTY_THRESHOLD_BYTES) -> bool:
    return sample.dirty_bytes < threshold_bytes and sample.inflight_ios == 0


def wait(
    read: Callable[[], Sample],
    max_s: float,
    *,
    threshold_bytes: int = DIRTY_THRESHOLD_BYTES,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = POLL_S,
) -> Quiesce:
    """Poll `read` until drained or `max_s` has passed (max_s 0: one look, no wait)."""
    t0 = clock()
    while True:
        sample = read()
        waited = clock() - t0
        ok = drained(sample, threshold_bytes)
        if ok or waited >= max_s:
            return Quiesce(ok, waited, sample.dirty_bytes, sample.inflight_ios, max_s)
        sleep(min(poll_s, max_s - waited))

"""Block-device counters from /sys/class/block/<name>/stat, and the device under a path.

The stat file's fields (Documentation/block/stat.rst): read I/Os, read merges, read
sectors, read ticks, write I/Os, write merges, write sectors, write ticks, in flight,
io_ticks (ms the device was busy), time in queue, then discard and flush counters.
Sectors are always 512 bytes there, whatever the device's logical block size.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import StorageError

SECTOR_BYTES = 512
SYS_CLASS_BLOCK = Path("/sys/class/block")


@dataclass(frozen=True)
class DeviceStat:
    """One reading of a block device's counters (cumulative since boot)."""

    name: str
    read_bytes: int
    write_bytes: int
    read_ios: int
    write_ios: int
    busy_ms: int
    discard_bytes: int = 0
    flush_ios: int = 0
    taken_at_s: float = 0.0  # time.monotonic() when read

    def delta(self, earlier: DeviceStat) -> DeviceStat:
        """The counters between `earlier` and this (later) reading."""
        if earlier.name != self.name:
            raise ValueError(f"cannot subtract {earlier.name} counters from {self.name}")
        return DeviceStat(
            name=self.name,
            read_bytes=self.read_bytes - earlier.read_bytes,
            write_bytes=self.write_bytes - earlier.write_bytes,
            read_ios=self.read_ios - earlier.read_ios,
            write_ios=self.write_ios - earlier.write_ios,
            busy_ms=self.busy_ms - earlier.busy_ms,
            discard_bytes=self.discard_bytes - earlier.discard_bytes,
            flush_ios=self.flush_ios - earlier.flush_ios,
            taken_at_s=self.taken_at_s - earlier.taken_at_s,
        )

    def as_metrics(self, prefix: str = "device_") -> dict[str, float]:
        """Flat, unit-carrying names for storing with a run."""
        return {
            f"{prefix}read_bytes": self.read_bytes,
            f"{prefix}write_bytes": self.write_bytes,
            f"{prefix}read_ios": self.read_ios,
            f"{prefix}write_ios": self.write_ios,
            f"{prefix}busy_ms": self.busy_ms,
            f"{prefix}discard_bytes": self.discard_bytes,
            f"{prefix}flush_ios": self.flush_ios,
        }


def parse_stat(name: str, text: str, taken_at_s: float = 0.0) -> DeviceStat:
    """Parse the contents of a block device's stat file (pure)."""
    f = [int(x) for x in text.split()]
    if len(f) < 11:
        raise ValueError(f"{name}: a block stat line has at least 11 fields, got {len(f)}")
    discard_sectors = f[13] if len(f) > 13 else 0
    flush_ios = f[15] if len(f) > 15 else 0
    return DeviceStat(
        name=name,
        read_ios=f[0],
        read_bytes=f[2] * SECTOR_BYTES,
        write_ios=f[4],
        write_bytes=f[6] * SECTOR_BYTES,
        busy_ms=f[9],
        discard_bytes=discard_sectors * SECTOR_BYTES,
        flush_ios=flush_ios,
        taken_at_s=taken_at_s,
    )


def stat_path(name: str) -> Path:
    """/sys/class/block/<name>/stat: whole disks, partitions, loop and dm devices alike."""
    if not name or "/" in name or name.startswith("."):
        raise StorageError(f"not a block device name: {name!r}")
    return SYS_CLASS_BLOCK / name / "stat"


def read_stat(name: str) -> DeviceStat:
    """Read the counters of block device `name` (e.g. 'loop3', 'vda', 'dm-0')."""
    try:
        text = stat_path(name).read_text()
    except OSError as e:
        raise StorageError(f"cannot read the counters of block device {name}: {e}") from e
    return parse_stat(name, text, time.monotonic())


def name_for_devnum(major: int, minor: int) -> str | None:
    """The /sys/class/block name of device major:minor, or None (e.g. tmpfs, overlay)."""
    link = Path(f"/sys/dev/block/{major}:{minor}")
    try:
        return link.resolve(strict=True).name
    except OSError:
        return None


def device_for_path(path: Path) -> str:
    """The block device whose counters cover `path` (a partition counts as itself).

    Raises StorageError for a path on a file system without a block device (tmpfs,
    overlay, NFS): there is nothing exact to count there.
    """
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    name = name_for_devnum(major, minor)
    if name is None:
        name = _name_from_mountinfo(path)
    if name is None:
        raise StorageError(
            f"{path} is on a file system without a block device ({major}:{minor}); "
            "its I/O cannot be counted"
        )
    return name


def _name_from_mountinfo(path: Path) -> str | None:
    """For btrfs and similar (anonymous st_dev), the mount's source device."""
    mount = mount_for_path(path)
    if mount is None or not mount.source.startswith("/dev/"):
        return None
    try:
        st = os.stat(mount.source)
    except OSError:
        return None
    return name_for_devnum(os.major(st.st_rdev), os.minor(st.st_rdev))


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    source: str
    options: str
    devnum: str  # "major:minor" as mountinfo gives it


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse /proc/self/mountinfo (pure). Octal escapes (\\040) are decoded."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 3:
            continue
        mounts.append(
            Mount(
                mount_point=_unescape(lf[4]),
                fstype=rf[0],
                source=_unescape(rf[1]),
                options=lf[5] + "," + rf[2],
                devnum=lf[2],
            )
        )
    return mounts


def _unescape(s: str) -> str:
    return s.encode().decode("unicode_escape") if "\\" in s else s


def mounts() -> list[Mount]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def mount_for_path(path: Path) -> Mount | None:
    """The innermost mount containing `path`."""
    real = str(Path(path).resolve())
    best: Mount | None = None
    for m in mounts():
        mp = m.mount_point.rstrip("/") or "/"
        inside = real == mp or real.startswith(mp + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/")):
            best = m
    return best


def is_mount_point(path: Path) -> bool:
    real = str(Path(path).resolve())
    return any(m.mount_point == real for m in mounts())

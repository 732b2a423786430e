"""Checks before blocklab touches a real block device (kind 'device').

A device is used only when the experiment names it and confirms the erase, and never
when it (or a partition of it) is mounted, is swap, is held by device-mapper/md, or
carries a file system or partition table that blocklab did not make. blocklab's own
file systems carry the label blocklab.storage.kinds.LABEL.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from blocklab import proc
from blocklab.errors import UserError
from blocklab.storage.devices import mounts
from blocklab.storage.kinds import LABEL

SYS_CLASS_BLOCK = Path("/sys/class/block")


@dataclass(frozen=True)
class Signature:
    """What blkid finds on a device: TYPE, LABEL, PTTYPE (empty when absent)."""

    fstype: str = ""
    label: str = ""
    pttype: str = ""

    @property
    def empty(self) -> bool:
        return not (self.fstype or self.pttype)

    @property
    def made_by_blocklab(self) -> bool:
        return bool(self.fstype) and self.label == LABEL and not self.pttype


def parse_blkid_export(text: str) -> Signature:
    """Parse `blkid -p -o export` output (pure)."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return Signature(values.get("TYPE", ""), values.get("LABEL", ""), values.get("PTTYPE", ""))


def read_signature(device: str) -> Signature:
    """blkid -p (low-level probe, no cache). Exit 2 means nothing was found."""
    r = proc.run(["blkid", "-p", "-o", "export", device], timeout_s=60, check=False)
    if r.returncode == 2:
        return Signature()
    if r.returncode != 0:
        raise UserError(f"storage.path: blkid cannot probe {device}: {r.stderr.strip()}")
    return parse_blkid_export(r.stdout)


def block_device_name(path: str, key: str) -> str:
    """The /sys/class/block name of a block device path; UserError if it is not one."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UserError(f"{key}: {path}: {e.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise UserError(f"{key}: {path} is not a block device")
    link = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    return link.resolve().name


def related_devices(name: str) -> list[str]:
    """The device and its partitions (by /sys/class/block name)."""
    base = SYS_CLASS_BLOCK / name
    parts = [p.name for p in base.iterdir() if (p / "partition").exists()] if base.exists() else []
    return [name, *parts]


def in_use_reason(name: str) -> str | None:
    """Why the device may not be used (mounted, swap, held), or None."""
    names = related_devices(name)
    devnums = {_devnum(n): n for n in names}
    for m in mounts():
        if m.devnum in devnums:
            return f"/dev/{devnums[m.devnum]} is mounted at {m.mount_point}"
    swaps = Path("/proc/swaps").read_text().split("\n")[1:]
    for line in swaps:
        if line.split() and Path(line.split()[0]).name in names:
            return f"{line.split()[0]} is in use as swap"
    for n in names:
        holders = SYS_CLASS_BLOCK / n / "holders"
        if holders.exists() and any(holders.iterdir()):
            held_by = ", ".join(h.name for h in holders.iterdir())
            return f"/dev/{n} is held by {held_by} (device-mapper, md or similar)"
    return None


def _devnum(name: str) -> str:
    try:
        return (SYS_CLASS_BLOCK / name / "dev").read_text().strip()
    except OSError:
        return ""


def check_device(path: str | None, erase_confirmed: bool, key: str) -> str:
    """Every check for kind 'device'; returns the device's block name."""
    if not path:
        raise UserError(f"{key}.path: kind 'device' needs the block device's path")
    if not erase_confirmed:
        raise UserError(
            f"{key}.erase_confirmed: {path} will be erased; set erase_confirmed = true "
            "to confirm (blocklab never erases a device without it)"
        )
    name = block_device_name(path, f"{key}.path")
    reason = in_use_reason(name)
    if reason:
        raise UserError(f"{key}.path: refusing {path}: {reason}")
    sig = read_signature(path)
    if not sig.empty and not sig.made_by_blocklab:
        what = f"a {sig.fstype} file system" if sig.fstype else f"a {sig.pttype} partition table"
        label = f" labelled {sig.label!r}" if sig.label else ""
        raise UserError(
            f"{key}.path: refusing {path}: it carries {what}{label} that blocklab did not "
            f"make (blocklab's file systems are labelled {LABEL!r}); wipe it yourself if "
            "it is really unused"
        )
    return name

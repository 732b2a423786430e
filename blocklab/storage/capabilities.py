"""What this machine's mkfs tools and kernel support, probed once and remembered.

For each file system and candidate block size, blocklab makes the file system on a
tiny sparse loop image and mounts it: what mounts is supported. The result is kept in
<cache>/storage-capabilities.json, keyed by the kernel release and the tool versions,
so a new kernel or xfsprogs triggers a new probe.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from blocklab import proc
from blocklab.errors import CommandError, StorageError
from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.storage import loopfs
from blocklab.storage.kinds import CANDIDATE_BLOCK_SIZES, FS_KINDS, MIB, MIN_SIZE_MB, FsSpec
from blocklab.storage.kinds import mkfs_argv as make_mkfs_argv

CACHE_NAME = "storage-capabilities.json"
VERSION_ARGV = {
    "ext4": ["mke2fs", "-V"],
    "xfs": ["mkfs.xfs", "-V"],
    "btrfs": ["mkfs.btrfs", "--version"],
}


def cache_path(paths: Paths) -> Path:
    return paths.cache / CACHE_NAME


@functools.cache
def machine_key() -> dict[str, str]:
    """Kernel release and mkfs versions: a probe is valid while these are unchanged.
    (Asked once per process; do not mutate the returned dict.)"""
    key = {"kernel": platform.release()}
    for fstype, argv in VERSION_ARGV.items():
        try:
            r = proc.run(argv, timeout_s=30, check=False)
            key[fstype] = (r.stdout + r.stderr).strip().splitlines()[0] if r.returncode == 0 else ""
        except (OSError, IndexError):
            key[fstype] = ""
    return key


def supported_block_sizes(paths: Paths) -> dict[str, list[int]]:
    """Block sizes (bytes) each file system mounts here; probes on first use."""
    key = machine_key()
    cached = _load(cache_path(paths), key)
    if cached is not None:
        return cached
    with _probe_lock(paths):
        cached = _load(cache_path(paths), key)  # another process may have probed meanwhile
        if cached is not None:
            return cached
        sizes = probe_all(paths, key)
        _save(cache_path(paths), key, sizes)
        return sizes


def _load(path: Path, key: dict[str, str]) -> dict[str, list[int]] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != key:
        return None
    return {k: [int(x) for x in v] for k, v in data["block_sizes"].items()}


def _save(path: Path, key: dict[str, str], sizes: dict[str, list[int]]) -> None:
    ensure_dir(path.parent)
    blob: dict[str, Any] = {"key": key, "block_sizes": sizes, "probed_at": time.time()}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(blob, indent=1))
    os.replace(tmp, path)


@contextmanager
def _probe_lock(paths: Paths) -> Iterator[None]:
    ensure_dir(paths.cache)
    with open(paths.cache / (CACHE_NAME + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def probe_all(paths: Paths, key: dict[str, str]) -> dict[str, list[int]]:
    if os.geteuid() != 0:
        raise StorageError("probing file-system support needs root (loop devices, mount)")
    state = State(paths.state_file)
    return {fstype: probe_fs(fstype, paths, state) if key[fstype] else [] for fstype in FS_KINDS}


def probe_fs(fstype: str, paths: Paths, state: State) -> list[int]:
    """mkfs + mount each candidate block size on one loop image; the ones that mount."""
    tag = f"probe-{fstype}-{os.getpid()}"
    image = (paths.work / "images" / f"{tag}.img").absolute()
    mount_point = paths.work / "mnt" / tag
    loopfs.create_image(image, MIN_SIZE_MB[fstype] * MIB, state)
    try:
        device = loopfs.attach(image, state)
        return [
            bs
            for bs in CANDIDATE_BLOCK_SIZES[fstype]
            if _mounts(fstype, bs, device, mount_point, state)
        ]
    finally:
        loopfs.detach_and_delete(image, state)


def _mounts(fstype: str, block_size: int, device: str, mount_point: Path, state: State) -> bool:
    spec = FsSpec(fstype, block_size, (), ())
    try:
        proc.run(make_mkfs_argv(spec, device), timeout_s=300)
        loopfs.mount(device, mount_point, fstype, (), state)
    except CommandError:
        return False
    loopfs.umount(mount_point, state)
    return True

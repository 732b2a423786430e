"""Plan-time validation of a StorageRequest: UserError naming the key, nothing created
(except the capability probe's cache, made once per machine)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from blocklab.errors import StorageError, UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths, check_own_dir
from blocklab.storage import capabilities, cgroup, safety
from blocklab.storage.devices import device_for_path, mount_for_path
from blocklab.storage.kinds import (
    DEFAULT_BLOCK_SIZE,
    FS_KINDS,
    MIB,
    MIN_SIZE_MB,
    check_mkfs_options,
    check_mount_options,
    check_size_mb,
    fs_type,
    required_image_bytes,
)
from blocklab.storage.needs import Need, StorageNeeds

MIN_MEMORY_LIMIT_BYTES = 32 * MIB


def validate(req: StorageRequest, *, paths: Paths, key: str = "storage") -> None:
    """Raise UserError for anything blocklab or this machine cannot provision."""
    if req.kind == "dir":
        _validate_dir(req, key)
        _counted_dir(Path(req.path) if req.path else paths.work / "dirs", key)
    elif req.kind in FS_KINDS:
        _validate_fs(req, paths, key)
        _validate_loop(req, key)
    elif req.kind == "device":
        _validate_fs(req, paths, key)
        safety.check_device(req.path, req.erase_confirmed, key)
        if req.size_mb is not None:
            raise UserError(f"{key}.size_mb: kind 'device' uses the whole device; remove size_mb")
    else:  # the model's Literal already refuses this; kept for direct callers
        raise UserError(
            f"{key}.kind: unknown kind {req.kind!r}; allowed: dir, ext4, xfs, btrfs, device"
        )
    if req.fs is not None and req.kind != "device":
        raise UserError(
            f"{key}.fs: only for kind 'device'; for a loop device the kind names the file "
            f"system (kind = {req.fs!r})"
        )
    _validate_memory(req, key)
    if req.wal is not None:
        _validate_wal(req.wal, paths, f"{key}.wal")


def _validate_dir(req: StorageRequest, key: str) -> None:
    for field in ("block_size", "size_mb", "mount_options", "mkfs_options"):
        if getattr(req, field):
            raise UserError(
                f"{key}.{field}: kind 'dir' uses an existing file system; "
                f"{field} needs kind ext4, xfs or btrfs"
            )
    if req.erase_confirmed:
        raise UserError(f"{key}.erase_confirmed: only for kind 'device'")
    if req.path is not None:
        path = Path(req.path)
        if not path.is_absolute():
            raise UserError(f"{key}.path: must be an absolute directory path, got {req.path!r}")
        check_own_dir(path, f"{key}.path")
        if path.exists() and not path.is_dir():
            raise UserError(f"{key}.path: {req.path} exists and is not a directory")


def _counted_dir(path: Path, key: str) -> None:
    """Refuse (at plan) a dir storage whose file system has no block device to count."""
    where = _existing_ancestor(path)
    try:
        device_for_path(where)
    except StorageError:
        mount = mount_for_path(where)
        raise UserError(uncounted_dir_message(key, path, mount.fstype if mount else "?")) from None


def uncounted_dir_message(key: str, path: Path, fstype: str) -> str:
    """What to do when kind 'dir' lands on a file system without a block device (pure)."""
    return (
        f"{key}: kind 'dir' puts the server in {path}, on {fstype} (no block device): "
        "device counters cannot be read there, and blocklab measures I/O with them; "
        f"allowed: {key}.path = a directory on a block-device file system (ext4, xfs, "
        f"btrfs), BLOCKLAB_HOME on one, or {key}.kind = 'ext4' or 'xfs' (a loop image, as root)"
    )


def _existing_ancestor(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def _validate_loop(req: StorageRequest, key: str) -> None:
    if req.path is not None:
        raise UserError(
            f"{key}.path: kind {req.kind!r} makes a loop image under blocklab's work "
            "directory; for a real block device use kind 'device'"
        )
    if req.erase_confirmed:
        raise UserError(f"{key}.erase_confirmed: only for kind 'device'")
    minimum = MIN_SIZE_MB[req.kind]
    if req.size_mb is not None and req.size_mb < minimum:
        raise UserError(f"{key}.size_mb: {req.kind} needs at least {minimum} MB, got {req.size_mb}")


def _validate_fs(req: StorageRequest, paths: Paths, key: str) -> None:
    fstype = fs_type(req.kind, req.fs)
    if os.geteuid() != 0:
        raise UserError(f"{key}.kind: {req.kind!r} needs root (loop devices, mkfs, mount)")
    check_mount_options(fstype, req.mount_options, f"{key}.mount_options")
    check_mkfs_options(fstype, req.mkfs_options, f"{key}.mkfs_options")
    block_size = req.block_size or DEFAULT_BLOCK_SIZE
    try:
        supported = capabilities.supported_block_sizes(paths)[fstype]
    except StorageError as e:
        raise UserError(f"{key}.kind: cannot tell what {fstype} supports here: {e}") from None
    if not supported:
        raise UserError(f"{key}.kind: {fstype} cannot be made and mounted on this machine")
    if block_size not in supported:
        allowed = ", ".join(str(b) for b in supported)
        raise UserError(
            f"{key}.block_size: {fstype} allows {allowed} here (mkfs + mount probed), "
            f"not {block_size}"
        )


def _validate_memory(req: StorageRequest, key: str) -> None:
    if req.memory_limit_bytes is None:
        return
    if req.memory_limit_bytes < MIN_MEMORY_LIMIT_BYTES:
        raise UserError(
            f"{key}.memory_limit_bytes: at least {MIN_MEMORY_LIMIT_BYTES} bytes (32 MiB), "
            f"got {req.memory_limit_bytes}"
        )
    if cgroup.available() is None:
        raise UserError(
            f"{key}.memory_limit_bytes: this machine has no memory cgroup controller "
            "(neither cgroup v2 memory nor v1 memory is mounted)"
        )


def _validate_wal(wal: StorageRequest, paths: Paths, key: str) -> None:
    for field in ("wal", "memory_limit_bytes"):
        if getattr(wal, field) is not None:
            raise UserError(f"{key}.{field}: set it on the data storage, not on the WAL storage")
    if wal.drop_caches:
        raise UserError(f"{key}.drop_caches: set it on the data storage, not on the WAL storage")
    validate(wal, paths=paths, key=key)


def check_room(
    req: StorageRequest, needs: StorageNeeds, *, paths: Paths, key: str = "storage"
) -> None:
    """UserError when the storage (or its WAL storage) cannot hold what blocklab.workloads.sizing
    estimates: an image's size_mb, a device's size, a directory's free space."""
    _check_volume(req, needs.data, paths, key)
    if req.wal is not None and needs.wal is not None:
        _check_volume(req.wal, needs.wal, paths, f"{key}.wal")


def _check_volume(req: StorageRequest, need: Need, paths: Paths, key: str) -> None:
    if req.kind in FS_KINDS:
        check_size_mb(req.kind, req.size_mb, need.bytes, key, need.how)
    elif req.kind == "device" and req.path:
        fstype = fs_type(req.kind, req.fs)
        name = safety.block_device_name(req.path, f"{key}.path")
        size = int(Path(f"/sys/class/block/{name}/size").read_text()) * 512
        required = required_image_bytes(fstype, need.bytes)
        if size < required:
            raise UserError(
                f"{key}.path: {req.path} holds {size} bytes, less than the {required} bytes "
                f"this storage needs: {need.bytes} bytes ({need.how}), + 30 % + 64 MiB for "
                f"{fstype}'s own metadata"
            )
    elif req.kind == "dir":
        where = _existing_ancestor(Path(req.path) if req.path else paths.work)
        free = shutil.disk_usage(where).free
        if free < need.bytes:
            raise UserError(
                f"{key}.path: {where} has {free} bytes free, less than the {need.bytes} bytes "
                f"this storage needs ({need.how}); free some space or set {key}.path"
            )

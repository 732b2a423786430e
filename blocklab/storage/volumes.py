"""Provisioning: a directory on a storage for the data (and optionally for pg_wal).

Layout under paths.work: images/<name>-<role>.img (sparse loop images),
mnt/<name>-<role>/ (mount points), dirs/<name>-<role>/ (kind 'dir' without a path).
The directory handed out is <mount point>/<role> (mode 0755, empty), so the file
system's own root (lost+found) stays out of the data directory.
A kind 'dir' directory is made new (<storage.path>/<name>-<role>); one that exists and
blocklab did not make is refused, never taken over or deleted (blocklab.storage.made_dirs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocklab import faults, proc
from blocklab.errors import StorageError, UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths, ensure_dir, safe_remove_tree
from blocklab.state import State
from blocklab.storage import loopfs, made_dirs, safety
from blocklab.storage.devices import device_for_path, is_mount_point
from blocklab.storage.kinds import (
    DEFAULT_BLOCK_SIZE,
    FsSpec,
    check_size_mb,
    fs_type,
    image_size_bytes,
    info_argv,
    mkfs_argv,
    notes_for,
)

SHARED_NOTE = (
    "kind 'dir': the counters are those of the whole block device under the directory, "
    "so other activity on that device is included"
)


@dataclass(frozen=True)
class DeviceRef:
    name: str  # /sys/class/block name, e.g. 'loop3'
    role: str  # 'data' or 'wal'
    shared: bool  # True when other activity on the device is counted too
    note: str = ""


@dataclass
class Volume:
    """One provisioned place (data or WAL) and how to undo it, newest step last."""

    role: str
    directory: Path
    device: DeviceRef | None
    facts: dict[str, Any]
    undo: list[Callable[[], object]] = field(default_factory=list)

    def release(self) -> None:
        errors = []
        while self.undo:
            step = self.undo.pop()
            try:
                step()
            except Exception as e:  # keep releasing the rest; report all
                errors.append(str(e))
        if errors:
            raise StorageError(f"releasing the {self.role} storage: " + "; ".join(errors))


@dataclass
class Provisioned:
    data_dir: Path
    wal_dir: Path | None
    devices: list[DeviceRef]
    facts: dict[str, Any]
    volumes: list[Volume]

    def release(self) -> None:
        """Unmount, detach, delete images and made directories. Idempotent."""
        errors = []
        for vol in reversed(self.volumes):
            try:
                vol.release()
            except StorageError as e:
                errors.append(str(e))
        if errors:
            raise StorageError("; ".join(errors))

    def __enter__(self) -> Provisioned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def provision(
    req: StorageRequest,
    *,
    name: str,
    paths: Paths,
    state: State,
    min_size_bytes: int,
    wal_min_size_bytes: int = 0,
) -> Provisioned:
    """Make the storage `req` asks for; release everything made if any step fails.
    The data volume must hold `min_size_bytes`, a WAL volume `wal_min_size_bytes`
    (blocklab.workloads.sizing estimates both)."""
    _check_name(name)
    volumes: list[Volume] = []
    try:
        volumes.append(_volume(req, "data", name, paths, state, min_size_bytes))
        if req.wal is not None:
            volumes.append(_volume(req.wal, "wal", name, paths, state, wal_min_size_bytes))
    except BaseException:
        for vol in reversed(volumes):
            vol.release()
        raise
    data = volumes[0]
    wal = volumes[1] if len(volumes) > 1 else None
    facts: dict[str, Any] = {"data": data.facts}
    if wal is not None:
        facts["wal"] = wal.facts
    return Provisioned(
        data_dir=data.directory,
        wal_dir=wal.directory if wal else None,
        devices=[v.device for v in volumes if v.device is not None],
        facts=facts,
        volumes=volumes,
    )


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or len(name) > 100:
        raise UserError(f"storage name {name!r}: use letters, digits, '-' and '_'")


def _volume(
    req: StorageRequest, role: str, name: str, paths: Paths, state: State, min_size_bytes: int
) -> Volume:
    if req.kind == "dir":
        return _dir_volume(req, role, name, paths, state)
    vol = Volume(role, Path(), None, {"kind": req.kind})
    try:
        _fs_volume(vol, req, name, paths, state, min_size_bytes)
    except BaseException:
        vol.release()
        raise
    return vol


def _dir_volume(req: StorageRequest, role: str, name: str, paths: Paths, state: State) -> Volume:
    base = Path(req.path) if req.path else paths.work / "dirs"
    directory = base / f"{name}-{role}"
    if not req.path and directory.is_dir() and not directory.is_symlink():
        safe_remove_tree(directory, [paths.work])  # a leftover in blocklab's own work dir
    key = "storage.path" if role == "data" else "storage.wal.path"
    vol = Volume(role, directory, None, {"kind": "dir", "path": str(directory)})
    # undone by the entry make_dir records, and made inside the try: an interruption just
    # as make_dir returned leaves neither the directory nor its entry behind
    vol.undo.append(lambda: made_dirs.remove_recorded(directory, state))
    try:
        made_dirs.make_dir(directory, state, key=key, purpose="storage dir")
        dev = device_for_path(directory)
    except BaseException:
        vol.release()
        raise
    vol.device = DeviceRef(dev, role, shared=True, note=SHARED_NOTE)
    vol.facts.update(device=dev, notes=[SHARED_NOTE])
    return vol


def _fs_volume(
    vol: Volume, req: StorageRequest, name: str, paths: Paths, state: State, min_size_bytes: int
) -> None:
    spec = FsSpec(
        fs_type(req.kind, req.fs),
        req.block_size or DEFAULT_BLOCK_SIZE,
        tuple(req.mount_options),
        tuple(req.mkfs_options),
    )
    tag = f"{name}-{vol.role}"
    mount_point = paths.work / "mnt" / tag
    image = (paths.work / "images" / f"{tag}.img").absolute()
    _check_unoccupied(mount_point, image)
    if req.kind == "device":
        device = _claim_device(req)
        vol.facts.update(device_path=req.path)
    else:
        key = "storage" if vol.role == "data" else "storage.wal"
        check_size_mb(spec.fstype, req.size_mb, min_size_bytes, key, f"the {vol.role} needs")
        size_bytes = image_size_bytes(spec.fstype, req.size_mb, min_size_bytes)
        device = _attach_image(vol, image, size_bytes, state)
        faults.step("provision")
    argv = mkfs_argv(spec, device)
    mkfs = proc.run(argv, timeout_s=1800)
    loopfs.mount(device, mount_point, spec.fstype, spec.mount_options, state)
    vol.undo.append(lambda: loopfs.umount(mount_point, state))
    vol.directory = ensure_dir(mount_point / vol.role)
    os.chmod(vol.directory, 0o755)
    dev_name = Path(os.path.realpath(device)).name
    vol.device = DeviceRef(dev_name, vol.role, shared=False)
    vol.facts.update(_fs_facts(spec, device, mount_point, argv, mkfs.stdout + mkfs.stderr))


def _check_unoccupied(mount_point: Path, image: Path) -> None:
    """A name already in use (or left behind) must not be overwritten."""
    if is_mount_point(mount_point):
        raise StorageError(
            f"{mount_point} is already a mount point (in use, or left behind: "
            "run `blocklab cleanup`)"
        )
    in_use = loopfs.loops_backed_by(image)
    if in_use:
        raise StorageError(
            f"{image} is attached to {', '.join(in_use)} (in use, or left behind: "
            "run `blocklab cleanup`)"
        )


def _claim_device(req: StorageRequest) -> str:
    """Re-check a real device right before erasing it (validate ran at plan time)."""
    safety.check_device(req.path, req.erase_confirmed, "storage")
    assert req.path is not None
    return os.path.realpath(req.path)


def _attach_image(vol: Volume, image: Path, size_bytes: int, state: State) -> str:
    loopfs.create_image(image, size_bytes, state)
    vol.undo.append(lambda: loopfs.detach_and_delete(image, state))
    device = loopfs.attach(image, state)
    vol.facts.update(
        image_path=str(image),
        size_bytes=size_bytes,
        loop_device=device,
        loop_direct_io=loopfs.direct_io(device),
    )
    return device


def _fs_facts(
    spec: FsSpec, device: str, mount_point: Path, mkfs: list[str], mkfs_output: str
) -> dict[str, Any]:
    info = proc.run(info_argv(spec.fstype, device, mount_point), timeout_s=120, check=False)
    return {
        "fstype": spec.fstype,
        "block_size": spec.block_size,
        "device": device,
        "mount_point": str(mount_point),
        "mkfs_command": " ".join(mkfs),
        "mkfs_output": mkfs_output.strip(),
        "fs_info_command": " ".join(info.argv),
        "fs_info": (info.stdout + info.stderr).strip(),
        "mount_options_requested": list(spec.mount_options),
        "mount_options_effective": loopfs.mounted_options(mount_point),
        "notes": notes_for(spec),
    }

"""Loop images, mkfs and mounts: each step recorded in State before it happens.

State entries made here (released by blocklab.storage.cleanup when a process dies):
  loop   ident = image path; info: image, device (once known). Releasing detaches every
         loop device backed by the image, then deletes the image.
  mount  ident = mount point; info: device, fstype. Releasing unmounts, removes the dir.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from blocklab import proc
from blocklab.errors import CommandError, StorageError
from blocklab.paths import ensure_dir
from blocklab.state import State
from blocklab.storage.devices import is_mount_point

UMOUNT_TRIES = 20
# `losetup -d` on a device someone still holds open (udev's probe after an unmount, a
# scan of block devices by another process) only marks it for autoclear: the kernel
# detaches it at the last close. Wait this long for that before saying it is still there.
DETACH_WAIT_S = 15.0
DETACH_POLL_S = 0.05


def create_image(image: Path, size_bytes: int, state: State) -> None:
    """Record, then create a sparse image file of `size_bytes`."""
    ensure_dir(image.parent)
    state.add("loop", str(image), image=str(image), device=None, size_bytes=size_bytes)
    with open(image, "wb") as f:
        f.truncate(size_bytes)


def attach(image: Path, state: State) -> str:
    """Attach `image` to a free loop device with direct I/O; return '/dev/loopN'."""
    result = proc.run(["losetup", "--direct-io=on", "--find", "--show", str(image)], timeout_s=120)
    device = result.stdout.strip()
    if not device.startswith("/dev/loop"):
        raise StorageError(f"losetup printed no loop device for {image}: {result.stdout!r}")
    state.update("loop", str(image), device=device)
    return device


def loops_backed_by(image: Path) -> list[str]:
    """Loop devices whose backing file is `image` (from sysfs; works for deleted images)."""
    found = []
    target = str(image)
    for entry in Path("/sys/block").glob("loop*"):
        try:
            backing = (entry / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)") == target:
            found.append(f"/dev/{entry.name}")
    return sorted(found)


def detach_and_delete(image: Path, state: State, *, wait_s: float = DETACH_WAIT_S) -> list[str]:
    """Detach every loop device backed by `image`, wait (at most `wait_s`) until the
    kernel has let go of them, delete the image, forget it. Idempotent. A device still
    attached after the wait is a StorageError naming it (the image is kept then)."""
    detached = []
    for device in loops_backed_by(image):
        proc.run(["losetup", "-d", device], timeout_s=60)
        detached.append(device)
    left = _wait_detached(image, wait_s)
    if left:
        raise StorageError(
            f"{', '.join(left)} still attached to {image} {wait_s:g} s after losetup -d: "
            "a process holds it open; the kernel detaches it at its last close "
            "(then run `blocklab cleanup`)"
        )
    image.unlink(missing_ok=True)
    state.remove("loop", str(image))
    return detached


def _wait_detached(image: Path, wait_s: float) -> list[str]:
    """The loop devices still backed by `image` after waiting at most `wait_s`."""
    deadline = time.monotonic() + wait_s
    while (left := loops_backed_by(image)) and time.monotonic() < deadline:
        time.sleep(DETACH_POLL_S)
    return left


def direct_io(device: str) -> bool | None:
    """Whether the loop device really does direct I/O (None if unknown)."""
    try:
        return (Path("/sys/block") / Path(device).name / "loop" / "dio").read_text().strip() == "1"
    except OSError:
        return None


def mount(
    device: str, mount_point: Path, fstype: str, options: tuple[str, ...], state: State
) -> None:
    """Record, then mount `device` at `mount_point` (created 0755)."""
    if is_mount_point(mount_point):
        raise StorageError(
            f"{mount_point} is already a mount point (left behind? run `blocklab cleanup`)"
        )
    ensure_dir(mount_point)
    state.add("mount", str(mount_point), device=device, fstype=fstype)
    argv = ["mount", "-t", fstype]
    if options:
        argv += ["-o", ",".join(options)]
    try:
        proc.run([*argv, device, str(mount_point)], timeout_s=120)
    except CommandError:
        _forget_mount_point(mount_point, state)
        raise
    os.chmod(mount_point, 0o755)


def umount(mount_point: Path, state: State) -> bool:
    """Unmount (retrying while busy), remove the directory, forget it. Idempotent.
    True if something was unmounted."""
    unmounted = False
    for attempt in range(UMOUNT_TRIES):
        if not is_mount_point(mount_point):
            break
        result = proc.run(["umount", str(mount_point)], timeout_s=120, check=False)
        if result.returncode == 0:
            unmounted = True
            break
        if attempt == UMOUNT_TRIES - 1:
            raise CommandError(result.argv, result.returncode, result.stdout + result.stderr)
        time.sleep(0.5)
    _forget_mount_point(mount_point, state)
    return unmounted


def _forget_mount_point(mount_point: Path, state: State) -> None:
    try:
        mount_point.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise StorageError(f"cannot remove the mount point {mount_point}: {e}") from e
    state.remove("mount", str(mount_point))


def mounted_options(mount_point: Path) -> str | None:
    """The options the kernel reports for a mount (from /proc/mounts)."""
    target = str(mount_point.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == target:
            return fields[3]
    return None

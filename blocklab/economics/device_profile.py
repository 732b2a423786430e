"""`blocklab device profile`: fio by pattern, request size and queue depth on one storage.

The storage is a loop-device file system made for the profile (default ext4, or any
storage table of an experiment file, through blocklab.storage.provision and its safety
rules), an existing directory, or a whole block device (only with confirmation: fio
writes to it). fio runs one point at a time with direct I/O on a file of `size_bytes`
(or the device's first `size_bytes`); each point is stored as soon as it ends.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocklab import proc
from blocklab.economics import device_store, fio
from blocklab.errors import CommandError, UserError
from blocklab.host import host_facts
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.store import ResultsStore
from blocklab.store.factory import open_store
from blocklab.timestamps import now_iso

FIO_FILE = "blocklab-fio.dat"
FIO_GRACE_S = 120  # file layout and start-up on top of the runtime
SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True)
class Plan:
    """A validated profile request: nothing has been started yet."""

    name: str
    points: Sequence[fio.Point]
    runtime_s: float
    size_bytes: int
    ioengine: str


@dataclass
class Target:
    """Where fio does its I/O and what the profile records about it."""

    filename: Path
    facts: dict[str, Any]
    release: Callable[[], None] = field(default=lambda: None)


class Listener:
    """Progress callbacks (the CLI prints; tests may ignore)."""

    def begin(self, total: int, point_s: float) -> None: ...
    def point_started(self, point: fio.Point) -> None: ...
    def point_finished(self, point: fio.Point, result: fio.Result | None, reason: str) -> None: ...


def parse_size(text: str, flag: str = "--size") -> int:
    """'64M', '1G', '512k', '1048576' -> bytes (1024-based)."""
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = t[-1:] if t[-1:] in SIZE_UNITS and not t[-1:].isdigit() else ""
    number = t[: len(t) - len(unit)]
    if not number.isdigit() or int(number) * SIZE_UNITS[unit] < 1024 * 1024:
        raise UserError(f"{flag}: {text!r} is not a size of 1M or more (e.g. 256M, 1G)")
    return int(number) * SIZE_UNITS[unit]


def check_fio() -> str:
    """fio's path; UserError when it is not installed."""
    path = shutil.which("fio")
    if path is None:
        raise UserError("fio: not installed; install the Debian package: apt-get install -y fio")
    return path


def check_runtime(runtime_s: float) -> float:
    if not 1 <= runtime_s <= 3600:
        raise UserError(f"--runtime: seconds per point, from 1 to 3600 (got {runtime_s:g})")
    return runtime_s


# -- targets ------------------------------------------------------------------------------


def dir_target(path: Path) -> Target:
    """fio on a file in an existing directory (kind 'dir': the host's device, shared)."""
    if not path.is_dir():
        raise UserError(f"--path: {path} is not an existing directory")
    filename = path.absolute() / FIO_FILE
    if filename.exists():
        raise UserError(f"--path: {filename} exists (left behind?); remove it first")
    return Target(
        filename,
        {"kind": "dir", "path": str(path.absolute())},
        release=lambda: filename.unlink(missing_ok=True),
    )


def device_target(path: str, confirmed: bool) -> Target:
    """fio on a whole block device: erases what it writes, so only with confirmation and
    only when blocklab.storage.safety finds the device unused."""
    from blocklab.storage import safety

    if not confirmed:
        raise UserError(
            f"--device: fio writes to {path} and destroys what is on it; pass --yes to confirm"
        )
    name = safety.check_device(path, True, "--device")
    return Target(Path(os.path.realpath(path)), {"kind": "device", "path": path, "device": name})


def storage_target(req: StorageRequest, *, name: str, paths: Paths, size_bytes: int) -> Target:
    """fio on a file in a storage provisioned for the profile (released afterwards)."""
    from blocklab import storage

    storage.validate(req, paths=paths, key="storage")
    prov = storage.provision(
        req,
        name=f"fio-{name}",
        paths=paths,
        state=State(paths.state_file),
        min_size_bytes=size_bytes + 64 * 1024 * 1024,
    )
    facts = {"kind": req.kind, "label": req.label(), "request": req.model_dump(mode="json")}
    facts["facts"] = prov.facts
    return Target(prov.data_dir / FIO_FILE, facts, release=prov.release)


def storages_in(experiment_file: Path) -> dict[str, StorageRequest]:
    """Storage label -> request, for every storage an experiment file uses."""
    from blocklab import experiment_file as spec

    exp = spec.load(experiment_file)
    return {v.storage.label(): v.storage for v in exp.variants()}


def pick_storage(found: dict[str, StorageRequest], label: str | None) -> StorageRequest:
    if label is None and len(found) == 1:
        return next(iter(found.values()))
    if label not in found:
        raise UserError(
            f"--storage: {'choose one' if label is None else repr(label) + ' is not'} of the "
            f"experiment's storages: {', '.join(found)}"
        )
    return found[label]


def check_block_target(target: Target, size_bytes: int) -> None:
    """A block device must be at least `size_bytes` long."""
    try:
        st = os.stat(target.filename)
    except OSError:
        return
    if stat.S_ISBLK(st.st_mode):
        with open(target.filename, "rb") as f:
            length = f.seek(0, os.SEEK_END)
        if length < size_bytes:
            raise UserError(f"--size: {target.filename} has only {length} bytes")


# -- running ------------------------------------------------------------------------------


@contextmanager
def released(target: Target) -> Iterator[Target]:
    try:
        yield target
    finally:
        target.release()


def run_profile(
    plan: Plan, target: Target, results: str, listener: Listener, *, replace: bool = False
) -> int:
    """Measure every point of `plan` on `target`; store as it goes. Returns the profile id."""
    version = proc.run(["fio", "--version"], timeout_s=30).stdout.strip()
    head = device_store.ProfileHead(
        plan.name,
        now_iso(),
        target.facts,
        host_facts(),
        version,
        plan.ioengine,
        plan.runtime_s,
        plan.size_bytes,
    )
    with open_store(results) as db:
        profile_id = device_store.create(db, head, replace=replace)
        listener.begin(len(plan.points), plan.runtime_s)
        state = "interrupted"
        try:
            for point in plan.points:
                _measure(db, profile_id, plan, target, point, listener)
            state = "done"
        finally:
            device_store.set_state(db, profile_id, state)
    return profile_id


def _measure(
    db: ResultsStore,
    profile_id: int,
    plan: Plan,
    target: Target,
    point: fio.Point,
    listener: Listener,
) -> None:
    listener.point_started(point)
    argv = fio.command(
        point,
        target.filename,
        size_bytes=plan.size_bytes,
        runtime_s=plan.runtime_s,
        ioengine=plan.ioengine,
    )
    result, reason, raw = None, "", ""
    try:
        res = proc.run(argv, timeout_s=plan.runtime_s + FIO_GRACE_S, check=False)
        raw = res.stdout
        if res.returncode != 0:
            reason = f"fio exit code {res.returncode}: {res.stderr.strip()[-500:]}"
        else:
            result = fio.parse(res.stdout, point.pattern)
    except CommandError as e:
        reason, raw = f"fio {e.reason}", e.output
    except ValueError as e:
        reason = f"fio output not understood: {e}"
    if not reason and result is None:
        reason = "fio gave no result"
    device_store.record_point(
        db, profile_id, point, result=result, reason=reason, command=argv, raw_json=raw
    )
    listener.point_finished(point, result, reason)

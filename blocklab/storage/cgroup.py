"""Memory caps for the server's processes, and dropping the page cache.

cgroup v2 (memory.max) where its memory controller is enabled, else cgroup v1
(memory.limit_in_bytes). On v1 the cap is made inside blocklab's own memory cgroup, so
any limit already on blocklab still applies. Every cgroup is recorded in State before
it is made. A process joins by PID (`add_pid`, which fits Cluster's memory_hook: call
it for the postmaster and its children) or, before it starts, through `argv_prefix()`
(a shell that moves itself into the cgroup and execs the command; call `grant(user)`
first when the command runs as another user).
"""

from __future__ import annotations

import os
from pathlib import Path

from blocklab import proc
from blocklab.errors import StorageError
from blocklab.state import State
from blocklab.storage.devices import mounts

V1_LIMIT = "memory.limit_in_bytes"
V2_LIMIT = "memory.max"
V2_GROUP = "blocklab"
V1_USAGE = {
    "memory_limit_bytes": V1_LIMIT,
    "memory_current_bytes": "memory.usage_in_bytes",
    "memory_peak_bytes": "memory.max_usage_in_bytes",
    "memory_limit_hits": "memory.failcnt",
}
V2_USAGE = {
    "memory_limit_bytes": V2_LIMIT,
    "memory_current_bytes": "memory.current",
    "memory_peak_bytes": "memory.peak",
    "memory_limit_hits": "memory.events",
}


def _v1_root() -> Path | None:
    for m in mounts():
        if m.fstype == "cgroup" and "memory" in m.options.split(","):
            return Path(m.mount_point)
    return None


def _v2_root() -> Path | None:
    for m in mounts():
        if m.fstype == "cgroup2":
            root = Path(m.mount_point)
            try:
                controllers = (root / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "memory" in controllers:
                return root
    return None


def available() -> str | None:
    """'v2', 'v1' or None: which memory controller blocklab can use here."""
    if _v2_root() is not None:
        return "v2"
    root = _v1_root()
    if root is not None and (root / V1_LIMIT).exists():
        return "v1"
    return None


def own_v1_path(proc_cgroup_text: str) -> str:
    """This process's path in the v1 memory hierarchy, from /proc/self/cgroup (pure)."""
    for line in proc_cgroup_text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    return "/"


def _parent_dir(version: str) -> Path:
    if version == "v2":
        root = _v2_root()
        assert root is not None
        return root / V2_GROUP
    root = _v1_root()
    assert root is not None
    own = own_v1_path(Path("/proc/self/cgroup").read_text()).strip("/")
    return root / own if own else root


class MemoryCap:
    """A memory cgroup of `limit_bytes` named after `name` (e.g. a variant id)."""

    def __init__(self, limit_bytes: int, name: str, state: State):
        self.limit_bytes = limit_bytes
        self.name = name
        self.state = state
        self.version: str | None = None
        self.path: Path | None = None

    def create(self) -> Path:
        version = available()
        if version is None:
            raise StorageError("no memory cgroup controller (v1 or v2) is available here")
        parent = _parent_dir(version)
        path = parent / f"blocklab-{self.name}"
        self.state.add("cgroup", str(path), version=version, limit_bytes=self.limit_bytes)
        self.version, self.path = version, path
        try:
            if version == "v2":
                _enable_v2_memory(parent)
            path.mkdir(exist_ok=True)
            limit_file = V2_LIMIT if version == "v2" else V1_LIMIT
            (path / limit_file).write_text(str(self.limit_bytes))
        except OSError as e:
            self.close()
            raise StorageError(f"cannot make the memory cgroup {path}: {e}") from e
        return path

    def _require(self) -> Path:
        if self.path is None:
            raise StorageError("the memory cgroup was not created (call create() first)")
        return self.path

    def add_pid(self, pid: int) -> None:
        """Move one process (all its threads) into the cgroup; children it forks follow."""
        try:
            (self._require() / "cgroup.procs").write_text(str(pid))
        except ProcessLookupError:
            pass  # it exited meanwhile
        except OSError as e:
            raise StorageError(f"cannot move PID {pid} into {self.path}: {e}") from e

    def __call__(self, pid: int) -> None:
        """A Cluster memory_hook: the first call creates the cgroup, each adds a PID."""
        if self.path is None:
            self.create()
        self.add_pid(pid)

    def pids(self) -> list[int]:
        text = (self._require() / "cgroup.procs").read_text()
        return [int(x) for x in text.split()]

    def grant(self, user: proc.User) -> None:
        """Let `user` move its own processes in (needed for argv_prefix as that user)."""
        for f in ("cgroup.procs", "tasks"):
            p = self._require() / f
            if p.exists():
                os.chown(p, user.uid, user.gid)

    def argv_prefix(self) -> list[str]:
        """Prefix a command with this to start it inside the cgroup."""
        procs = str(self._require() / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]

    def usage(self) -> dict[str, int]:
        """Limit, current and peak usage in bytes, and how often the limit was hit."""
        path = self._require()
        files = V2_USAGE if self.version == "v2" else V1_USAGE
        out = {}
        for key, fname in files.items():
            try:
                text = (path / fname).read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                out[key] = int(text)
        return out

    def close(self) -> None:
        """Move remaining processes out and remove the cgroup. Idempotent."""
        if self.path is None:
            return
        remove_cgroup(self.path, self.version or "v1")
        self.state.remove("cgroup", str(self.path))
        self.path = None

    def __enter__(self) -> MemoryCap:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hook(name: str, limit_bytes: int, *, state: State) -> MemoryCap:
    """A MemoryCap to pass as Cluster(memory_hook=...): made on the first PID it gets.
    Call its close() after the server has stopped (else `blocklab cleanup` removes it)."""
    return MemoryCap(limit_bytes, name, state)


def _enable_v2_memory(parent: Path) -> None:
    """Enable the memory controller for children of the root and of blocklab's group."""
    parent.mkdir(exist_ok=True)
    for d in (parent.parent, parent):
        control = d / "cgroup.subtree_control"
        if "memory" not in control.read_text().split():
            control.write_text("+memory")


def remove_cgroup(path: Path, version: str) -> None:
    """Move the processes still inside to a cgroup that may hold them, then rmdir."""
    if not path.exists():
        return
    target = path.parent
    if version == "v2":
        root = _v2_root()
        target = root if root is not None else path.parent.parent
    procs = (path / "cgroup.procs").read_text().split()
    for pid in procs:
        try:
            (target / "cgroup.procs").write_text(pid)
        except ProcessLookupError:
            continue
        except OSError as e:
            raise StorageError(f"cannot move PID {pid} out of {path}: {e}") from e
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise StorageError(f"cannot remove the cgroup {path}: {e}") from e


def drop_caches() -> None:
    """sync, then drop the page cache, dentries and inodes (needs root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3")
    except OSError as e:
        raise StorageError(f"cannot drop the page cache (needs root): {e}") from e

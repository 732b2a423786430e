"""Where blocklab keeps things.

BLOCKLAB_HOME (default /var/lib/blocklab as root, else ~/.local/share/blocklab) holds:
  cache/    builds and sources, shared by every experiment (BLOCKLAB_CACHE overrides)
  work/     data directories, loop-device images, mount points, sockets
  state.json  what blocklab has created and not yet released (see blocklab.state)
  results/  the default results directory (--results or BLOCKLAB_RESULTS override)
Every directory is world-traversable: the unprivileged server user must reach builds
and data directories.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import StorageError, UserError

# Directories blocklab never takes as its own (nor any of their ancestors): results,
# dir storage and removals below them are fine, they themselves are not.
SYSTEM_DIRS = tuple(
    Path(p)
    for p in (
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media",
        "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
        "/usr/bin", "/usr/lib", "/usr/local", "/usr/share", "/var", "/var/lib", "/var/log",
        "/var/tmp", "/var/cache", "/var/spool",
    )
)  # fmt: skip


def is_system_dir(resolved: Path) -> bool:
    """`resolved` (already resolved) is a system directory or an ancestor of one."""
    return any(resolved == d or resolved in d.parents for d in SYSTEM_DIRS)


def check_own_dir(path: Path, key: str) -> Path:
    """`path` resolved (symlinks followed), refused with a UserError naming `key` when it
    has a `..` part or resolves to a system directory or an ancestor of one."""
    if ".." in path.parts:
        raise UserError(f"{key}: {path} contains '..'; give the directory without it")
    resolved = path.resolve()
    if is_system_dir(resolved):
        shown = f"{path} (resolves to {resolved})" if resolved != path else str(path)
        raise UserError(
            f"{key}: {shown} is a system directory; allowed: a directory of blocklab's own "
            "below it (e.g. /var/lib/blocklab/results or /srv/bench/results)"
        )
    return resolved


def safe_remove_tree(path: Path, allowed_roots: Iterable[Path]) -> None:
    """rmtree `path` only when it resolves strictly inside one of `allowed_roots` (also
    resolved) and is no system directory; a symlink itself is refused (rmtree would not
    follow it, and what it names is not ours). A missing path is nothing to do.
    `allowed_roots` must be blocklab's own directories (its work dir, a results
    directory's raw runs), never a path's own parent: a directory blocklab made outside
    them is deleted by blocklab.storage.made_dirs, by its State record."""
    if not path.exists() and not path.is_symlink():
        return
    target = path.resolve()
    roots = [r.resolve() for r in allowed_roots]
    if path.is_symlink() or not any(r in target.parents for r in roots):
        raise StorageError(
            f"refusing to delete {path} (resolves to {target}): not inside "
            f"{', '.join(map(str, roots))}"
        )
    if is_system_dir(target):
        raise StorageError(
            f"refusing to delete {path}: it resolves to the system directory {target}"
        )
    shutil.rmtree(target)


def _default_home() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/blocklab")
    return Path.home() / ".local" / "share" / "blocklab"


@dataclass(frozen=True)
class Paths:
    home: Path
    cache: Path
    results: Path

    @classmethod
    def from_env(cls, results: Path | None = None) -> Paths:
        home = Path(os.environ.get("BLOCKLAB_HOME") or _default_home())
        cache = Path(os.environ.get("BLOCKLAB_CACHE") or home / "cache")
        res = results or Path(os.environ.get("BLOCKLAB_RESULTS") or home / "results")
        check_own_dir(res.absolute(), "--results")
        return cls(home=home.absolute(), cache=cache.absolute(), results=res.absolute())

    @property
    def builds(self) -> Path:
        return self.cache / "builds"

    @property
    def sources(self) -> Path:
        return self.cache / "sources"

    @property
    def work(self) -> Path:
        return self.home / "work"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"


def ensure_dir(path: Path, mode: int = 0o755) -> Path:
    """mkdir -p, then make the directory and its new parents traversable by others."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    for m in missing:
        os.chmod(m, mode)
    return path


def untraversable(path: Path, uid: int, gid: int) -> Path | None:
    """The first existing directory from / down to `path` that `uid`/`gid` may not enter
    (by its owner, group and other execute bits), or None when every one lets it in."""
    if uid == 0:
        return None
    for d in (*reversed(path.parents), path):
        try:
            st = d.stat()
        except FileNotFoundError:
            return None
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return d
    return None


def open_to_server(paths: Paths, name: str, uid: int, gid: int) -> list[str]:
    """Let the server user (`name`, `uid`, `gid`) reach blocklab's home and cache: each is
    created if missing (mode 0755); one that exists, is ours and denies it entry (a home
    made by `mktemp -d` is 0700) gets o+x (entry only, never o+r). A directory above them
    that denies entry is not ours to change: UserError naming the variable. Returns what
    was changed, one line each."""
    changed: list[str] = []
    for key, root in (("BLOCKLAB_HOME", paths.home), ("BLOCKLAB_CACHE", paths.cache)):
        ensure_dir(root)
        while (d := untraversable(root, uid, gid)) is not None:
            st = d.stat()
            if d != root or st.st_uid != os.geteuid():
                raise UserError(
                    f"{key}: {root}: the server user {name!r} cannot enter {d} (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}); allowed: a "
                    f"directory every user may traverse (chmod o+x {d}) or another {key}"
                )
            os.chmod(d, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
            changed.append(f"{key}: {d} made traversable by {name!r} (chmod o+x)")
    return changed


def tree_size_bytes(path: Path) -> int:
    """The bytes of every regular file under `path` (symlinks are not followed or counted)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                total += os.stat(p).st_size
    return total

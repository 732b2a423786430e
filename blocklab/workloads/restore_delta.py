"""The delta restore (issue 33): when a target directory holds what an earlier restore of
the same snapshot made in this process, copy only what differs from the snapshot.

After every restore the target's files and symlinks are remembered by identity (inode and
ctime in nanoseconds, in both trees): the ctime changes on every write, truncation, chmod,
chown or utime, and a file replaced by another has another inode, so a file whose identity
is unchanged and whose type, mode, owner, size and mtime_ns still equal the snapshot's
(`cp -a` keeps mtimes; any write sets the mtime to now) holds the snapshot's bytes and no
dirty page (it was synced when it was restored). Everything else is made again as the
whole restore makes it: a file that differs is removed and copied with `cp -a` (a fresh
allocation, not a rewrite in place), what the run added is removed, what it removed is
copied back, symlinks are always copied, and every directory gets the snapshot's mode,
owner and mtime. With no memory of the target (the first restore in a process, a failed
one, another snapshot) the caller makes the whole copy.

The memory lives in this process only: another process, or a restore that failed half
way, finds none and copies everything.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from blocklab import proc

# `cp -a` of coreutils 9.x clones (reflinks) by default when source and target share a
# file system that can (xfs, btrfs): the target's blocks would then be shared with the
# snapshot's, and the run's first write to each block a copy-on-write that a plain file
# does not pay. No storage asks for shared blocks: always a real copy.
CP = ("cp", "-a", "--reflink=never")

Ident = tuple[int, int]  # (st_ino, st_ctime_ns)


@dataclass(frozen=True)
class Memory:
    """What a restore left: its source, and each file's and symlink's identity right
    after it, in the source and in the target (relative path -> (inode, ctime_ns))."""

    source: str
    source_ids: dict[str, Ident]
    target_ids: dict[str, Ident]


@dataclass(frozen=True)
class Plan:
    remove: list[str]  # in the target and not in the snapshot (or of another type)
    replace: list[str]  # in both and to be copied: removed first (a fresh file, as a copy)
    make_dirs: list[str]  # the snapshot's directories missing in the target, parents first
    copy: list[str]  # files and symlinks to copy (those of them in the target removed first)
    dirs: list[str]  # every directory of the snapshot, deepest first ("" is the root)
    copy_bytes: int


_MEMORY: dict[str, Memory] = {}


def scan(root: Path) -> dict[str, os.stat_result]:
    """Every entry below `root` by relative path (lstat: symlinks are not followed)."""
    out: dict[str, os.stat_result] = {}
    for here, dirs, files in os.walk(root):
        rel_here = os.path.relpath(here, root)
        for name in dirs + files:
            rel = name if rel_here == "." else os.path.join(rel_here, name)
            out[rel] = os.lstat(os.path.join(here, name))
    return out


def _ids(entries: dict[str, os.stat_result]) -> dict[str, Ident]:
    return {
        rel: (st.st_ino, st.st_ctime_ns)
        for rel, st in entries.items()
        if not stat.S_ISDIR(st.st_mode)
    }


def remember(source: Path, target: Path) -> None:
    """Note what `target` holds right after a complete restore of `source`."""
    _MEMORY[str(target)] = Memory(str(source), _ids(scan(source)), _ids(scan(target)))


def forget(target: Path) -> None:
    """The next restore into `target` copies everything (called when a restore starts)."""
    _MEMORY.pop(str(target), None)


def recall(source: Path, target: Path) -> Memory | None:
    """The memory of `target` when it was last restored from `source`."""
    memory = _MEMORY.get(str(target))
    return memory if memory is not None and memory.source == str(source) else None


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    keys = ("st_mode", "st_uid", "st_gid", "st_size", "st_mtime_ns")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def _kept(rel: str, src: os.stat_result, dst: os.stat_result | None, memory: Memory) -> bool:
    """The target's entry still holds the snapshot's (see the module's docstring)."""
    if dst is None or stat.S_ISLNK(src.st_mode) or not _same(src, dst):
        return False
    return memory.source_ids.get(rel) == (src.st_ino, src.st_ctime_ns) and memory.target_ids.get(
        rel
    ) == (dst.st_ino, dst.st_ctime_ns)


def plan(src: dict[str, os.stat_result], dst: dict[str, os.stat_result], memory: Memory) -> Plan:
    """What to remove, make and copy so that the target equals the snapshot (pure)."""
    remove: list[str] = []
    gone: set[str] = set()  # removed, or inside a directory removed whole
    for rel in sorted(dst):
        if os.path.dirname(rel) in gone:
            gone.add(rel)
            continue
        s = src.get(rel)
        if s is None or stat.S_IFMT(s.st_mode) != stat.S_IFMT(dst[rel].st_mode):
            remove.append(rel)
            gone.add(rel)
    make_dirs, copy, replace, copy_bytes = [], [], [], 0
    for rel in sorted(src):
        s = src[rel]
        d = None if rel in gone else dst.get(rel)
        if stat.S_ISDIR(s.st_mode):
            if d is None:
                make_dirs.append(rel)
        elif not _kept(rel, s, d, memory):
            copy.append(rel)
            replace += [rel] if d is not None else []
            copy_bytes += s.st_size if stat.S_ISREG(s.st_mode) else 0
    dirs = sorted((r for r, s in src.items() if stat.S_ISDIR(s.st_mode)), key=_depth)
    return Plan(remove, replace, make_dirs, copy, [*dirs, ""], copy_bytes)


def _depth(rel: str) -> int:
    return -rel.count(os.sep)


def apply(plan_: Plan, source: Path, target: Path, dst: dict[str, os.stat_result]) -> None:
    """Carry out a plan (the server stopped)."""
    for rel in plan_.remove:
        path = target / rel
        if stat.S_ISDIR(dst[rel].st_mode):
            shutil.rmtree(path)
        else:
            path.unlink()
    for rel in plan_.replace:
        (target / rel).unlink()
    for rel in plan_.make_dirs:
        (target / rel).mkdir()
    by_parent: dict[str, list[str]] = {}
    for rel in plan_.copy:
        by_parent.setdefault(os.path.dirname(rel), []).append(str(source / rel))
    for parent, files in sorted(by_parent.items()):
        proc.run([*CP, "-t", str(target / parent), "--", *files], timeout_s=24 * 3600)
    for rel in plan_.dirs:  # deepest first: a parent's mtime is set after its children's
        st = os.lstat(source / rel)
        os.chown(target / rel, st.st_uid, st.st_gid)
        os.chmod(target / rel, st.st_mode & 0o7777)
        os.utime(target / rel, ns=(st.st_atime_ns, st.st_mtime_ns))


def fsync_files(target: Path, rels: list[str]) -> None:
    """fsync every copied regular file, then every directory that holds one."""
    parents = set()
    for rel in rels:
        path = target / rel
        parents.add(path.parent)
        if path.is_symlink() or not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for d in sorted(parents):
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

"""The delta restore (issue 33): when a target directory holds what an earlier restore of
the same snapshot made in this process, copy only what differs from the snapshot.

After every restore the target's files and symlinks are remembered by identity (inode and
ctime in nanoseconds, in both trees): the ctime changes on every write, truncation, chmod,
chown or utime, and a file replaced by another has another inode, so a file whose identity
is unchanged and whose type, mode, owner, size and mtime_ns still equal the snapshot's
(`cp -a` keeps mtimes; any write sets the mtime to now) holds the snapshot's bytes and no
dirty page (it was synced when it was restored). A regular file that differs is patched
where the file system rewrites blocks in place (ext4, xfs): only its 8 kB blocks that
differ from the snapshot's are written, what it grew is truncated, and it keeps the
blocks the whole copy gave it; elsewhere (btrfs: copy-on-write would move every patched
block, run after run) it is removed and copied with `cp -a`. What the run added is
removed, what it removed is copied back, symlinks are always copied, and every
directory gets the snapshot's mode, owner and mtime. With no memory of the target (the
first restore in a process, a failed one, another snapshot) the caller makes the whole
copy.

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
    replace: list[str]  # in both and to be copied: patched in place, or removed first
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
    ids = (memory.source_ids.get(rel), memory.target_ids.get(rel))
    return ids == ((src.st_ino, src.st_ctime_ns), (dst.st_ino, dst.st_ctime_ns))


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


def apply(
    plan_: Plan, source: Path, target: Path, dst: dict[str, os.stat_result], *, in_place: bool
) -> int:
    """Carry out a plan (the server stopped); the bytes written. `in_place`: a regular
    file in both trees gets only its differing blocks written (see rewrite_in_place)."""
    for rel in plan_.remove:
        path = target / rel
        if stat.S_ISDIR(dst[rel].st_mode):
            shutil.rmtree(path)
        else:
            path.unlink()
    written, rewritten = 0, set()
    for rel in plan_.replace:
        if in_place and stat.S_ISREG(dst[rel].st_mode):
            written += patch_file(source / rel, target / rel)
            rewritten.add(rel)
        else:
            (target / rel).unlink()
    for rel in plan_.make_dirs:
        (target / rel).mkdir()
    by_parent: dict[str, list[str]] = {}
    for rel in (r for r in plan_.copy if r not in rewritten):
        by_parent.setdefault(os.path.dirname(rel), []).append(str(source / rel))
        written += os.lstat(source / rel).st_size
    for parent, files in sorted(by_parent.items()):
        proc.run([*CP, "-t", str(target / parent), "--", *files], timeout_s=24 * 3600)
    for rel in plan_.dirs:  # deepest first: a parent's mtime is set after its children's
        st = os.lstat(source / rel)
        os.chown(target / rel, st.st_uid, st.st_gid)
        os.chmod(target / rel, st.st_mode & 0o7777)
        os.utime(target / rel, ns=(st.st_atime_ns, st.st_mtime_ns))
    return written


# The file systems where writing a block rewrites it where it is (`stat -f -c %T`; ext4
# says ext2/ext3). On btrfs (copy-on-write) every rewrite moves the block: a file patched
# run after run would drift away from the layout a copy gets, so it is copied afresh.
IN_PLACE_FS = frozenset({"ext2/ext3", "xfs", "tmpfs"})
CHUNK_BYTES = 1 << 20
BLOCK_BYTES = 8192


def rewrites_in_place(target: Path) -> bool:
    """The target's file system rewrites blocks in place (IN_PLACE_FS)."""
    return proc.run(["stat", "-f", "-c", "%T", str(target)]).stdout.strip() in IN_PLACE_FS


def patch_file(source: Path, target: Path) -> int:
    """Make `target` equal `source` by writing only the 8 kB blocks that differ (and
    truncating what it has beyond the source's size), then its mode, owner and mtime:
    the file keeps its blocks where the restore that copied it put them. The bytes
    written."""
    st = os.lstat(source)
    written, offset = 0, 0
    with open(source, "rb", buffering=0) as a, open(target, "r+b", buffering=0) as b:
        fd = b.fileno()
        if os.fstat(fd).st_size > st.st_size:
            os.ftruncate(fd, st.st_size)
        while chunk := a.read(CHUNK_BYTES):
            have = os.pread(fd, len(chunk), offset)
            if have != chunk:
                for i in range(0, len(chunk), BLOCK_BYTES):
                    if chunk[i : i + BLOCK_BYTES] != have[i : i + BLOCK_BYTES]:
                        written += os.pwrite(fd, chunk[i : i + BLOCK_BYTES], offset + i)
            offset += len(chunk)
    os.chown(target, st.st_uid, st.st_gid)
    os.chmod(target, st.st_mode & 0o7777)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    return written

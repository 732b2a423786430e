"""The delta restore (blocklab.workloads.restore_delta, issue 33) on real files: after
runs that modify, add and delete files (and change modes, types and symlinks), every
restore leaves the target equal to the snapshot (tree_digest, and every file's mtime);
what did not change is not copied."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from blocklab.workloads import dataset, restore_delta
from blocklab.workloads.dataset import Snapshot


def _snapshot(root: Path, *, wal: bool = False) -> Snapshot:
    data = root / "data"
    for rel, size in {"PG_VERSION": 3, "global/1262": 8192, "base/5/16384": 65536}.items():
        path = data / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    (data / "base/5/16384_fsm").write_bytes(b"\0" * 24576)
    (data / "pg_stat_tmp").mkdir()  # an empty directory
    (data / "pg_logical/snapshots").mkdir(parents=True)
    os.chmod(data / "global/1262", 0o600)
    os.utime(data / "base/5/16384", ns=(1_000_000_000, 1_500_000_000_123))
    if wal:
        (root / "wal").mkdir()
        (root / "wal/000000010000000000000001").write_bytes(os.urandom(16384))
        (data / "pg_wal").symlink_to(root / "wal")
    else:
        (data / "pg_wal").mkdir()
        (data / "pg_wal/000000010000000000000001").write_bytes(os.urandom(16384))
    return Snapshot(
        key="k", root=root, has_wal=wal, scale=1, fillfactor=100, init_s=1.0,
        pgbench_init_s=1.0, snapshot_s=1.0, size_bytes=0,
    )  # fmt: skip


def _mtimes(path: Path) -> dict[str, int]:
    return {
        rel: st.st_mtime_ns
        for rel, st in restore_delta.scan(path).items()
        if not stat.S_ISLNK(st.st_mode)
    }


def _assert_equal(target: Path, source: Path) -> None:
    assert dataset.tree_digest(target) == dataset.tree_digest(source)
    assert _mtimes(target) == _mtimes(source)
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(source.stat().st_mode)


@pytest.fixture
def snap(tmp_path: Path) -> Snapshot:
    return _snapshot(tmp_path / "snap")


def test_the_first_restore_is_whole_and_the_second_copies_nothing(
    snap: Snapshot, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    first = dataset.restore(snap, target)
    _assert_equal(target, snap.data)
    assert (first.mode, first.files_copied) == ("full", 5)
    assert first.bytes_copied == 3 + 8192 + 65536 + 24576 + 16384
    ino = (target / "base/5/16384").stat().st_ino
    second = dataset.restore(snap, target)
    _assert_equal(target, snap.data)
    assert (second.mode, second.files_copied, second.bytes_copied) == ("delta", 0, 0)
    assert (target / "base/5/16384").stat().st_ino == ino  # kept, not copied again


def _run_that_changes_things(target: Path) -> None:
    """What a run may do: write in place (same size), append, add and delete files and
    directories, change a mode, put a directory where a file was and the reverse."""
    with open(target / "base/5/16384", "r+b") as f:
        f.seek(8192)
        f.write(os.urandom(8192))
    with open(target / "global/1262", "ab") as f:
        f.write(b"x" * 8192)
    (target / "pg_wal/000000010000000000000002").write_bytes(os.urandom(16384))
    (target / "pg_wal/000000010000000000000001").unlink()
    (target / "base/16390").mkdir()
    (target / "base/16390/1259").write_bytes(b"new")
    (target / "pg_stat_tmp").rmdir()
    os.chmod(target / "PG_VERSION", 0o666)
    (target / "base/5/16384_fsm").unlink()
    (target / "base/5/16384_fsm").mkdir()
    (target / "pg_logical/snapshots").rmdir()
    (target / "pg_logical/snapshots").write_bytes(b"a file now")


def test_a_run_that_modifies_adds_and_deletes_is_undone(snap: Snapshot, tmp_path: Path) -> None:
    target = tmp_path / "target"
    dataset.restore(snap, target)
    _run_that_changes_things(target)
    assert dataset.tree_digest(target) != dataset.tree_digest(snap.data)
    restored = dataset.restore(snap, target)
    _assert_equal(target, snap.data)
    assert restored.mode == "delta"
    # the modified, appended, deleted and retyped files, the re-moded one
    assert restored.files_copied == 5
    assert restored.bytes_copied == 65536 + 8192 + 16384 + 24576 + 3
    _run_that_changes_things(target)  # and again: the memory is of the latest restore
    assert dataset.restore(snap, target).files_copied == 5
    _assert_equal(target, snap.data)


def test_a_write_hidden_behind_the_old_size_and_mtime_is_found(
    snap: Snapshot, tmp_path: Path
) -> None:
    """Same size, mtime set back to the snapshot's: the ctime (and so the memory) says
    the file was touched."""
    target = tmp_path / "target"
    dataset.restore(snap, target)
    path = target / "base/5/16384"
    before = path.stat()
    with open(path, "r+b") as f:
        f.write(b"\xff" * 16)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    restored = dataset.restore(snap, target)
    assert (restored.mode, restored.files_copied) == ("delta", 1)
    _assert_equal(target, snap.data)


def test_a_file_replaced_by_a_copy_with_the_same_attributes_is_copied_again(
    snap: Snapshot, tmp_path: Path
) -> None:
    """Another inode under the name (same size, mode and mtime) is not the file the
    restore made: copied again."""
    target = tmp_path / "target"
    dataset.restore(snap, target)
    path = target / "global/1262"
    st = path.stat()
    os.rename(path, target / "old")
    path.write_bytes(os.urandom(st.st_size))
    os.chmod(path, stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    restored = dataset.restore(snap, target)
    assert restored.files_copied == 1
    _assert_equal(target, snap.data)


def test_a_changed_file_gets_only_its_differing_blocks_written_in_place(
    snap: Snapshot, tmp_path: Path
) -> None:
    """On ext4 (tmp_path's file system) a changed file is patched: one 8 kB block
    written, the file's inode (and blocks) kept; a file the run shortened gets its
    missing bytes back."""
    target = tmp_path / "target"
    assert restore_delta.rewrites_in_place(tmp_path)  # ext4 here
    dataset.restore(snap, target)
    path = target / "base/5/16384"
    ino = path.stat().st_ino
    with open(path, "r+b") as f:
        f.seek(3 * 8192 + 100)
        f.write(b"\xff\x00" * 10)
    os.truncate(target / "global/1262", 1000)
    restored = dataset.restore(snap, target)
    assert (restored.files_copied, restored.bytes_copied) == (2, 65536 + 8192)
    assert restored.bytes_written == 8192 + 8192  # 1262's one block, from byte 0
    assert path.stat().st_ino == ino
    _assert_equal(target, snap.data)


def test_where_blocks_move_on_rewrite_a_changed_file_is_copied_afresh(
    snap: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """btrfs (copy-on-write) is not in IN_PLACE_FS: the whole file is copied."""
    monkeypatch.setattr(restore_delta, "rewrites_in_place", lambda _t: False)
    target = tmp_path / "target"
    dataset.restore(snap, target)
    with open(target / "base/5/16384", "r+b") as f:
        f.write(b"\xff" * 10)
    restored = dataset.restore(snap, target)
    assert (restored.files_copied, restored.bytes_written) == (1, 65536)
    _assert_equal(target, snap.data)


def test_another_snapshot_or_a_forgotten_target_is_copied_whole(tmp_path: Path) -> None:
    a, b = _snapshot(tmp_path / "a"), _snapshot(tmp_path / "b")
    target = tmp_path / "target"
    dataset.restore(a, target)
    assert dataset.restore(b, target).mode == "full"
    _assert_equal(target, b.data)
    dataset.forget_restore(target)
    assert dataset.restore(b, target).mode == "full"
    assert dataset.restore(b, target).mode == "delta"
    _assert_equal(target, b.data)


def test_a_restore_that_fails_half_way_leaves_no_memory(
    snap: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "target"
    dataset.restore(snap, target)
    (target / "base/5/16384").write_bytes(b"changed")

    def fail(*_a: object, **_k: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(restore_delta, "apply", fail)
    with pytest.raises(OSError):
        dataset.restore(snap, target)
    monkeypatch.undo()
    assert dataset.restore(snap, target).mode == "full"
    _assert_equal(target, snap.data)


def test_a_separate_wal_directory(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path / "snap", wal=True)
    data, wal = tmp_path / "data", tmp_path / "wal"
    dataset.restore(snap, data, wal)
    (wal / "000000010000000000000002").write_bytes(b"segment")
    restored = dataset.restore(snap, data, wal)
    assert restored.mode == "delta"
    assert restored.files_copied == 1  # the pg_wal symlink, pointed at `wal` again
    assert os.readlink(data / "pg_wal") == str(wal)
    assert dataset.tree_digest(wal) == dataset.tree_digest(snap.root / "wal")
    assert sorted(os.listdir(wal)) == ["000000010000000000000001"]


def test_copies_never_share_blocks_with_the_snapshot() -> None:
    """cp -a clones by default where the file system can (coreutils 9): never here."""
    assert restore_delta.CP == ("cp", "-a", "--reflink=never")

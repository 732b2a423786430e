"""Deletion guard (issue 23, item 4): blocklab deletes only a directory it made, recorded
in its state with the directory's device and inode, and never one it did not make. A
storage.path pointing at a directory that holds a user's file keeps the file through
provisioning, release and `blocklab cleanup`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from blocklab.cli import main
from blocklab.errors import StorageError, UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.storage import made_dirs, volumes

PACKAGE = Path(__file__).resolve().parents[2] / "blocklab"


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """A private BLOCKLAB_HOME (its own state file, for `blocklab cleanup`), and a fixed
    device name: these tests are about directories, not device counters."""
    monkeypatch.setenv("BLOCKLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(volumes, "device_for_path", lambda _path: "vdz")
    return Paths.from_env(results=tmp_path / "home" / "results")


@pytest.fixture()
def user_dir(tmp_path: Path) -> Path:
    """The directory storage.path names: the user's, holding the user's file."""
    d = tmp_path / "users-dir"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    return d


def _intact(user_dir: Path) -> bool:
    return (user_dir / "precious.txt").read_text() == "keep me"


def _provision(paths: Paths, path: Path, name: str = "exp") -> volumes.Provisioned:
    req = StorageRequest(kind="dir", path=str(path))
    return volumes.provision(
        req, name=name, paths=paths, state=State(paths.state_file), min_size_bytes=0
    )


def _cleanup(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["cleanup", "--force"])  # --force: the entries' owner is this process
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def _replace(directory: Path) -> Path:
    """Put another directory (with a user's file) at `directory`'s path: made before the
    original is moved away, so its inode is certainly another one."""
    other = directory.with_name("replacement")
    other.mkdir()
    (other / "theirs.txt").write_text("not blocklab's")
    directory.rename(directory.with_name("moved-away"))
    other.rename(directory)
    return directory / "theirs.txt"


def test_the_users_file_survives_provisioning_release_and_cleanup(
    home: Paths, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prov = _provision(home, user_dir)
    assert prov.data_dir == user_dir / "exp-data" and prov.data_dir.is_dir()
    (prov.data_dir / "PG_VERSION").write_text("18")
    prov.release()
    assert not prov.data_dir.exists() and _intact(user_dir)
    assert sorted(p.name for p in user_dir.iterdir()) == ["precious.txt"]
    # a killed blocklab: the directory is left, `blocklab cleanup` removes it (only it)
    left = _provision(home, user_dir)
    (left.data_dir / "base").mkdir()
    code, out = _cleanup(capsys)
    assert code == 0 and f"released directory {left.data_dir}" in out, out
    assert not left.data_dir.exists() and _intact(user_dir)
    assert State(home.state_file).entries() == []


def test_a_made_directory_is_recorded_with_its_inode_and_removed_at_release(
    home: Paths, user_dir: Path
) -> None:
    prov = _provision(home, user_dir)
    st = os.lstat(prov.data_dir)
    [entry] = State(home.state_file).entries()
    assert (entry.kind, entry.ident) == ("tempdir", str(prov.data_dir))
    assert entry.info == {
        "purpose": "storage dir",
        "made": True,
        "dev": st.st_dev,
        "ino": st.st_ino,
    }
    prov.release()
    prov.release()  # idempotent
    assert not prov.data_dir.exists() and State(home.state_file).entries() == []


@pytest.mark.parametrize("content", ["empty", "with a file"])
def test_an_existing_directory_that_is_not_blocklabs_is_refused_and_kept(
    home: Paths, user_dir: Path, content: str
) -> None:
    theirs = user_dir / "exp-data"
    theirs.mkdir()
    if content == "with a file":
        (theirs / "theirs.txt").write_text("not blocklab's")
    with pytest.raises(UserError) as info:
        _provision(home, user_dir)
    assert str(info.value).startswith(
        f"storage.path: {theirs} already exists and blocklab did not make it"
    )
    assert "move" in str(info.value) and "another storage.path" in str(info.value)
    assert theirs.is_dir() and _intact(user_dir)
    assert [p.name for p in theirs.iterdir()] == (["theirs.txt"] if content != "empty" else [])
    assert State(home.state_file).entries() == []


def test_an_existing_wal_directory_is_refused_naming_storage_wal_path_and_the_data_dir_undone(
    home: Paths, user_dir: Path
) -> None:
    (user_dir / "exp-wal").mkdir()
    wal = StorageRequest(kind="dir", path=str(user_dir))
    req = StorageRequest(kind="dir", path=str(user_dir), wal=wal)
    with pytest.raises(UserError, match=r"^storage.wal.path: .*exp-wal already exists"):
        volumes.provision(
            req, name="exp", paths=home, state=State(home.state_file), min_size_bytes=0
        )
    assert sorted(p.name for p in user_dir.iterdir()) == ["exp-wal", "precious.txt"]
    assert State(home.state_file).entries() == []


def test_a_replaced_directory_is_left_alone_at_release(home: Paths, user_dir: Path) -> None:
    prov = _provision(home, user_dir)
    theirs = _replace(prov.data_dir)
    with pytest.raises(StorageError, match=r"replaced since blocklab made it .* not deleted"):
        prov.release()
    assert theirs.read_text() == "not blocklab's" and _intact(user_dir)
    assert State(home.state_file).entries() == []


def test_cleanup_leaves_a_replaced_directory_alone_and_says_so(
    home: Paths, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    left = _provision(home, user_dir)
    theirs = _replace(left.data_dir)
    code, out = _cleanup(capsys)
    assert code == 0, out
    assert f"left alone directory {left.data_dir}: replaced since blocklab made it" in out
    assert "not deleted (not blocklab's: its record is dropped)" in out
    assert theirs.read_text() == "not blocklab's" and _intact(user_dir)
    assert State(home.state_file).entries() == []
    assert _cleanup(capsys) == (0, "nothing to release")


def test_cleanup_leaves_a_symlink_put_in_place_alone(
    home: Paths, user_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    left = _provision(home, user_dir)
    os.rmdir(left.data_dir)
    left.data_dir.symlink_to(user_dir)
    code, out = _cleanup(capsys)
    assert code == 0 and "now a symlink, not the directory blocklab made" in out, out
    assert left.data_dir.is_symlink() and _intact(user_dir)


@pytest.mark.parametrize(
    "info", [{"purpose": "storage dir"}, {"purpose": "storage dir", "made": False}]
)
def test_cleanup_never_deletes_a_directory_not_recorded_as_made(
    home: Paths, user_dir: Path, info: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry of an older blocklab (no inode) or one whose making was interrupted."""
    State(home.state_file).add("tempdir", str(user_dir), **info)
    code, out = _cleanup(capsys)
    assert code == 0 and f"left alone directory {user_dir}: not recorded as made" in out, out
    assert _intact(user_dir) and State(home.state_file).entries() == []


def test_a_directory_made_by_another_process_between_check_and_mkdir_is_refused(
    home: Paths, user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkdir = os.mkdir

    def racing_mkdir(path: Path, mode: int = 0o777) -> None:
        real_mkdir(path, mode)  # someone else's, just before blocklab's own mkdir
        (Path(path) / "theirs.txt").write_text("not blocklab's")
        real_mkdir(path, mode)

    monkeypatch.setattr(made_dirs.os, "mkdir", racing_mkdir)
    with pytest.raises(UserError, match="did not make it"):
        made_dirs.make_dir(user_dir / "d", State(home.state_file), key="storage.path", purpose="x")
    assert (user_dir / "d" / "theirs.txt").exists() and State(home.state_file).entries() == []


def _then_interrupted(real: Callable[..., Any]) -> Callable[..., NoReturn]:
    """`real`, then a KeyboardInterrupt: a Ctrl-C landing just after its work."""

    def step(*args: Any, **kwargs: Any) -> NoReturn:
        real(*args, **kwargs)
        raise KeyboardInterrupt

    return step


@pytest.mark.parametrize("step", ["add", "mkdir", "chmod", "update"])
def test_an_interruption_while_a_directory_is_made_leaves_no_entry_and_no_directory(
    home: Paths, user_dir: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A Ctrl-C at any step of make_dir (after the step's own work: the entry added, the
    directory made, its mode set, the entry updated) leaves neither the entry nor the
    directory. Before, one after the entry's adding left it, made=False, behind."""
    state = State(home.state_file)
    target = state if step in ("add", "update") else made_dirs.os
    monkeypatch.setattr(target, step, _then_interrupted(getattr(target, step)))
    with pytest.raises(KeyboardInterrupt):
        made_dirs.make_dir(user_dir / "d", state, key="storage.path", purpose="x")
    monkeypatch.undo()
    assert State(home.state_file).entries() == []
    assert not (user_dir / "d").exists() and _intact(user_dir)


def test_an_interruption_as_make_dir_returns_leaves_no_storage_dir_behind(
    home: Paths, user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C just as make_dir returned, before the volume kept what it made: the
    provisioning is undone by the entry make_dir recorded, so neither the storage
    directory nor its entry is left for `blocklab cleanup`. Before, both were."""
    monkeypatch.setattr(made_dirs, "make_dir", _then_interrupted(made_dirs.make_dir))
    with pytest.raises(KeyboardInterrupt):
        _provision(home, user_dir)
    monkeypatch.undo()
    assert State(home.state_file).entries() == []
    assert sorted(p.name for p in user_dir.iterdir()) == ["precious.txt"] and _intact(user_dir)


def test_a_leftover_in_blocklabs_own_work_dir_is_cleared(home: Paths) -> None:
    leftover = home.work / "dirs" / "exp-data"
    leftover.mkdir(parents=True)
    (leftover / "old").write_text("x")
    req = StorageRequest(kind="dir")
    prov = volumes.provision(
        req, name="exp", paths=home, state=State(home.state_file), min_size_bytes=0
    )
    assert prov.data_dir == leftover and list(leftover.iterdir()) == []
    prov.release()
    assert not leftover.exists() and (home.work / "dirs").is_dir()


def test_no_removal_is_guarded_by_the_paths_own_parent() -> None:
    """safe_remove_tree(p, [p.parent]) guards nothing: every root must be blocklab's."""
    calls = []
    for module in PACKAGE.rglob("*.py"):
        text = module.read_text()
        calls += re.findall(r"safe_remove_tree\([^\n]*\.parent\]", text)
    assert calls == []

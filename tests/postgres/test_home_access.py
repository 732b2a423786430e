"""The unprivileged server user must enter blocklab's home and cache: a home of ours that
shuts it out (`mktemp -d` makes 0700) is opened for entry; a directory above it that is
not ours is exit 2 before anything starts (it once failed the build's check 221 s in)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import tiny_experiment_toml

from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.paths import Paths, open_to_server, untraversable
from blocklab.postgres.cluster import server_user
from blocklab.postgres.installation import Installation
from blocklab.postgres.throwaway import fresh_cluster_answers

OTHER_UID = 65534  # nobody: neither root nor the server user


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture()
def base() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path is 0700), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="home-access-", dir="/var/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        for p in (d, *d.rglob("*")):
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
        shutil.rmtree(d)


def test_untraversable_reads_owner_group_and_other_bits(base: Path) -> None:
    d = base / "a" / "b"
    d.mkdir(parents=True)
    assert untraversable(d, OTHER_UID, OTHER_UID) is None
    os.chmod(base / "a", 0o700)  # root's, closed to others
    assert untraversable(d, OTHER_UID, OTHER_UID) == base / "a"
    assert untraversable(d, 0, 0) is None  # root enters anything
    os.chown(base / "a", OTHER_UID, 0)
    assert untraversable(d, OTHER_UID, OTHER_UID) is None  # its owner, u+x
    os.chmod(base / "a", 0o610)
    assert untraversable(d, OTHER_UID, OTHER_UID) == base / "a"  # owner without u+x
    os.chown(base / "a", 0, OTHER_UID)
    assert untraversable(d, 12345, OTHER_UID) is None  # its group, g+x
    assert untraversable(base / "missing" / "x", OTHER_UID, OTHER_UID) is None


def test_a_mktemp_home_is_opened_for_entry_only(base: Path) -> None:
    home = Path(tempfile.mkdtemp(dir=base))
    assert _mode(home) == 0o700
    paths = Paths(home=home, cache=home / "cache", results=home / "results")
    changed = open_to_server(paths, "someone", OTHER_UID, OTHER_UID)
    assert _mode(home) == 0o701  # o+x, never o+r
    assert changed == [f"BLOCKLAB_HOME: {home} made traversable by 'someone' (chmod o+x)"]
    assert _mode(home / "cache") == 0o755
    assert untraversable(home / "cache", OTHER_UID, OTHER_UID) is None
    assert open_to_server(paths, "someone", OTHER_UID, OTHER_UID) == []  # nothing left to do


def test_a_shut_directory_that_is_not_ours_is_refused_and_left_alone(base: Path) -> None:
    shut = base / "theirs"
    (shut / "home").mkdir(parents=True)
    os.chown(shut, OTHER_UID, OTHER_UID)
    os.chmod(shut, 0o700)
    paths = Paths(home=shut / "home", cache=shut / "home" / "cache", results=base / "r")
    user = server_user()
    with pytest.raises(UserError, match=r"BLOCKLAB_HOME: .* cannot enter .*theirs \(mode 0700"):
        open_to_server(paths, user.name, user.uid, user.gid)
    assert _mode(shut) == 0o700 and shut.stat().st_uid == OTHER_UID
    # the cache elsewhere names its own variable
    closed_cache = base / "cache-parent"
    (closed_cache / "cache").mkdir(parents=True)
    os.chown(closed_cache, OTHER_UID, OTHER_UID)
    os.chmod(closed_cache, 0o700)
    paths = Paths(home=base / "h", cache=closed_cache / "cache", results=base / "r")
    with pytest.raises(UserError, match="BLOCKLAB_CACHE"):
        open_to_server(paths, user.name, user.uid, user.gid)


def test_run_refuses_a_home_the_server_user_cannot_enter_before_anything_starts(
    base: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shut = base / "theirs"
    shut.mkdir()
    os.chown(shut, OTHER_UID, OTHER_UID)
    os.chmod(shut, 0o700)
    monkeypatch.setenv("BLOCKLAB_HOME", str(shut / "home"))
    monkeypatch.setenv("BLOCKLAB_CACHE", str(base / "cache"))
    exp = base / "e.toml"
    exp.write_text(tiny_experiment_toml("home-access"))
    results = base / "results"
    assert main(["run", str(exp), "--results", str(results)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "BLOCKLAB_HOME" in err and "cannot enter" in err and "chmod o+x" in err, err
    assert not results.exists() and not (base / "cache" / "builds").exists()


def test_the_build_check_runs_initdb_in_a_mktemp_home(base: Path) -> None:
    """The real thing: `BLOCKLAB_HOME=$(mktemp -d)`, initdb and a server as the server user."""
    home = Path(tempfile.mkdtemp(dir=base))
    paths = Paths(home=home, cache=home / "cache", results=home / "results")
    control, answers = fresh_cluster_answers(
        Installation.system(15), paths, ["SELECT current_setting('block_size')"]
    )
    assert answers == ["8192"] and control["Database block size"] == "8192"
    assert _mode(home) == 0o701
    assert not list((home / "work").glob("verify-*"))  # the throwaway cluster is gone

"""Paths that point at system directories, symlinks that leave blocklab's directories and
`..` tricks: refused with exit 2 as input, and never deleted (resolved paths checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import tiny_experiment_toml

from blocklab.cli import main
from blocklab.errors import StorageError, UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths, check_own_dir, safe_remove_tree
from blocklab.state import State
from blocklab.storage import volumes

SYSTEM = ["/", "/etc", "/usr", "/var/lib", "/root", "/var", "/home", "/tmp", "/usr/local"]


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A directory blocklab does not own, with a file that must survive every test."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    return d


def _intact(outside: Path) -> bool:
    return (outside / "precious.txt").read_text() == "keep me"


def test_safe_remove_tree_removes_what_is_inside_its_root(tmp_path: Path) -> None:
    target = tmp_path / "root" / "a" / "b"
    target.mkdir(parents=True)
    (target / "f").write_text("x")
    safe_remove_tree(tmp_path / "root" / "a", [tmp_path / "root"])
    assert not (tmp_path / "root" / "a").exists() and (tmp_path / "root").is_dir()
    safe_remove_tree(tmp_path / "root" / "missing", [tmp_path / "root"])  # nothing to do


def test_safe_remove_tree_refuses_dotdot_symlinks_and_the_root_itself(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "link").symlink_to(outside)
    (root / "linkdir").symlink_to(outside.parent)
    for path in (
        root / ".." / "outside",  # `..` out of the root
        root / "sub" / ".." / ".." / "outside",
        root / "link",  # a symlink itself, pointing out
        root / "linkdir" / "outside",  # a real directory reached through a symlink
        root,  # the root is not inside itself
    ):
        with pytest.raises(StorageError, match="refusing to delete"):
            safe_remove_tree(path, [root])
        assert _intact(outside) and root.is_dir(), path


@pytest.mark.parametrize("system", SYSTEM)
def test_safe_remove_tree_never_removes_a_system_directory(system: str) -> None:
    with pytest.raises(StorageError, match="refusing to delete"):
        safe_remove_tree(Path(system), [Path("/")])
    assert Path(system).is_dir()


@pytest.mark.parametrize("system", SYSTEM)
def test_check_own_dir_refuses_system_directories(system: str) -> None:
    with pytest.raises(UserError, match="--results: .* is a system directory"):
        check_own_dir(Path(system), "--results")


def test_check_own_dir_refuses_dotdot_and_symlinks_to_system_dirs(tmp_path: Path) -> None:
    (tmp_path / "to-etc").symlink_to("/etc")
    with pytest.raises(UserError, match=r"contains '\.\.'"):
        check_own_dir(tmp_path / ".." / "x", "--results")
    with pytest.raises(UserError, match="resolves to /etc"):
        check_own_dir(tmp_path / "to-etc", "--results")
    assert check_own_dir(tmp_path / "results", "--results") == (tmp_path / "results").resolve()


@pytest.mark.parametrize("command", ["summary", "report", "export"])
@pytest.mark.parametrize("results", ["/etc", "/usr", "/var/lib", "/root", "/", "LINK", "DOTDOT"])
def test_cli_refuses_results_in_system_directories(
    command: str, results: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "link").symlink_to("/usr")
    given = {"LINK": str(tmp_path / "link"), "DOTDOT": f"{tmp_path}" + "/.." * 12 + "/etc"}.get(
        results, results
    )
    argv = [command, "--results", given]
    argv += {"report": ["--out", str(tmp_path / "site")], "export": ["--csv", str(tmp_path)]}.get(
        command, []
    )
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--results" in err, err


@pytest.mark.parametrize("path", ["/etc", "/usr", "/var/lib", "/root", "/", "LINK", "DOTDOT"])
def test_plan_refuses_dir_storage_in_system_directories(
    path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "link").symlink_to("/var/lib")
    given = {"LINK": str(tmp_path / "link"), "DOTDOT": f"{tmp_path}" + "/.." * 12 + "/usr"}.get(
        path, path
    )
    exp = tmp_path / "e.toml"
    exp.write_text(
        tiny_experiment_toml("hostile-path", f'storage = {{ kind = "dir", path = "{given}" }}')
    )
    assert main(["plan", str(exp)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "storage.path" in err, err


def test_dir_storage_never_clears_a_symlinked_directory_that_leads_out(
    paths: Paths, outside: Path
) -> None:
    base = paths.work / "hostile-dirs"
    base.mkdir(parents=True, exist_ok=True)
    (base / "exp-data").symlink_to(outside)  # where blocklab would put its directory
    state = State(paths.home / "state-hostile-dirs.json")
    req = StorageRequest(kind="dir", path=str(base))
    try:
        # not blocklab's: refused as a directory it did not make (was a StorageError)
        with pytest.raises(UserError, match=r"storage.path: .* did not make it"):
            volumes._dir_volume(req, "data", "exp", paths, state)
        assert _intact(outside) and (base / "exp-data").is_symlink() and state.entries() == []
    finally:
        (base / "exp-data").unlink()

"""The trust boundary (issue 31, docs/RELIABILITY.md): one hostile experiment file per
class of what could run code or touch the machine. Each is refused by `blocklab plan`
with exit 2 naming the key (and the flag that allows it); the owner's `--allow CLASS`
lets the policy accept it; the file's own line `# allow: never` marks what no flag
allows (include*, reserved settings, a name with a line break). Canaries: the commands
these files would run are never run, by `plan` or by `run`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.commands.options import ALLOW_CLASSES
from blocklab.errors import UserError
from blocklab.experiment_file import trust

HOSTILE = Path(__file__).parents[1] / "hostile_specs"
FILES = sorted(HOSTILE.glob("*.toml"))
CANARIES = [Path(f"/tmp/blocklab-hostile-canary-{n}") for n in ("cc", "archive", "tree")]


def _header(path: Path) -> tuple[str, str]:
    first, second = path.read_text().splitlines()[:2]
    assert first.startswith("# expect: ") and second.startswith("# allow: "), path.name
    return first.removeprefix("# expect: "), second.removeprefix("# allow: ")


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_every_class_has_hostile_files_and_the_help_names_every_class() -> None:
    classes = {c for p in FILES for c in _header(p)[1].split(",")}
    assert classes == set(trust.CLASSES) | {"never"}
    assert ALLOW_CLASSES == tuple(trust.CLASSES)  # --help lists them without importing trust
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_plan_refuses_with_exit_2_naming_the_key(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect, allow = _header(path)
    assert main(["plan", str(path)]) == 2
    err = _err(capsys)
    assert expect in err
    if allow != "never":  # the refusal says which flag would allow it
        assert f"--allow {allow.split(',')[0]}" in err


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if _header(p)[1] != "never"],
    ids=[p.stem for p in FILES if _header(p)[1] != "never"],
)
def test_the_owners_flag_allows_it(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Granted the file's classes, the policy accepts it; granted all but one, it is
    refused again; `plan --allow` gets past the boundary (a device that is not there,
    a tarball that is empty may still stop it at the machine checks: never at trust)."""
    _, allow = _header(path)
    classes = trust.parse_allow([allow])
    exp = spec.load(path)
    assert trust.refused(exp, classes, path.parent) == []
    for missing in classes:
        assert trust.refused(exp, classes - {missing}, path.parent) != []
    code = main(["plan", str(path), "--allow", allow])
    err = _err(capsys)
    assert "refused unless blocklab run is started with --allow" not in err
    assert code in (0, 2)


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if _header(p)[1] == "never"],
    ids=[p.stem for p in FILES if _header(p)[1] == "never"],
)
def test_no_flag_allows_what_no_class_covers(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect, _ = _header(path)
    with pytest.raises(UserError, match="matrix.settings"):
        spec.load(path)
    assert main(["plan", str(path), "--allow", "all"]) == 2
    assert expect in _err(capsys)


def test_an_unknown_class_is_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(HOSTILE / "patch.toml"), "--allow", "builds,everything"]) == 2
    assert "--allow: 'everything' is not a class; allowed: commands, files" in _err(capsys)


def test_all_grants_every_class() -> None:
    assert trust.parse_allow(["all"]) == frozenset(trust.CLASSES)
    assert trust.parse_allow(["builds, paths", "devices"]) == {"builds", "paths", "devices"}


@pytest.mark.parametrize("name", ["configure_cc", "settings_archive_command_asked", "source_tree"])
def test_canary_run_refuses_before_anything_runs(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` of a file whose build or server would run a command: refused before any
    build (no source fetched, no build directory) and the command never ran."""
    for c in CANARIES:
        c.unlink(missing_ok=True)
    home = tmp_path / "home"
    results = tmp_path / "results"
    monkeypatch.setenv("BLOCKLAB_HOME", str(home))
    monkeypatch.delenv("BLOCKLAB_CACHE", raising=False)
    assert main(["run", str(HOSTILE / f"{name}.toml"), "--results", str(results)]) == 2
    assert "refused unless blocklab run is started with --allow" in _err(capsys)
    assert not any(c.exists() for c in CANARIES)
    assert not results.exists() and not (home / "cache").exists()


def test_the_agent_judges_every_path_as_its_own_and_runs_the_machine_checks(
    tmp_path: Path,
) -> None:
    """A queued file's relative paths resolve against the submitter's directory, which
    means nothing on the agent: the agent refuses them unless its owner allows paths, and
    it runs the machine checks that `plan` and `run` do. (The fleet's real-queue tests
    need a PostgreSQL server and builds; this calls the agent's own admission step.)"""
    from blocklab.fleet.agent import Agent
    from blocklab.fleet.registry import Submission
    from blocklab.paths import Paths

    def submission(path: Path) -> Submission:
        return Submission(path.stem, path.read_text(), str(path), {}, ["h1"], 1, None, None, "")

    paths = Paths(home=tmp_path, cache=tmp_path / "cache", results=tmp_path / "results")
    agent = Agent("h1", None, "", paths, lambda _m: None)  # type: ignore[arg-type]
    shell = submission(HOSTILE / "script_shell.toml")
    with pytest.raises(UserError, match=r"scripts\[0\].*the agent of host h1 .*--allow scripts"):
        agent.admit(shell)
    agent.granted = frozenset({"scripts"})
    with pytest.raises(UserError, match=r"a path of this host.*--allow paths"):
        agent.admit(shell)  # a path of the submitter's is one of the agent's
    agent.granted = trust.parse_allow(["all"])
    device = submission(HOSTILE / "storage_device.toml")
    with pytest.raises(UserError, match="/dev/sdb"):  # the machine checks: no such device
        agent.admit(device)
    agent.granted = frozenset()
    with pytest.raises(UserError, match="--allow devices"):
        agent.admit(device)  # erase_confirmed in the queued file confirms nothing


def test_a_copy_in_its_own_directory_needs_no_paths(tmp_path: Path) -> None:
    """Paths inside the experiment's directory are its own: only the class of what they
    are (scripts) is asked for; a copy of the file elsewhere makes them foreign."""
    shutil.copytree(HOSTILE, tmp_path / "x")
    exp = spec.load(tmp_path / "x" / "script_shell.toml")
    assert {r.cls for r in trust.requests(exp, tmp_path / "x")} == {"scripts"}
    assert {r.cls for r in trust.requests(exp, tmp_path / "elsewhere")} == {"scripts", "paths"}
    assert {r.cls for r in trust.requests(exp, None)} == {"scripts", "paths"}


def test_safe_configure_args_and_mkfs_options_ask_nothing(tmp_path: Path) -> None:
    f = tmp_path / "ok.toml"
    f.write_text(
        '[experiment]\nname = "ok"\n[matrix]\nblock_size = 8\n'
        'postgres = { version = "18", configure_args = ["--with-lz4", "--without-icu", '
        '"--enable-debug", "--with-segsize-blocks=6"] }\n'
        'storage = { kind = "ext4", mkfs_options = ["-O", "^has_journal", "-E", '
        '"lazy_itable_init=0"] }\n[matrix.settings]\nwork_mem = "64MB"\n'
        'default_text_search_config = "pg_catalog.english"\nlog_directory = ""\n'
        'search_path = "public"\n'
    )
    assert trust.requests(spec.load(f), tmp_path) == []

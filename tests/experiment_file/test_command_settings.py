"""Settings that run commands or load libraries (issue 23, item 3): refused unless the
experiment sets [experiment] allow_commands = true AND `plan`/`run`/`agent` is started
with --allow commands (or its older name --allow-command-settings, issue 31); the
refusal names the key and why (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.experiment_file import trust
from blocklab.experiment_file.settings import COMMAND_SETTINGS, command_settings, runs_commands

FILE = """
[experiment]
name = "cmds"
{allow}
[matrix]
block_size = 8
[matrix.settings]
{name} = {value}
"""


def _write(tmp_path: Path, name: str, value: str, allow: str = "") -> Path:
    path = tmp_path / "x.toml"
    path.write_text(FILE.format(allow=allow, name=name, value=value))
    return path


def test_the_list_holds_what_postgresql_documents() -> None:
    for name in (
        "archive_command",
        "archive_library",
        "restore_command",
        "archive_cleanup_command",
        "recovery_end_command",
        "ssl_passphrase_command",
        "shared_preload_libraries",
        "local_preload_libraries",
        "session_preload_libraries",
        "dynamic_library_path",
    ):
        assert name in COMMAND_SETTINGS
    assert "ssl_passphrase_command_supports_reload" not in COMMAND_SETTINGS


def test_what_counts_as_running_commands() -> None:
    assert runs_commands("archive_command", "cp %p /x/%f")
    assert not runs_commands("archive_command", "''")  # empty: runs nothing
    assert not runs_commands("archive_command", "")
    assert not runs_commands("work_mem", "64MB")
    settings = [("shared_preload_libraries", "a"), ("work_mem", "1MB"), ("jit_provider", "x")]
    assert command_settings(settings + settings) == ["jit_provider", "shared_preload_libraries"]


@pytest.mark.parametrize("name", COMMAND_SETTINGS)
def test_refused_without_the_files_allowance(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError) as info:
        spec.load(_write(tmp_path, name, '"x"'))
    assert f"matrix.settings.{name}: runs a shell command or loads a shared library" in str(
        info.value
    )
    assert "experiment.allow_commands = true" in str(info.value)


def test_allowed_by_the_file_still_needs_the_flag(tmp_path: Path) -> None:
    exp = spec.load(_write(tmp_path, "archive_command", '"true"', "allow_commands = true"))
    assert exp.allow_commands and exp.command_settings() == ["archive_command"]
    assert exp.to_json()["allow_commands"] is True
    with pytest.raises(UserError) as info:
        trust.check(exp, frozenset(), tmp_path, who="blocklab run")
    assert "--allow commands" in str(info.value)
    assert "matrix.settings.archive_command" in str(info.value)
    trust.check(exp, frozenset({"commands"}), tmp_path, who="blocklab run")  # both: allowed


def test_ordinary_files_keep_their_json(tmp_path: Path) -> None:
    exp = spec.load(_write(tmp_path, "work_mem", '"64MB"'))
    assert "allow_commands" not in exp.to_json() and exp.command_settings() == []
    trust.check(exp, frozenset(), tmp_path, who="blocklab run")


def test_run_without_the_flag_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "archive_command", '"true"', "allow_commands = true")
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--allow commands" in err and "archive_command" in err
    assert not results.exists()  # nothing was started


@pytest.mark.parametrize("flag", [["--allow", "commands"], ["--allow-command-settings"]])
def test_plan_says_what_the_file_and_the_owner_allow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    """Changed in issue 31: `plan` refuses what the owner has not granted (exit 2), as
    `run` does; granted, it shows the settings."""
    path = _write(tmp_path, "archive_command", '"true"', "allow_commands = true")
    assert main(["plan", str(path)]) == 2
    assert "--allow commands" in " ".join(capsys.readouterr().err.split())
    assert main(["plan", str(path), *flag]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "run commands or load libraries: archive_command" in out

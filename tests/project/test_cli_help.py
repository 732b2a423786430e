"""Every command's --help reads as written: click does not %-format help texts, so a
doubled "%%" would be printed as is."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from blocklab.cli import cli


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name)


def test_no_help_text_prints_a_doubled_percent_sign() -> None:
    paths = list(_command_paths(cli))
    assert ("run",) in paths and ("selftest", "overhead") in paths  # the walk reaches subcommands
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="blocklab")
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: blocklab" in result.output, path
        assert "%%" not in result.output, (path, result.output)


def test_run_help_names_the_ci_with_one_percent_sign() -> None:
    result = CliRunner().invoke(cli, ["run", "--help"], prog_name="blocklab", terminal_width=200)
    assert "95 % CI half-width" in result.output, result.output

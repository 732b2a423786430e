"""Every command's --help reads as written: click does not %-format help texts, so a
doubled "%%" would be printed as is."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from blocklab.cli import cli


def _subcommands(group: click.Group) -> Iterator[tuple[str, click.Command]]:
    """The group's commands by name, as click finds them (blocklab's top level loads
    each command's module when asked: blocklab.cli.LazyGroup)."""
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield name, command


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, command in _subcommands(group):
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


def _style_faults(path: tuple[str, ...], option: click.Option) -> list[str]:
    """One style for every option's help: a phrase that starts in lower case (or with a
    name written in capitals: PostgreSQL, WAL, IOPS) and ends without a full stop."""
    where = f"blocklab {' '.join(path)} {option.opts[0]}"
    text = (option.help or "").strip()
    if not text:
        return [f"{where}: no help text"]
    faults = []
    first = text.split()[0]
    if first[0].isupper() and first[1:].islower():
        faults.append(f"{where}: starts with a capital ({text[:40]!r})")
    if text.endswith("."):
        faults.append(f"{where}: ends with a full stop ({text[-40:]!r})")
    return faults


def _commands(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in _subcommands(group):
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def test_every_option_help_has_one_style() -> None:
    commands = list(_commands(cli))
    assert len(commands) > 15  # the walk reaches the subcommands of device, fleet, selftest
    faults = [
        fault
        for path, command in commands
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for fault in _style_faults(path, param)
    ]
    assert faults == []


def test_the_style_check_catches_both_other_styles() -> None:
    capital = click.Option(["--x"], help="Seconds per point")
    stop = click.Option(["--y"], help="seconds per point.")
    fine = click.Option(["--z"], help="PostgreSQL major version (default 18)")
    assert len(_style_faults(("c",), capital)) == 1
    assert len(_style_faults(("c",), stop)) == 1
    assert _style_faults(("c",), fine) == []
    assert _style_faults(("c",), click.Option(["--w"])) == ["blocklab c --w: no help text"]

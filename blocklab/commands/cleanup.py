"""CLI commands: cleanup. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import click

from blocklab.errors import StorageError
from blocklab.paths import Paths
from blocklab.state import State


@click.command("cleanup")
@click.option(
    "--force",
    is_flag=True,
    help="also release what a still-running blocklab process recorded",
)
def cleanup_command(force: bool) -> None:
    """Release servers, mounts, loop devices, cgroups and directories that a killed or
    failed blocklab left behind (as recorded in its state file). Exit 0 when nothing of
    blocklab's is left."""
    from blocklab.storage.cleanup import release_report

    state = State(Paths.from_env().state_file)
    report = release_report(state, only_dead_owners=not force)
    for line in report.released:
        click.echo(f"released {line}")
    for line in report.skipped:
        click.echo(f"left alone {line} (use --force to release it)")
    for line in report.left_alone:
        click.echo(f"left alone {line} (not blocklab's: its record is dropped)")
    if not (report.released or report.skipped or report.failed or report.left_alone):
        click.echo("nothing to release")
    if report.failed:
        raise StorageError("could not release:\n  " + "\n  ".join(report.failed))


COMMANDS: list[click.Command] = [cleanup_command]

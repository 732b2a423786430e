"""Options several commands share, defined once."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from blocklab.errors import UserError
from blocklab.store.uri import INSECURE_ENV

RESULTS_HELP = (
    "results directory (SQLite) or postgresql://USER@HOST/DB URI "
    "(default: $BLOCKLAB_RESULTS, else $BLOCKLAB_HOME/results)"
)
INSECURE_HELP = "accept a PostgreSQL results database on a remote host over TCP without TLS"

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _insecure(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:  # read where the URI is checked (blocklab.store.uri)
        os.environ[INSECURE_ENV] = "1"


def results_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--results (a directory or a PostgreSQL URI) and --results-insecure."""
    f = click.option(
        "--results-insecure",
        is_flag=True,
        expose_value=False,
        callback=_insecure,
        help=INSECURE_HELP,
    )(f)
    return click.option("--results", help=RESULTS_HELP)(f)


def choice_option(flag: str, choices: Sequence[str], default: str, help: str) -> Decorator:
    """`flag` limited to `choices`, with its default shown in --help."""
    return click.option(
        flag, type=click.Choice(choices), default=default, show_default=True, help=help
    )


allow_commands_option = click.option(
    "--allow-command-settings",
    is_flag=True,
    help="allow settings that run shell commands or load libraries (archive_command, "
    "shared_preload_libraries, ...) when the experiment sets [experiment] allow_commands = true",
)

OVERRIDE_HELP = " (with FILE: replaces a fixed matrix value; stored as another experiment)"


def experiment_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--duration, --scale, --clients (matrix overrides), --until-ci and --max-rounds:
    what `run` and `fleet submit` take about an experiment besides --rounds."""
    options = [
        click.option("--duration", type=int, help="seconds per run" + OVERRIDE_HELP),
        click.option("--scale", type=int, help="pgbench scale factor" + OVERRIDE_HELP),
        click.option("--clients", type=int, help="pgbench clients" + OVERRIDE_HELP),
        click.option(
            "--until-ci",
            "until_ci",
            type=float,
            help="add rounds until every comparison's 95 % CI half-width is at most PCT",
        ),
        click.option("--max-rounds", type=int, help="with --until-ci: stop after this many rounds"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def check_experiment_numbers(until_ci: float | None, **counts: int | None) -> None:
    """Counts (rounds=..., max_rounds=...) at least 1 and --until-ci a percentage, else a
    UserError naming the flag."""
    for name, value in counts.items():
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')}: must be at least 1 (got {value})")
    if until_ci is not None and not 0 < until_ci < 100:
        raise UserError(f"--until-ci: a percentage between 0 and 100 (got {until_ci:g})")

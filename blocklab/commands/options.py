"""Options several commands share, defined once."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click

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

"""Options several commands share, defined once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

RESULTS_HELP = "results directory (default: $BLOCKLAB_RESULTS, else $BLOCKLAB_HOME/results)"

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

results_option: Decorator = click.option(
    "--results", type=click.Path(path_type=Path), help=RESULTS_HELP
)


def choice_option(flag: str, choices: Sequence[str], default: str, help: str) -> Decorator:
    """`flag` limited to `choices`, with its default shown in --help."""
    return click.option(
        flag, type=click.Choice(choices), default=default, show_default=True, help=help
    )

"""The terminal the CLI prints to: tables keep their columns in logs and pipes."""

from __future__ import annotations

import sys

from rich.console import Console

LOG_WIDTH = 160  # columns when not on a terminal (CI logs, files, pipes)


class _Console(Console):
    """rich's Console, but a closed pipe (`blocklab plan | head`) reaches the CLI's one
    exit place (blocklab.cli.main) as BrokenPipeError instead of rich's silent exit 1."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError("output closed by its reader")


def console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return _Console(stderr=stderr)
    return _Console(stderr=stderr, width=LOG_WIDTH)

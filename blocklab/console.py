"""The terminal the CLI prints to: tables keep their columns in logs and pipes."""

from __future__ import annotations

import sys

from rich.console import Console

LOG_WIDTH = 160  # columns when not on a terminal (CI logs, files, pipes)


def console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=LOG_WIDTH)

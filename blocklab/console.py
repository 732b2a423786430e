"""The terminal the CLI prints to: tables keep their columns in logs and pipes; text that
came from a user (an experiment file, a queued job, a server) is shown as text."""

from __future__ import annotations

import re
import sys

from rich.console import Console
from rich.markup import escape

LOG_WIDTH = 160  # columns when not on a terminal (CI logs, files, pipes)
# C0 and C1 control characters and DEL (ESC starts a terminal escape sequence); tab kept
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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


def control_escaped(value: object, *, keep_newlines: bool = False) -> str:
    """`value` with its control characters written as escapes ("\\x1b", "\\n"): for
    rich Text, which shows markup as it is but passes escape sequences to the terminal,
    and for error messages (`keep_newlines`: a server log's tail keeps its lines)."""
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode(), str(value))


def user_text(value: object) -> str:
    """`value` as text that rich prints as it is in a string with markup: markup escaped
    ("[bold]" stays "[bold]") and control characters written as escapes, so a label, a
    description or a setting's value cannot restyle, move or clear the terminal."""
    return escape(control_escaped(value))

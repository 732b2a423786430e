"""CLI commands: selftest. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []

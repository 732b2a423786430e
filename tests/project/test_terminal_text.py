"""User text on the terminal (issue 31 item 10): an experiment's description, labels and
setting values are printed as text: rich markup shown as written, control characters
(ESC of a terminal escape sequence) as escapes. blocklab.console.user_text is the one
helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.cli import main
from blocklab.console import control_escaped, user_text

HOSTILE_TEXT = """
[experiment]
name = "term"
description = "[bold red]loud[/bold red] \\u001b[2J cleared"
reference = { settings = { application_name = "plain" } }
[matrix]
block_size = 8
[matrix.settings]
application_name = ["plain", "[blink]x[/blink]\\u001b]0;title\\u0007"]
cluster_name = "\\u009b31m"
"""


def test_user_text_escapes_markup_and_control_characters() -> None:
    assert user_text("[bold]x[/bold]") == "\\[bold]x\\[/bold]"
    assert user_text("a\x1b[2Jb\x07\x9b\tc") == "a\\x1b[2Jb\\x07\\x9b\tc"
    assert control_escaped("[bold]\x1b") == "[bold]\\x1b"
    assert user_text("pg_catalog.english, 64MB") == "pg_catalog.english, 64MB"


def test_plan_prints_a_hostile_description_and_labels_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "term.toml"  # cluster_name and application_name: strings, any text
    f.write_text(HOSTILE_TEXT)
    assert main(["plan", str(f)]) == 0
    out = capsys.readouterr().out
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in out
    flat = " ".join(out.split())
    assert "[bold red]loud[/bold red] \\x1b[2J cleared" in flat
    assert "[blink]x[/blink]\\x1b]0;title\\x07" in flat
    assert "cluster_name=\\x9b31m" in flat


def test_an_error_shows_a_hostile_key_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "key.toml"
    f.write_text('[experiment]\nname = "k"\n[matrix.settings]\n"x\\u001b[2J" = "1"\n')
    assert main(["plan", str(f)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "matrix.settings.x\\x1b[2J: not a setting name" in err

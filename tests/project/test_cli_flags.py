"""Issue 35's small CLI inconsistencies: --until-ci takes "2%", --max-rounds alone is
refused, --fs-block-size reads kB like --block-size, and a closed pipe is not a silent
exit 1 (which means "a run failed")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from blocklab.cli import OUTPUT_CLOSED, main
from blocklab.commands.device import FsBlockSize
from blocklab.commands.options import PERCENT

PAGE_SIZE = Path(__file__).parents[2] / "examples" / "page-size.toml"


@pytest.mark.parametrize(("text", "pct"), [("2", 2.0), ("2%", 2.0), ("2.5 %", 2.5), (" 5% ", 5.0)])
def test_until_ci_takes_a_percent_sign(text: str, pct: float) -> None:
    assert PERCENT.convert(text, None, None) == pct


def test_until_ci_refuses_what_is_not_a_percentage() -> None:
    with pytest.raises(click.BadParameter, match="'two' is not a percentage"):
        PERCENT.convert("two", None, None)


def test_plan_with_until_ci_2_percent_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(PAGE_SIZE), "--until-ci", "2%"]) == 0
    assert "until every CI half-width ≤ 2 %" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["plan", "run"])
def test_max_rounds_without_until_ci_exits_2_naming_both(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    code = main([command, str(PAGE_SIZE), "--max-rounds", "9", "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--max-rounds" in err and "--until-ci" in err
    assert not results.exists()


@pytest.mark.parametrize(
    ("text", "size_bytes"),
    [("4", 4096), ("4k", 4096), ("4kB", 4096), ("64", 65536), ("512B", 512), ("4096B", 4096)],
)
def test_fs_block_size_reads_kb_like_block_size(text: str, size_bytes: int) -> None:
    assert FsBlockSize().convert(text, None, None) == size_bytes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4096", "'4096' is read as kB (as --block-size is): for 4096 bytes write 4 or 4096B"),
        ("512", "for 512 bytes write 512B"),
        ("3", "'3' is not a file-system block size; allowed kB: 1, 2, 4, 8, 16, 32, 64"),
        ("128", "not a file-system block size"),
        ("4x", "'4x' is not a block size"),
    ],
)
def test_fs_block_size_refuses_ambiguous_input(text: str, message: str) -> None:
    with pytest.raises(click.BadParameter) as e:
        FsBlockSize().convert(text, None, None)
    assert message in e.value.message


def test_plan_into_a_closed_pipe_exits_141_and_says_so() -> None:
    code = (
        f"import sys; from blocklab.cli import main; sys.exit(main(['plan', {str(PAGE_SIZE)!r}]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes before the first line (`| head -0`): a plan
    # (3 kB) fits a pipe's buffer, so closing after a line would not always break it
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == OUTPUT_CLOSED == 141, err
    assert "output closed by its reader" in err and "Traceback" not in err

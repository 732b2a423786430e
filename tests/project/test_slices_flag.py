"""--slices N: an interleaved experiment (the demo) with N slices per variant per round,
stored as another experiment with the same seed; refused, naming the flag and what it
allows, for an odd or out-of-range count (for another design: test_cycles_flags.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.execution import plan

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_slices_renames_the_demo_keeps_its_seed_and_shortens_each_round() -> None:
    demo, short = spec.demo(), spec.demo(slices=2)
    assert short.name == f"{demo.name}-sl2" and short.seed == demo.seed
    assert (demo.run_design.slices, short.run_design.slices) == (4, 2)
    assert [v.variant_id for v in short.variants()] == [v.variant_id for v in demo.variants()]
    assert plan.describe(short).eta_runs_s < plan.describe(demo).eta_runs_s
    example = spec.load(EXAMPLES / "interleaved-pagesize.toml", {"slices": 6})
    assert example.name == "interleaved-pagesize-sl6" and example.run_design.slices == 6


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (3, "--slices: an even number 2..400 (got 3): the Thue-Morse order balances pairs"),
        (402, "--slices: an even number 2..400 (got 402)"),
    ],
)
def test_an_odd_or_out_of_range_count_names_the_flag(n: int, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")):
        spec.demo(slices=n)


def test_a_count_under_one_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--slices", "0"]) == 2
    assert "--slices: must be at least 1" in capsys.readouterr().err


def test_duration_on_the_interleaved_demo_is_refused_naming_slices() -> None:
    """The demo's window is its slices: --duration would only rename it."""
    with pytest.raises(
        UserError, match="--duration: .* 4 slices of 5 s, not a duration; use --slices N"
    ):
        spec.demo(duration_s=60)

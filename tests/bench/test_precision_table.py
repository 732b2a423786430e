"""bench/precision_table.py: one arm's row of bench_precision's table, on synthetic runs."""

from __future__ import annotations

import math

import pytest
from precision_table import (
    DASH,
    HEADER,
    ArmRuns,
    arm_row,
    arm_runs,
    flagged,
    format_row,
    run_drifted,
)

from blocklab.analysis.carryover import PositionRun
from blocklab.experiment_file.design import AA_CONTROL, ABBA, PAIRED

LEVEL = {"a": 1000.0, "b": 1100.0}  # "a" is the reference
SWITCH_GAIN = 1.05  # a run right after the other variant is 5 % faster


def _noise(r: int, position: int) -> float:
    return 1 + 0.004 * math.sin(7 * r + 3 * position)


def _arm(
    design: str,
    orders: list[list[tuple[str, int]]],
    *,
    drifted: list[bool | None] | None = None,
    whole_cycles: bool = False,
) -> ArmRuns:
    """Rounds 1.. of `orders` (slots (variant, copy) in the order they ran; one order per
    round); a run's value is its variant's level, x SWITCH_GAIN after another variant."""
    by_copy: dict[str, dict[int, dict[int, float]]] = {v: {} for v in LEVEL}
    positions = []
    for r, order in enumerate(orders, start=1):
        for pos, (v, copy) in enumerate(order):
            after_switch = pos > 0 and order[pos - 1][0] != v
            x = LEVEL[v] * (SWITCH_GAIN if after_switch else 1.0) * _noise(r, pos)
            positions.append(PositionRun(r, pos, v, x))
            by_copy[v].setdefault(r, {})[copy] = x
    values = {
        v: {r: [cs[c] for c in sorted(cs)] for r, cs in rs.items()} for v, rs in by_copy.items()
    }
    return ArmRuns(
        name=design,
        design=design,
        reference="a",
        values=values,
        seconds=600.0,
        rounds=len(orders),
        positions=positions,
        drifted=drifted or [],
        whole_cycles=whole_cycles,
    )


ABBA_ROUND = [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
BAAB_ROUND = [("b", 0), ("a", 0), ("a", 1), ("b", 1)]


def test_an_abba_arm_has_a_carry_over_and_no_aa() -> None:
    arm = _arm(ABBA, [ABBA_ROUND, BAAB_ROUND] * 3, drifted=[True, False, None, False])
    row = arm_row(arm)
    assert (row.rounds, row.runs, row.minutes) == (6, 24, 10.0)
    assert row.gain_pct == pytest.approx(10.0, abs=0.5)
    assert row.half_width_pct is not None
    assert row.at_20_min_pct == pytest.approx(row.half_width_pct * math.sqrt(0.5))
    assert row.aa is None  # abba's two reference copies are no A/A
    c = row.carry.comparison
    assert c is not None and c.ratio == pytest.approx(SWITCH_GAIN, rel=0.01)
    assert c.ci95_low is not None and c.ci95_low > 1
    assert row.flagged == (1, 3)
    text = format_row(row)
    assert text.startswith("abba ")
    assert "1/3 (33 %)" in text
    assert f"{c.ratio:.3f} (" in text


def test_a_paired_arm_has_neither_carry_over_nor_aa() -> None:
    rounds = [[("a", 0), ("b", 0)], [("b", 0), ("a", 0)]] * 3
    row = arm_row(_arm(PAIRED, rounds, drifted=[False] * 12))
    assert row.carry.comparison is None  # no variant ever follows itself
    assert row.aa is None
    assert row.flagged == (0, 12)
    cells = format_row(row).split()
    assert cells.count(DASH) == 2  # A/A and carry-over
    assert "0/12" in cells


def test_aa_control_gives_the_aa_ratio_of_the_reference_copies() -> None:
    rounds = [[("a", 0), ("b", 0), ("a", 1)], [("a", 1), ("a", 0), ("b", 0)]] * 3
    row = arm_row(_arm(AA_CONTROL, rounds))
    assert row.aa is not None and row.aa.ratio is not None
    assert row.aa.n_pairs == 6
    assert f"{row.aa.ratio:.3f} (" in format_row(row)
    assert row.flagged == (0, 0)
    assert format_row(row).split()[-1] == "n/a"  # nothing judged


def test_whole_cycles_are_not_judged_for_drift() -> None:
    arm = _arm(ABBA, [ABBA_ROUND, BAAB_ROUND], drifted=[True, True], whole_cycles=True)
    row = arm_row(arm)
    assert row.flagged is None
    assert format_row(row).split()[-1] == DASH


def test_a_single_round_gives_no_interval() -> None:
    row = arm_row(_arm(ABBA, [ABBA_ROUND]))
    assert row.half_width_pct is None and row.at_20_min_pct is None
    assert row.model_20_min_pct is None
    assert "n/a" in format_row(row)


def test_run_drifted_on_per_second_series() -> None:
    storm = [(float(t), 1500.0 * math.exp(-t / 6) + 40) for t in range(20)]
    flat = [(float(t), 3000.0 * _noise(t, 1)) for t in range(20)]
    assert run_drifted({"wal_fpi_per_s": storm, "tps": flat}) is True
    assert run_drifted({"tps": flat}) is False
    assert run_drifted({"tps": flat[:3]}) is None  # too short to judge
    assert run_drifted({"latency_ms": storm}) is None  # not a judged series


def test_flagged_counts_only_judged_runs() -> None:
    assert flagged([True, None, False, True]) == (2, 3)
    assert flagged([]) == (0, 0)


def test_the_header_names_the_new_columns() -> None:
    for column in ("verdict", "A/A ratio", "carry-over", "non-stationary"):
        assert column in HEADER


def test_arm_runs_takes_the_arms_attributes_and_what_is_given_first() -> None:
    class Arm:
        name, design, reference = "abba", "abba", "a"
        values = {"a": {1: [1.0, 1.0]}, "b": {1: [2.0, 2.0]}}
        seconds, rounds, positions, drifted = 60.0, 1, [], [False]
        unrelated = "ignored"

    got = arm_runs(Arm(), design="paired", runs=9)
    assert (got.name, got.design, got.runs, got.seconds) == ("abba", "paired", 9, 60.0)
    assert got.values == Arm.values and got.drifted == [False] and got.aa is None

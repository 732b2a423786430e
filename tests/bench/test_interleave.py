"""bench/interleave.py: the interleaved arm's slice order, round values and A/A split."""

from __future__ import annotations

import math
from typing import Any

import pytest
from interleave import (
    InterleavedArm,
    SliceResult,
    aa_split,
    round_tps,
    slice_order,
    slice_result,
    thue_morse,
)
from precision_table import arm_row

from blocklab.analysis.carryover import PositionRun


def test_thue_morse_prefix() -> None:
    assert [thue_morse(k) for k in range(8)] == [0, 1, 1, 0, 1, 0, 0, 1]


@pytest.mark.parametrize("slices", [1, 2, 3, 5, 12])
def test_every_order_holds_both_variants_equally_often(slices: int) -> None:
    order = slice_order(["a", "b"], slices, 1)
    assert len(order) == 2 * slices
    assert order.count("a") == order.count("b") == slices


def test_the_order_is_a_b_b_a_b_a_a_b_and_its_positions_balance() -> None:
    order = slice_order(["a", "b"], 12, 1)
    assert order[:8] == ["a", "b", "b", "a", "b", "a", "a", "b"]
    pos = {v: sum(i for i, x in enumerate(order) if x == v) for v in "ab"}
    assert pos["a"] == pos["b"] == sum(range(24)) // 2  # a linear drift cancels


def test_the_first_variant_alternates_from_round_to_round() -> None:
    firsts = [slice_order(["a", "b"], 4, r)[0] for r in range(1, 5)]
    assert firsts == ["a", "b", "a", "b"]
    assert slice_order(["a", "b"], 4, 2) == ["b", "a", "a", "b", "a", "b", "b", "a"]


def test_interleaving_takes_two_variants() -> None:
    with pytest.raises(ValueError, match="two variants"):
        slice_order(["a", "b", "c"], 4, 1)


def test_a_round_value_is_total_transactions_over_total_seconds() -> None:
    slices = [slice_result("a", 100, 20.0), slice_result("a", 300, 100.0)]  # 5 s and 3 s
    assert slices[0].seconds == pytest.approx(5.0)
    assert round_tps(slices) == pytest.approx(400 / 8)  # not the mean of the tps, 60
    with pytest.raises(ValueError):
        round_tps([])


def test_the_aa_split_follows_thue_morse_over_the_reference_slices() -> None:
    tps = [100.0, 200.0, 300.0, 400.0]  # copy 0 gets slices 0 and 3, copy 1 slices 1 and 2
    slices = [SliceResult("a", int(x * 5), 5.0) for x in tps]
    first, second = aa_split(slices)
    assert first == pytest.approx(250.0)
    assert second == pytest.approx(250.0)
    # a linear drift over 12 slices leans neither copy (odd/even would: copy 1 later)
    drifting = [SliceResult("a", int(1000 * (1 + 0.01 * k)), 1.0) for k in range(12)]
    first, second = aa_split(drifting)
    assert first == pytest.approx(second)


LEVEL = {"ref": 1000.0, "new": 1100.0}


def _arm(slices: int = 4) -> InterleavedArm:
    """An arm whose variants are only ids (store and collected read no more of them)."""
    variants: dict[str, Any] = dict.fromkeys(LEVEL)
    return InterleavedArm("interleaved", variants, "ref", 5, slices, 5)


def _round(arm: InterleavedArm, r: int) -> list[SliceResult]:
    """One round's slices: each variant's level, with a little noise, 5 s each."""
    got = []
    for position, vid in enumerate(slice_order(list(arm.variants), arm.slices, r)):
        tps = LEVEL[vid] * (1 + 0.003 * math.sin(5 * r + 3 * position))
        got.append(SliceResult(vid, round(tps * 5), 5.0))
        arm.positions.append(PositionRun(r, position, vid, got[-1].tps))
    arm.rounds, arm.executions, arm.seconds = r, arm.executions + len(got), arm.seconds + 60
    return got


def test_a_round_stores_whole_round_values_and_the_two_reference_halves() -> None:
    arm = _arm()
    got = _round(arm, 1)
    arm.store(1, got)
    new = [s for s in got if s.variant_id == "new"]
    ref = [s for s in got if s.variant_id == "ref"]
    assert arm.values["new"][1] == [pytest.approx(round_tps(new))]
    assert arm.values["ref"][1] == [pytest.approx(round_tps(ref))]
    assert arm.aa_copies[1] == [pytest.approx(x) for x in aa_split(ref)]


def test_an_incomplete_round_is_not_stored() -> None:
    arm = _arm()
    got = _round(arm, 1)
    arm.store(1, got[:-1])  # a failed slice
    assert arm.values == {} and arm.aa_copies == {}


def test_the_row_compares_whole_round_values_and_gives_an_aa() -> None:
    arm = _arm()
    for r in range(1, 7):
        arm.store(r, _round(arm, r))
    row = arm_row(arm.collected())
    assert row.rounds == 6
    assert row.runs == 6 * 8  # slices, not round values
    assert row.minutes == pytest.approx(6.0)
    assert row.gain_pct == pytest.approx(10.0, abs=0.5)
    assert row.half_width_pct is not None and row.half_width_pct < 1.0
    assert row.aa is not None and row.aa.ratio == pytest.approx(1.0, abs=0.01)
    assert row.aa.ci95_low is not None and row.aa.ci95_high is not None
    assert row.aa.ci95_low < row.aa.ratio < row.aa.ci95_high
    assert row.carry.comparison is not None  # slices follow both kinds of slices
    assert row.flagged == (0, 0)  # no per-second series: nothing judged

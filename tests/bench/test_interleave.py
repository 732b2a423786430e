"""bench/interleave.py: the interleaved arm stores blocklab's interleaved records and is
analysed as the summary analyses them (slot fitted, slot A/A, slices' carry-over)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from interleave import InterleavedArm
from precision_table import arm_row, format_row

from blocklab.analysis import interleaved_checks as checks
from blocklab.analysis.stats import EQUAL, compare_paired
from blocklab.execution import orders
from blocklab.experiment_file.design import INTERLEAVED, RunDesign
from blocklab.store import RunRecord

SEED = 7
LEVEL = {"ref": 1000.0, "new": 1100.0}  # the other variant 10 % faster
SLOT_BIAS = 1.03  # storage slot 1 gives 3 % more


def _arm() -> InterleavedArm:
    """An arm whose variants are only ids (store and collected read no more of them)."""
    variants: dict[str, Any] = dict.fromkeys(LEVEL)
    return InterleavedArm(INTERLEAVED, variants, "ref", RunDesign(kind=INTERLEAVED), SEED)


def _records(r: int, *, fail: str = "", level: dict[str, float] = LEVEL) -> dict[str, RunRecord]:
    """One round's records as blocklab's interleaved round writes them: tps with the slot's
    bias and a little noise, the slot, tps after a switch and after a repeat."""
    slots = orders.storage_slots(list(level), seed=SEED, round_no=r)
    out = {}
    for vid, base in level.items():
        tps = base * SLOT_BIAS ** slots[vid] * (1 + 0.004 * math.sin(5 * r + 2 * (vid == "new")))
        metrics = {
            checks.STORAGE_SLOT: float(slots[vid]),
            checks.TPS_AFTER_SWITCH: tps * 1.01,
            checks.TPS_AFTER_REPEAT: tps * 0.99,
            "slices": 4.0,
        }
        failed = vid == fail
        out[vid] = RunRecord(
            experiment="bench",
            variant_id=vid,
            round=r,
            position=0,
            status="failed" if failed else "ok",
            started_at="",
            ended_at="",
            reason="pgbench failed" if failed else "",
            tps=None if failed else tps,
            metrics=metrics,
        )
    return out


def _six_rounds() -> InterleavedArm:
    arm = _arm()
    for r in range(1, 7):
        arm.rounds, arm.seconds = r, arm.seconds + 60
        arm.store(r, _records(r))
    return arm


def test_a_round_stores_tps_slot_and_the_slices_switch_and_repeat() -> None:
    arm = _arm()
    recs = _records(1)
    arm.store(1, recs)
    for vid, rec in recs.items():
        assert arm.values[vid][1] == [rec.tps]
        assert arm.slots[vid][1] == rec.metrics[checks.STORAGE_SLOT]
        assert arm.switch[vid][1] == rec.metrics[checks.TPS_AFTER_SWITCH]
        assert arm.repeat[vid][1] == rec.metrics[checks.TPS_AFTER_REPEAT]
    assert arm.executions == 8 and arm.failed == 0


def test_an_incomplete_round_is_not_stored_and_its_failure_is_counted() -> None:
    arm = _arm()
    arm.store(1, _records(1, fail="new"))
    assert arm.values == {} and arm.slots == {}
    assert arm.failed == 1


def test_the_row_fits_the_slot_as_the_summary_does() -> None:
    """6 rounds put each variant 4 times on one slot and twice on the other, so a 3 %
    slot bias leans the plain paired mean by about 1 %; the fitted row does not."""
    arm = _six_rounds()
    row = arm_row(arm.collected(), equivalence_pct=3.0)
    ref = {r: xs[0] for r, xs in arm.values["ref"].items()}
    new = {r: xs[0] for r, xs in arm.values["new"].items()}
    fitted = compare_paired(ref, new, nuisance=checks.slot_signs(arm.slots["new"]))
    plain = compare_paired(ref, new)
    assert row.gain_pct == pytest.approx(fitted.gain_pct)
    assert row.gain_pct == pytest.approx(10.0, abs=0.3)
    assert plain.gain_pct is not None and abs(plain.gain_pct - 10.0) > 0.5
    assert row.half_width_pct == pytest.approx(fitted.ci_half_width_pct)
    assert row.rounds == 6 and row.runs == 6 * 8  # slices, not round values
    assert row.verdict == "faster"


def test_the_row_carries_the_slot_aa_and_the_slices_carry_over() -> None:
    arm = _six_rounds()
    row = arm_row(arm.collected())
    assert row.aa is not None and row.aa.ratio == pytest.approx(SLOT_BIAS, abs=0.005)
    assert row.carry.comparison is not None
    assert row.carry.comparison.ratio == pytest.approx(1.01 / 0.99, abs=1e-6)
    assert row.flagged == (0, 0)  # no per-second series: nothing judged


def test_equal_variants_read_equal_at_the_margin() -> None:
    arm = _arm()
    for r in range(1, 7):  # both variants at the same level
        arm.store(r, _records(r, level={"ref": 1000.0, "new": 1000.0}))
    row = arm_row(arm.collected(), equivalence_pct=3.0)
    assert row.verdict == EQUAL
    assert "equal ±3 %" in format_row(row)

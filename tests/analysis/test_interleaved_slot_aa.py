"""interleaved's storage-slot A/A (blocklab.analysis.interleaved_checks.slot_aa): against
statsmodels' OLS as the oracle, and in a slice-level simulation with a FIXED seed that
holds what the check must ignore (the 3.5 % switch effect, a drift within and between
rounds, AR(1) noise between slices, a true 2 % difference between the variants): a 3 %
bias of one storage slot is detected, none gives false alarms at about the nominal 5 %,
and the old A/A (Thue-Morse halves of one server's slices) does not see the bias."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import statsmodels.api as sm

from blocklab.analysis import interleaved_checks as checks
from blocklab.analysis import stats
from blocklab.execution import interleaved, orders
from blocklab.execution.interleaved import SliceRun

SWITCH = 0.035  # a slice right after a switch of server ran 3.5 % faster (the bench)
SLICE_NOISE = 0.06  # per-slice log sd: 2.2 % per round with 8 slices (the bench: 2.1 %)
AR1 = 0.5  # correlation of one slice's noise with the previous slice's
EFFECT = -0.02  # the other variant (b) against the reference (a)
REPS = 600


def test_slot_ratio_and_interval_are_ols_intercept_with_n_minus_2_df() -> None:
    rng = random.Random(5)
    ref_tps, ref_slot, other_tps = {}, {}, {}
    for r in range(1, 8):
        slot = orders.storage_slots(["a", "b"], seed=1, round_no=r)["a"]
        ref_tps[r] = 1000 * (1.03 if slot == 1 else 1) * math.exp(rng.gauss(0, 0.02))
        other_tps[r] = 980 * (1.03 if slot == 0 else 1) * math.exp(rng.gauss(0, 0.02))
        ref_slot[r] = float(slot)
    got = checks.slot_aa(ref_tps, ref_slot, other_tps)
    x = [1.0 if ref_slot[r] == 0 else -1.0 for r in ref_tps]
    d = [xr * math.log(other_tps[r] / ref_tps[r]) for r, xr in zip(ref_tps, x, strict=True)]
    fit = sm.OLS(np.array(d), sm.add_constant(np.array(x))).fit()
    low, high = fit.conf_int(0.05)[0]
    assert got.n_pairs == 7
    assert got.estimate == pytest.approx(math.exp(fit.params[0]), rel=1e-12)
    assert (got.ci95_low, got.ci95_high) == pytest.approx((math.exp(low), math.exp(high)))
    assert got.p_value == pytest.approx(fit.pvalues[0], rel=1e-9)


def test_too_few_rounds_or_one_slot_only_say_so() -> None:
    three = {1: 100.0, 2: 101.0, 3: 99.0}
    one_slot = checks.slot_aa(three, {1: 0.0, 2: 0.0, 3: 0.0}, three)
    assert one_slot.verdict == stats.TOO_FEW and "each variant on each slot" in one_slot.note
    two = checks.slot_aa({1: 1.0, 2: 1.0}, {1: 0.0, 2: 1.0}, {1: 1.0, 2: 1.0})
    assert (two.verdict, two.n_pairs, two.ci95_low) == (stats.TOO_FEW, 2, None)


def _round(rng: random.Random, r: int, bias: float, slices: int) -> dict[str, list[SliceRun]]:
    """One simulated round: each slice's tps from its variant, its storage slot, whether
    it follows a switch, the drift and AR(1) noise."""
    order = orders.round_slices(["a", "b"], seed=1, slices=slices, round_no=r)
    slot = orders.storage_slots(["a", "b"], seed=1, round_no=r)
    level = math.log(1000) + rng.gauss(0, 0.05) - 0.01 * r  # the machine's load, by round
    noise, out = 0.0, {"a": [], "b": []}
    for pos, vid in enumerate(order):
        noise = AR1 * noise + math.sqrt(1 - AR1**2) * rng.gauss(0, SLICE_NOISE)
        log_tps = level + noise - 0.002 * pos  # a drift inside the round
        log_tps += EFFECT * (vid == "b") + math.log1p(bias) * slot[vid]
        log_tps += SWITCH * (pos > 0 and order[pos - 1] != vid)
        out[vid].append(SliceRun(pos, vid, round(5 * math.exp(log_tps)), 5.0))
    return out


def _experiment(rng: random.Random, bias: float, rounds: int, slices: int) -> dict[str, object]:
    ref_tps, ref_slot, other_tps, halves = {}, {}, {}, ({}, {})
    for r in range(1, rounds + 1):
        got = _round(rng, r, bias, slices)
        ref_tps[r] = interleaved.totals(got["a"]).tps
        other_tps[r] = interleaved.totals(got["b"]).tps
        ref_slot[r] = float(orders.storage_slots(["a", "b"], seed=1, round_no=r)["a"])
        h = interleaved.halves_tps(got["a"])
        assert h is not None
        halves[0][r], halves[1][r] = h
    ab = stats.compare_paired(ref_tps, other_tps)
    return {
        "slot": checks.slot_aa(ref_tps, ref_slot, other_tps),
        "halves": checks.aa_halves([halves]),
        "ab": ab,
    }


def _rates(bias: float, rounds: int, slices: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    runs = [_experiment(rng, bias, rounds, slices) for _ in range(REPS)]

    def flagged(key: str) -> float:
        return sum(r[key].verdict in (stats.FASTER, stats.SLOWER) for r in runs) / REPS

    ab_cover = sum(r["ab"].ci95_low <= math.exp(EFFECT) <= r["ab"].ci95_high for r in runs) / REPS
    return {"slot": flagged("slot"), "halves": flagged("halves"), "ab_cover": ab_cover}


def test_a_3_percent_slot_bias_is_detected_and_no_bias_rarely_flags() -> None:
    """12 rounds of 8 slices per variant, 600 simulated experiments each (seeds 11, 12):
    the 3 % bias is detected in 97.3 % (the halves flag 2.0 %: blind to it); with no bias
    the slot A/A flags 4.2 % (nominal 5 %); the A/B interval covers the true -2 % in
    100 % with the bias (the swap balances it out of the estimate and widens the
    interval) and 96.8 % without. (8 rounds: 85.7 % and 5.7 %; the demo's 6 rounds of 4
    slices: 32 % and 5.3 %, docs/PRECISION.md.)"""
    biased = _rates(0.03, rounds=12, slices=8, seed=11)
    clean = _rates(0.0, rounds=12, slices=8, seed=12)
    assert biased["slot"] >= 0.93
    assert biased["halves"] <= 0.06  # one server against itself: blind to the bias
    assert clean["slot"] <= 0.065
    assert clean["halves"] <= 0.065
    assert biased["ab_cover"] >= 0.93 and clean["ab_cover"] >= 0.93

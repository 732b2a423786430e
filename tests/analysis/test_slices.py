"""The probes' cost from slices (blocklab.analysis.slices): the schedule's balance, the
statistic against scipy on fixed data, and by simulation with a fixed seed its coverage,
false-alarm and detection rates under drift and AR(1) noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from blocklab.analysis import slices as sl

RUNS = 400
BLOCKS = 12  # per probe: 2 probes x 12 blocks x 4 slices x 3 s = 288 s, the default


def test_the_schedule_is_balanced_in_time_per_block_and_per_probe() -> None:
    plan = sl.schedule(["sampler", "cpu_log"], 8)
    assert len(plan) == 2 * 8 * 4
    assert [s.probe for s in plan[:8]] == ["sampler"] * 4 + ["cpu_log"] * 4
    assert [sl.thue_morse(n) for n in range(8)] == [0, 1, 1, 0, 1, 0, 0, 1]
    for probe in ("sampler", "cpu_log"):
        mine = [(i, s) for i, s in enumerate(plan) if s.probe == probe]
        on = [i for i, s in mine if s.on]
        off = [i for i, s in mine if not s.on]
        assert len(on) == len(off) and sum(on) == sum(off)  # the same mean position
        # ... and the same mean squared position: a quadratic drift cancels too
        assert sum(i * i for i in on) == sum(i * i for i in off)
    with pytest.raises(ValueError):
        sl.schedule([], 3)


def test_the_ratio_and_its_ci_match_scipy_on_fixed_data() -> None:
    plan = sl.schedule(["p"], 5)
    rng = np.random.default_rng(7)
    tps = list(4000 * np.exp(rng.normal(0, 0.02, len(plan))))
    got = sl.probe_ratios(plan, tps)["p"]
    logs = np.log(np.array(tps)).reshape(5, 4)
    on_mask = np.array([[s.on for s in plan[4 * b : 4 * b + 4]] for b in range(5)])
    d = np.array([logs[b][on_mask[b]].mean() - logs[b][~on_mask[b]].mean() for b in range(5)])
    ci = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert got.n_pairs == 5
    assert got.estimate == pytest.approx(math.exp(d.mean()), rel=1e-12)
    assert got.ci95_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert got.ci95_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    # a block with a missing slice is left out whole
    tps[5] = None  # type: ignore[call-overload]
    assert sl.probe_ratios(plan, tps)["p"].n_pairs == 4
    with pytest.raises(ValueError):
        sl.probe_ratios(plan, tps[:-1])


def test_slice_tps_from_progress_seconds() -> None:
    per_second = {k: float(k) for k in range(1, 12)}
    # lead-in 2 s, slices of 3 s: seconds 3-5, 6-8, 9-11; a fourth would need 12-14
    assert sl.slice_tps(per_second, 4, 3, 2) == [4.0, 7.0, 10.0, None]


def _simulate(
    rng: np.random.Generator, true_ratio: float, *, sd: float = 0.015, phi: float = 0.6
) -> tuple[float, float, float]:
    """One run of 2 probes x BLOCKS blocks of 3 s slices on a drifting, noisy machine:
    tps falls 10 % over the run, a slow wave of ±3 % rides on it, and the slices' noise
    is AR(1). The first probe costs `true_ratio`, the second nothing."""
    plan = sl.schedule(["a", "b"], BLOCKS)
    n = len(plan)
    t = np.arange(n) / n
    drift = -0.10 * t + 0.03 * np.sin(2 * np.pi * 1.3 * t)
    noise = np.empty(n)
    noise[0] = rng.normal(0, sd)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + rng.normal(0, sd * math.sqrt(1 - phi * phi))
    effect = np.array([math.log(true_ratio) if s.on and s.probe == "a" else 0.0 for s in plan])
    tps = 4000 * np.exp(drift + noise + effect)
    c = sl.probe_ratios(plan, list(tps))["a"]
    assert c.estimate is not None and c.ci95_low is not None and c.ci95_high is not None
    return c.estimate, c.ci95_low, c.ci95_high


def test_coverage_false_alarms_and_detection_under_drift_and_ar1_noise() -> None:
    rng = np.random.default_rng(20261127)
    null = [_simulate(rng, 1.0) for _ in range(RUNS)]
    false_alarm = sum(1 for _e, lo, hi in null if lo > 1.0 or hi < 1.0) / RUNS
    assert false_alarm <= 0.08, false_alarm  # nominal 5 %; the drift is not mistaken
    assert abs(float(np.mean([math.log(e) for e, _lo, _hi in null]))) < 0.001  # unbiased
    costly = [_simulate(rng, 0.99) for _ in range(RUNS)]
    covered = sum(1 for _e, lo, hi in costly if lo <= 0.99 <= hi) / RUNS
    assert 0.92 <= covered <= 0.98, covered
    detected = sum(1 for _e, _lo, hi in costly if hi < 1.0) / RUNS
    assert detected >= 0.8, detected  # a 1 % cost is seen
    half = float(np.median([(hi - lo) / 2 for _e, lo, hi in costly]))
    # at 1.5 % noise per slice, 12 blocks a probe: about 0.6 %; the real noise of the
    # machine decides (blocklab selftest overhead prints it)
    assert 0.004 <= half <= 0.008, half
    print(f"false alarms {false_alarm:.3f}, coverage {covered:.3f}, detected {detected:.3f}")


def test_a_naive_before_after_comparison_would_mistake_the_drift() -> None:
    """The oracle that the design matters: all off, then all on, on the same drifting
    machine, shows a 'cost' of several % where there is none."""
    rng = np.random.default_rng(5)
    n = 96
    tps = 4000 * np.exp(-0.10 * np.arange(n) / n + rng.normal(0, 0.015, n))
    naive = math.exp(np.log(tps[n // 2 :]).mean() - np.log(tps[: n // 2]).mean())
    assert naive < 0.96
    plan = sl.schedule(["a"], n // 4)
    est = sl.probe_ratios(plan, list(tps))["a"].estimate
    assert est is not None and abs(est - 1.0) < 0.01

"""The probes' CPU share from slices (blocklab.analysis.slices.probe_cpu_shares): the
statistic against scipy on fixed data, and by simulation with a fixed seed its coverage,
false alarms and interval width where tps slices are noisy by several %."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from blocklab.analysis import slices as sl

RUNS = 400
BLOCKS = 12  # per probe, as `blocklab selftest overhead` by default
TICK_S = 0.01  # /proc/<pid>/stat's clock tick: the readings are truncated to it


def test_slice_growth_from_cumulative_readings() -> None:
    assert sl.slice_growth({0: 1.0, 1: 1.5, 2: 3.0, 4: 9.0}, 4) == [0.5, 1.5, None, None]


def test_the_share_and_its_ci_match_scipy_on_fixed_data() -> None:
    plan = sl.schedule(["p", "q"], 5)
    rng = np.random.default_rng(11)
    total = 6.0 * np.exp(rng.normal(0, 0.05, len(plan)))
    probe = np.array([0.02 + (0.05 if s.on and s.probe == "p" else 0.0) for s in plan])
    probe += rng.normal(0, 0.004, len(plan))
    got = sl.probe_cpu_shares(plan, list(probe), list(total))
    assert set(got) == {"p", "q"}
    mine = [(i, s) for i, s in enumerate(plan) if s.probe == "p"]
    per_block = []
    for b in sorted({s.block for _i, s in mine}):
        idx = [(i, s.on) for i, s in mine if s.block == b]
        on = np.mean([probe[i] for i, is_on in idx if is_on])
        off = np.mean([probe[i] for i, is_on in idx if not is_on])
        per_block.append((on - off) / np.mean([total[i] for i, _on in idx]) * 100)
    d = np.array(per_block)
    ci = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    p = got["p"]
    assert p.n_blocks == 5
    assert p.share_pct == pytest.approx(d.mean(), rel=1e-12)
    assert p.ci95_low_pct == pytest.approx(ci.low, rel=1e-9)
    assert p.ci95_high_pct == pytest.approx(ci.high, rel=1e-9)
    assert p.half_width_pct == pytest.approx((ci.high - ci.low) / 2, rel=1e-9)
    assert p.added_cpu_s_per_slice == pytest.approx(0.05, abs=0.01)
    # a block with a slice without a figure, or without total CPU, is left out whole
    probe_list: list[float | None] = list(probe)
    probe_list[plan.index(mine[0][1])] = None
    total_list: list[float | None] = list(total)
    total_list[4 * 2 : 4 * 3] = [0.0] * 4  # the second block of p (blocks alternate p, q)
    assert sl.probe_cpu_shares(plan, probe_list, total_list)["p"].n_blocks == 3
    with pytest.raises(ValueError):
        sl.probe_cpu_shares(plan, list(probe)[:-1], list(total))


def _ticks(per_slice: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per-slice growth as read: cumulative seconds from a random start, truncated to a
    tick at each bound, then differenced."""
    cumulative = rng.uniform(0, 100) + np.concatenate([[0.0], np.cumsum(per_slice)])
    read = np.floor(cumulative / TICK_S) * TICK_S
    return np.diff(read)


def _simulate(rng: np.random.Generator, true_pct: float) -> tuple[float, float, float]:
    """One run of 2 probes x BLOCKS blocks of 3 s slices on a 2-core machine: the measured
    system's CPU per slice (about 6 s) drifts 10 % over the run and has AR(1) noise of 4 %
    per slice (as tps does here); blocklab's own work costs 20 ms a slice with a 5 ms
    jitter; probe "a" takes `true_pct` % of the system's CPU in its on slices, "b"
    nothing; every figure is read in clock ticks."""
    plan = sl.schedule(["a", "b"], BLOCKS)
    n = len(plan)
    noise = np.empty(n)
    noise[0] = rng.normal(0, 0.04)
    for i in range(1, n):
        noise[i] = 0.6 * noise[i - 1] + rng.normal(0, 0.04 * math.sqrt(1 - 0.36))
    total = 6.0 * np.exp(-0.10 * np.arange(n) / n + noise)
    on_a = np.array([s.on and s.probe == "a" for s in plan])
    probe = 0.02 + rng.normal(0, 0.005, n).clip(-0.02) + np.where(on_a, total * true_pct / 100, 0)
    c = sl.probe_cpu_shares(plan, list(_ticks(probe, rng)), list(_ticks(total, rng)))
    a, b = c["a"], c["b"]
    assert a.share_pct is not None and a.ci95_low_pct is not None and b.ci95_low_pct is not None
    assert a.ci95_high_pct is not None and b.ci95_high_pct is not None
    null_hit = b.ci95_low_pct > 0.0 or b.ci95_high_pct < 0.0
    return a.ci95_low_pct, a.ci95_high_pct, float(null_hit)


def test_coverage_false_alarms_and_width_where_tps_is_noisy() -> None:
    rng = np.random.default_rng(20261128)
    runs = [_simulate(rng, 1.0) for _ in range(RUNS)]
    covered = sum(1 for lo, hi, _n in runs if lo <= 1.0 <= hi) / RUNS
    assert 0.92 <= covered <= 0.98, covered
    false_alarm = sum(n for _lo, _hi, n in runs) / RUNS
    assert false_alarm <= 0.08, false_alarm  # nominal 5 %
    half = float(np.median([(hi - lo) / 2 for lo, hi, _n in runs]))
    # the issue's bar is ±0.5 %; the CPU share's noise is the probes' jitter, not tps's
    assert half <= 0.1, half
    detected = sum(1 for lo, _hi, _n in runs if lo > 0.0) / RUNS
    assert detected >= 0.99, detected
    print(f"coverage {covered:.3f}, false alarms {false_alarm:.3f}, half-width {half:.3f} %")

"""A share (a fraction or a percentage: the HOT-update ratio, the cache hit ratio) is
compared as its difference in percentage points with a paired t interval on the per-round
differences, not as a ratio of ratios (issue 35). Checked against scipy's paired t-test,
and for coverage by a simulation with a fixed seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from blocklab.analysis import stats
from blocklab.analysis.metrics import compare, metric_info
from blocklab.analysis.summary_table import gain_text

HOT = metric_info("hot_update_ratio")


def _rounds(xs: list[float]) -> dict[int, float]:
    return dict(enumerate(xs, start=1))


@pytest.mark.parametrize("seed", range(5))
def test_a_share_is_a_difference_in_points_as_scipy_computes_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = rng.uniform(0.80, 0.95, size=8)
    other = ref + rng.normal(0.02, 0.01, size=8)
    c = compare(_rounds(list(ref)), _rounds(list(other)), HOT)
    want = scipy_stats.ttest_rel(other, ref)
    low, high = want.confidence_interval(0.95)
    assert c.scale == stats.DIFFERENCE and c.gain_pct is None
    assert c.estimate == pytest.approx(float(np.mean(other - ref)), rel=1e-9)
    assert (c.ci95_low, c.ci95_high) == (
        pytest.approx(low, rel=1e-9),
        pytest.approx(high, rel=1e-9),
    )
    assert c.p_value == pytest.approx(want.pvalue, rel=1e-6)


def test_the_change_prints_in_percentage_points() -> None:
    ref = _rounds([0.90, 0.91, 0.89, 0.90, 0.92, 0.88])
    other = _rounds([0.93, 0.93, 0.92, 0.94, 0.94, 0.91])
    text = gain_text(compare(ref, other, HOT), HOT.unit)
    assert (
        text.startswith("+2.8 pp (+2.0 pp to +3.6 pp") and text.endswith(" pp)") and "%" not in text
    )
    c = compare(ref, other, HOT)
    assert c.verdict == stats.FASTER  # the metric's direction: higher is better


def test_a_throughput_is_still_a_ratio() -> None:
    c = compare(_rounds([100.0, 102.0, 98.0]), _rounds([110.0, 111.0, 109.0]), metric_info("tps"))
    assert c.scale == stats.RATIO and c.gain_pct is not None


def test_the_points_interval_covers_the_true_difference_95_percent_of_the_time() -> None:
    """2,000 simulated experiments of 8 rounds, the round's level shared by both variants
    (the pairing's point) and a true difference of +1.5 pp: coverage and false alarms."""
    rng = np.random.default_rng(35)
    covered = alarms = 0
    n_sims = 2000
    for _ in range(n_sims):
        level = rng.uniform(0.7, 0.9, size=8)
        ref = level + rng.normal(0, 0.01, size=8)
        other = level + 0.015 + rng.normal(0, 0.01, size=8)
        c = compare(_rounds(list(ref)), _rounds(list(other)), HOT)
        assert c.ci95_low is not None and c.ci95_high is not None
        covered += c.ci95_low <= 0.015 <= c.ci95_high
        same = compare(_rounds(list(ref)), _rounds(list(level + rng.normal(0, 0.01, 8))), HOT)
        alarms += same.verdict in (stats.FASTER, stats.SLOWER)
    assert 0.935 <= covered / n_sims <= 0.965
    assert alarms / n_sims <= 0.065

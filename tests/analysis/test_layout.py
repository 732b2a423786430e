"""The build-level spread (blocklab.analysis.layout) against statsmodels and a simulation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from blocklab.analysis import layout


def _values(y: np.ndarray) -> dict[str, dict[int, float]]:
    return {
        f"b{b}": {r + 1: float(math.exp(y[r, b])) for r in range(y.shape[0])}
        for b in range(y.shape[1])
    }


def test_the_f_test_is_statsmodels_two_way_anova_with_rounds_as_blocks() -> None:
    rng = np.random.default_rng(11)
    y = (
        7.5
        + rng.normal(0, 0.03, (6, 1))
        + rng.normal(0, 0.02, (1, 4))
        + rng.normal(0, 0.01, (6, 4))
    )
    s = layout.spread(_values(y))
    assert s is not None
    df = pd.DataFrame(
        [(r, b, y[r, b]) for r in range(6) for b in range(4)], columns=["rnd", "build", "y"]
    )
    table = anova_lm(smf.ols("y ~ C(rnd) + C(build)", df).fit())
    assert s.f_stat == pytest.approx(table.loc["C(build)", "F"], rel=1e-9)
    assert s.p_value == pytest.approx(table.loc["C(build)", "PR(>F)"], rel=1e-9)
    ms_error = table.loc["Residual", "mean_sq"]
    assert s.sigma_run_pct == pytest.approx(100 * math.sqrt(ms_error), rel=1e-9)
    expected = math.sqrt((table.loc["C(build)", "mean_sq"] - ms_error) / 6)
    assert s.sigma_build_pct == pytest.approx(100 * expected, rel=1e-9)
    assert sum(math.log1p(o / 100) for o in s.build_offsets_pct.values()) == pytest.approx(
        0, abs=1e-12
    )


def test_incomplete_rounds_are_left_out_and_too_little_gives_none() -> None:
    assert layout.spread({"a": {1: 1.0, 2: 1.0}}) is None
    assert layout.spread({"a": {1: 1.0}, "b": {1: 1.1}}) is None
    s = layout.spread({"a": {1: 1.0, 2: 1.1, 3: 1.0}, "b": {1: 1.1, 2: 1.0}})
    assert s is not None and s.rounds == 2


def _simulate(
    sigma_build: float, trials: int, rng: np.random.Generator
) -> list[layout.LayoutSpread]:
    out = []
    for _ in range(trials):
        drift = rng.normal(0, 0.04, (8, 1))  # rounds differ a lot: blocks absorb it
        builds = rng.normal(0, sigma_build, (1, 5))
        y = 8.0 + drift + builds + rng.normal(0, 0.02, (8, 5))
        s = layout.spread(_values(y))
        assert s is not None
        out.append(s)
    return out


def test_no_layout_effect_is_flagged_at_the_nominal_rate_whatever_the_round_drift() -> None:
    found = _simulate(0.0, 2000, np.random.default_rng(5))
    rate = sum(s.p_value < 0.05 for s in found) / len(found)
    assert rate <= 0.06  # nominal 5 %; the simulation's own error is about 0.5 %


def test_a_two_percent_layout_effect_is_detected_and_its_size_recovered() -> None:
    found = _simulate(0.02, 1000, np.random.default_rng(6))
    assert sum(s.p_value < 0.05 for s in found) / len(found) >= 0.8
    median = float(np.median([s.sigma_build_pct for s in found]))
    assert 1.5 <= median <= 2.3  # the ANOVA estimator, floored at 0, around 2 %
    assert "a random layout moves it by up to" in layout.sentence(found[0])

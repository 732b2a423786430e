"""The precision model (blocklab.analysis.precision) against outside oracles and simulation."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from blocklab.analysis import precision
from blocklab.analysis.stats import compare_paired


@pytest.mark.parametrize("n", [2, 3, 6, 10, 30, 200])
def test_mde_matches_statsmodels_power_solver(n: int) -> None:
    # statsmodels solves the one-sample t-test's effect size (in sigma units) for
    # alpha 0.05, power 0.8, two-sided: the same question on the log ratios.
    sigma = 0.04
    d = TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8, alternative="two-sided")
    assert precision.mde_log(sigma, n) == pytest.approx(d * sigma, rel=1e-5)


def test_power_matches_scipy_nct() -> None:
    n, sigma, effect = 8, 0.05, 0.04
    df, nc = n - 1, effect / sigma * math.sqrt(n)
    crit = sps.t.ppf(0.975, df)
    expected = sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)
    assert precision.power(effect, sigma, n) == pytest.approx(expected, rel=1e-9)


def test_closed_form_mde_for_known_noise() -> None:
    # n = 10, sigma = 0.05: (t(0.975, 9) + t(0.8, 9)) * 0.05 / sqrt(10), the quantiles
    # from R: qt(0.975, 9) = 2.262157, qt(0.8, 9) = 0.8834039
    closed = (2.262157 + 0.8834039) * 0.05 / math.sqrt(10)
    assert precision.mde_closed_form_log(0.05, 10) == pytest.approx(closed, rel=1e-6)
    # the exact (noncentral t) MDE approaches the closed form as rounds grow
    for n, rel in ((10, 0.005), (30, 0.001), (200, 0.0002)):
        exact = precision.mde_log(0.05, n)
        assert exact == pytest.approx(precision.mde_closed_form_log(0.05, n), rel=rel)
    pct = precision.mde_pct(0.05, 10)
    assert pct == pytest.approx((math.exp(precision.mde_log(0.05, 10)) - 1) * 100)


def test_half_width_is_what_stats_reports() -> None:
    # a sample whose stdev is exactly sigma: compare_paired's half-width is the model's
    xs = [0.03, -0.01, 0.05, 0.0, -0.02]
    s = sps.tstd(xs)
    ref = {r: 1000.0 for r in range(5)}
    other = {r: 1000.0 * math.exp(x) for r, x in enumerate(xs)}
    got = compare_paired(ref, other).ci_half_width_pct
    expected = precision.expected_ci_half_width_pct(s, 5, unbiased=False)
    assert got == pytest.approx(expected, rel=1e-9)


def test_rounds_needed_is_monotone() -> None:
    targets = [0.5, 1.0, 2.0, 5.0]
    sigmas = [0.005, 0.01, 0.03, 0.08]
    for sigma in sigmas:
        needs = [precision.rounds_needed(sigma, t) for t in targets]
        assert all(a is not None and b is not None and a >= b for a, b in itertools.pairwise(needs))
    for target in targets:
        needs = [precision.rounds_needed(s, target) for s in sigmas]
        assert all(a is not None and b is not None and a <= b for a, b in itertools.pairwise(needs))
    n = precision.rounds_needed(0.03, 2.0)
    assert n is not None
    assert precision.expected_ci_half_width_pct(0.03, n) <= 2.0
    assert precision.expected_ci_half_width_pct(0.03, n - 1) > 2.0
    with pytest.raises(ValueError, match="target"):
        precision.rounds_needed(0.03, 0)


def _simulated_half_widths(sigma: float, n: int, sims: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(sims):
        ref = {r: 1000.0 * math.exp(rng.gauss(0, 0.05)) for r in range(n)}
        other = {r: ref[r] * 1.03 * math.exp(rng.gauss(0, sigma)) for r in range(n)}
        width = compare_paired(ref, other).ci_half_width_pct
        assert width is not None
        out.append(width)
    return out


def test_rounds_needed_matches_simulation() -> None:
    # Simulated experiments with per-round noise sigma (and a common per-round level,
    # which pairing cancels): at the rounds the model asks for, the mean half-width the
    # experiments reach is the target; one round fewer, it is above the target.
    sigma, target = 0.04, 2.5
    n = precision.rounds_needed(sigma, target)
    assert n is not None and n > 5
    at_n = _simulated_half_widths(sigma, n, 3000, seed=1)
    mean_at_n = sum(at_n) / len(at_n)
    assert mean_at_n == pytest.approx(precision.expected_ci_half_width_pct(sigma, n), rel=0.02)
    assert mean_at_n <= target * 1.02
    before = _simulated_half_widths(sigma, n - 1, 3000, seed=2)
    assert sum(before) / len(before) > target * 0.98


def test_forecast_and_time() -> None:
    f = precision.forecast(0.03, rounds=6, seconds_per_round=56.0, target_half_width_pct=2.0)
    assert f.rounds_for_target == precision.rounds_needed(0.03, 2.0)
    assert f.seconds_for_target == pytest.approx(f.rounds_for_target * 56.0)
    assert f.mde_pct > f.ci_half_width_pct  # 80 % power needs more than the CI edge


def test_noise_pools_comparisons_by_degrees_of_freedom() -> None:
    a, b = [0.01, -0.01, 0.03], [0.02, 0.0]
    noise = precision.noise_from_rounds([a, b, [0.5]])
    assert noise is not None and noise.df == 3
    pooled = (sps.tvar(a) * 2 + sps.tvar(b) * 1) / 3
    assert noise.sigma_log == pytest.approx(math.sqrt(pooled))
    assert precision.noise_from_rounds([[0.1]]) is None
    ref, other = {1: 100.0, 2: 200.0, 3: 0.0}, {1: 110.0, 2: 180.0, 3: 5.0, 4: 1.0}
    assert precision.log_ratios(ref, other) == pytest.approx([math.log(1.1), math.log(0.9)])


def test_can_reach_says_early_when_the_budget_is_too_small() -> None:
    noisy = [[0.05, -0.03, 0.1, -0.08, 0.02]]
    tight = precision.can_reach(noisy, 2.0, max_rounds=10)
    assert not tight.reachable
    assert tight.rounds_needed is not None and tight.rounds_needed > 10
    assert "budget allows 10" in tight.note
    roomy = precision.can_reach(noisy, 2.0, max_rounds=500)
    assert roomy.reachable
    # a time budget: 10 min left at 60 s per round allows 5 + 10 rounds
    timed = precision.can_reach(noisy, 2.0, max_rounds=None, seconds_left=600, seconds_per_round=60)
    assert timed.rounds_allowed == 15 and not timed.reachable
    early = precision.can_reach([[0.3, -0.3]], 2.0, max_rounds=3)
    assert early.reachable and "too few rounds" in early.note


def test_can_reach_rarely_gives_up_on_a_reachable_target() -> None:
    # noise that the budget can just handle: the optimistic bound keeps false alarms rare
    sigma, target = 0.03, 2.0
    need = precision.rounds_needed(sigma, target)
    assert need is not None
    rng = random.Random(7)
    gave_up = 0
    for _ in range(500):
        xs = [rng.gauss(0, sigma) for _ in range(4)]
        gave_up += not precision.can_reach([xs], target, max_rounds=need).reachable
    assert gave_up / 500 <= 0.10 + 0.04  # the 90 % bound, plus binomial slack (3 sd at n=500)

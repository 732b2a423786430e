"""blocklab.analysis.stats against outside oracles: printed t tables, constants and scipy."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest
from scipy import stats as sp

from blocklab.analysis import stats

# Reference (8 kB) and variant (4 kB) tps of five paired rounds.
REF = {1: 1021.3, 2: 998.7, 3: 1043.2, 4: 1010.5, 5: 987.9}
OTHER = {1: 1102.4, 2: 1060.1, 3: 1121.8, 4: 1079.3, 5: 1070.2}


def test_t_quantiles_match_printed_tables() -> None:
    # Student t, two-sided 95 %: the values every printed table carries.
    assert stats.t_quantile(1) == pytest.approx(12.7062, abs=1e-4)
    assert stats.t_quantile(4) == pytest.approx(2.7764, abs=1e-4)
    assert stats.t_quantile(9) == pytest.approx(2.2622, abs=1e-4)
    assert stats.t_quantile(30) == pytest.approx(2.0423, abs=1e-4)
    with pytest.raises(ValueError):
        stats.t_quantile(0)


def test_summarize_against_constants_and_scipy() -> None:
    values = list(REF.values())
    s = stats.summarize(values)
    # R: x <- c(1021.3, 998.7, 1043.2, 1010.5, 987.9); mean(x); sd(x)
    # gives 1012.32, 21.32703 (same values from scipy 1.17.1).
    assert s.n == 5
    assert s.mean == pytest.approx(1012.32)
    assert s.stdev == pytest.approx(21.32703, rel=1e-6)
    assert (s.min, s.median, s.max) == (987.9, 1010.5, 1043.2)
    # Every value is positive: the interval is of the geometric mean, t on the logs.
    logs = np.log(values)
    low, high = np.exp(sp.t.interval(0.95, 4, loc=np.mean(logs), scale=sp.sem(logs)))
    assert s.ci_of == stats.GEOMETRIC_MEAN
    assert s.geo_mean == pytest.approx(sp.gmean(values))
    assert (s.ci95_low, s.ci95_high) == pytest.approx((low, high))
    assert s.cv == pytest.approx(21.32703 / 1012.32, rel=1e-6)
    assert not s.noisy and s.advice == ""
    assert s.ci_half_width_pct == pytest.approx((high - low) / 2 / sp.gmean(values) * 100)


def test_two_rounds_of_tps_never_give_a_negative_interval() -> None:
    # Two rounds of tps (mean 3870): the t interval of the mean is about -2,577 .. 10,317.
    values = [3362.0, 4378.0]
    linear = sp.t.interval(0.95, 1, loc=np.mean(values), scale=sp.sem(values))
    assert linear[0] < 0  # what the report used to print
    s = stats.summarize(values)
    logs = np.log(values)
    low, high = np.exp(sp.t.interval(0.95, 1, loc=np.mean(logs), scale=sp.sem(logs)))
    assert s.ci95_low is not None and s.ci95_low > 0
    assert (s.ci95_low, s.ci95_high) == pytest.approx((low, high))


def test_a_zero_value_gets_the_mean_interval_cut_at_zero() -> None:
    # bytes written by the background writer: 0 in two rounds of three.
    values = [0.0, 0.0, 8192.0]
    s = stats.summarize(values)
    low, high = sp.t.interval(0.95, 2, loc=np.mean(values), scale=sp.sem(values))
    assert low < 0
    assert s.ci_of == stats.MEAN and s.geo_mean is None
    assert (s.ci95_low, s.ci95_high) == pytest.approx((0.0, high))
    signed = stats.summarize([-1.0, 2.0, 5.0])  # a quantity seen below 0 keeps its interval
    low, high = sp.t.interval(0.95, 2, loc=2.0, scale=sp.sem([-1.0, 2.0, 5.0]))
    assert (signed.ci95_low, signed.ci95_high) == pytest.approx((low, high))


def test_summarize_flags_noise_with_advice() -> None:
    s = stats.summarize([100.0, 130.0, 80.0, 115.0])
    assert s.cv is not None and s.cv > stats.NOISY_CV
    assert s.noisy
    assert "noisy" in s.advice and "rounds" in s.advice


def test_summarize_degenerate_inputs() -> None:
    one = stats.summarize([42.0])
    assert one.n == 1 and one.mean == 42.0 and one.stdev is None and one.ci95_low is None
    assert one.cv is None and not one.noisy and "one value" in one.advice
    flat = stats.summarize([5.0, 5.0, 5.0])
    assert flat.stdev == 0 and flat.cv == 0
    assert (flat.ci95_low, flat.ci95_high) == pytest.approx((5.0, 5.0))
    zero_mean = stats.summarize([-1.0, 1.0])
    assert zero_mean.cv is None and not zero_mean.noisy
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.summarize([1.0, float("nan")])


def test_compare_paired_against_constants_and_scipy() -> None:
    c = stats.compare_paired(REF, OTHER)
    # R: a <- c(1021.3, 998.7, 1043.2, 1010.5, 987.9); b <- c(1102.4, 1060.1, 1121.8, 1079.3,
    # 1070.2); t.test(log(b / a)) -> t = 19.368, df = 4, p-value = 4.189e-05,
    # exp(conf.int) = [1.062638, 1.084466], exp(mean) = 1.073497 (scipy 1.17.1 agrees).
    assert c.n_pairs == 5
    assert c.p_value == pytest.approx(4.18895e-05, rel=1e-4)
    assert c.ci95_low == pytest.approx(1.062638, rel=1e-6)
    assert c.ci95_high == pytest.approx(1.084466, rel=1e-6)
    assert c.scale == stats.RATIO
    assert c.ratio == pytest.approx(1.073497, rel=1e-6)
    assert c.verdict == stats.FASTER
    assert c.gain_pct == pytest.approx((1.073497 - 1) * 100, rel=1e-5)
    logs = np.log(np.array(list(OTHER.values())) / np.array(list(REF.values())))
    oracle = sp.ttest_1samp(logs, 0.0)
    assert c.p_value == pytest.approx(oracle.pvalue, rel=1e-9)
    ci = oracle.confidence_interval(0.95)
    assert (c.ci95_low, c.ci95_high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    assert c.ci_half_width_pct == pytest.approx(
        (math.exp(ci.high) - math.exp(ci.low)) / 2 / c.ratio * 100  # type: ignore[operator]
    )
    rel = sp.ttest_rel(np.log(list(OTHER.values())), np.log(list(REF.values())))
    assert c.p_value == pytest.approx(rel.pvalue, rel=1e-9)


def test_compare_paired_directions_and_latency() -> None:
    slower = stats.compare_paired(OTHER, REF)
    assert slower.verdict == stats.SLOWER
    assert slower.ratio is not None and slower.ratio < 1
    # For a lower-is-better metric (latency) a ratio above 1 is slower.
    lat = stats.compare_paired(REF, OTHER, higher_is_better=False)
    assert lat.verdict == stats.SLOWER


def test_compare_paired_no_difference_when_ci_straddles_one() -> None:
    ref = {1: 100.0, 2: 110.0, 3: 95.0, 4: 105.0}
    other = {1: 104.0, 2: 106.0, 3: 97.0, 4: 103.0}
    c = stats.compare_paired(ref, other)
    assert c.ci95_low is not None and c.ci95_high is not None
    assert c.ci95_low < 1 < c.ci95_high
    assert c.p_value is not None and c.p_value > 0.05
    assert c.verdict == stats.UNDECIDED  # was NO_DIFFERENCE: the CI also holds +-2 %


def test_compare_paired_uses_only_common_rounds() -> None:
    ref = dict(REF)
    other = dict(OTHER)
    other[9] = 5000.0  # no reference run in round 9
    del ref[3]
    c = stats.compare_paired(ref, other)
    assert c.n_pairs == 4
    expected = sp.ttest_1samp([math.log(OTHER[r] / REF[r]) for r in (1, 2, 4, 5)], 0.0)
    assert c.p_value == pytest.approx(expected.pvalue)


def test_the_gain_is_the_centre_of_its_own_interval() -> None:
    # One wild round: mean/mean says +13.4 %, the per-round ratios say about -2 %.
    ref = dict(enumerate([100.0] * 9 + [1000.0], start=1))
    other = dict(enumerate([95.0] * 9 + [1300.0], start=1))
    assert sum(other.values()) / sum(ref.values()) == pytest.approx(1.1342, abs=1e-4)
    c = stats.compare_paired(ref, other)
    logs = np.log(np.array(list(other.values())) / np.array(list(ref.values())))
    oracle = sp.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    assert c.ratio == pytest.approx(math.exp(np.mean(logs)))
    assert c.gain_pct == pytest.approx((math.exp(np.mean(logs)) - 1) * 100)
    assert (c.ci95_low, c.ci95_high) == pytest.approx((math.exp(oracle.low), math.exp(oracle.high)))
    assert c.ci95_low is not None and c.ci95_high is not None and c.gain_pct is not None
    assert (c.ci95_low - 1) * 100 <= c.gain_pct <= (c.ci95_high - 1) * 100
    assert c.gain_pct == pytest.approx(-1.973, abs=1e-3)


def test_zero_variance_is_undetermined_not_p_zero() -> None:
    double = stats.compare_paired({1: 100.0, 2: 200.0}, {1: 200.0, 2: 400.0})
    assert double.verdict == stats.UNDETERMINED and double.p_value is None
    assert double.ratio == pytest.approx(2.0) and double.ci95_low is None
    assert double.ci_half_width_pct is None and "zero variance" in double.note
    same = stats.compare_paired({1: 100.0, 2: 200.0}, {1: 100.0, 2: 200.0})
    assert same.verdict == stats.UNDETERMINED and same.p_value is None
    # 110/100 and 121/110 differ in the last bit: still the same ratio, still undetermined
    tenth = stats.compare_paired({1: 100.0, 2: 110.0, 3: 90.0}, {1: 110.0, 2: 121.0, 3: 99.0})
    assert tenth.verdict == stats.UNDETERMINED


def test_a_zero_reference_is_compared_as_a_difference_over_every_round() -> None:
    # bgwriter bytes per transaction: the reference wrote nothing in round 1.
    ref = {1: 0.0, 2: 4096.0, 3: 8192.0, 4: 2048.0}
    other = {1: 1024.0, 2: 8192.0, 3: 12288.0, 4: 4096.0}
    c = stats.compare_paired(ref, other, higher_is_better=False)
    assert c.n_pairs == 4 and c.scale == stats.DIFFERENCE
    assert c.ratio is None and c.gain_pct is None
    diffs = [other[r] - ref[r] for r in ref]
    assert c.difference == pytest.approx(np.mean(diffs))
    oracle = sp.ttest_rel(list(other.values()), list(ref.values()))
    assert c.p_value == pytest.approx(oracle.pvalue, rel=1e-9)
    ci = oracle.confidence_interval(0.95)
    assert (c.ci95_low, c.ci95_high) == pytest.approx((ci.low, ci.high))
    assert "no ratio: the reference is 0 in rounds [1]" in c.note
    expected = {stats.SLOWER} if ci.low > 0 else {stats.EQUAL, stats.UNDECIDED}
    assert c.verdict in expected
    nothing = stats.compare_paired({1: 0.0, 2: 0.0}, {1: 0.0, 2: 0.0})
    assert nothing.verdict == stats.UNDETERMINED and "both are 0" in nothing.note
    assert nothing.n_pairs == 2 and nothing.difference == 0.0


def test_compare_paired_degenerate_cases() -> None:
    none = stats.compare_paired({}, {1: 3.0})
    assert none.n_pairs == 0 and none.verdict == stats.TOO_FEW and none.ratio is None
    one = stats.compare_paired({1: 100.0}, {1: 120.0})
    assert one.n_pairs == 1 and one.verdict == stats.TOO_FEW
    assert one.ratio == pytest.approx(1.2) and one.ci95_low is None and one.p_value is None
    assert one.ci_half_width_pct is None and "at least 2" in one.note
    zero = stats.compare_paired({1: 100.0, 2: 0.0, 3: 90.0}, {1: 110.0, 2: 50.0, 3: 99.0})
    assert zero.n_pairs == 3 and zero.scale == stats.DIFFERENCE and "rounds [2]" in zero.note


def _aa_trial(rng: random.Random, rounds: int, noise: float, effect: float) -> str:
    """One experiment: per-round drift shared by both variants plus independent noise."""
    ref: dict[int, float] = {}
    other: dict[int, float] = {}
    for r in range(1, rounds + 1):
        drift = rng.gauss(1.0, 0.08)  # the shared machine's mood in this round
        ref[r] = 1000 * drift * rng.gauss(1.0, noise)
        other[r] = 1000 * effect * drift * rng.gauss(1.0, noise)
    return stats.compare_paired(ref, other).verdict


@pytest.mark.parametrize("rounds,noise", [(5, 0.10), (10, 0.15)])
def test_aa_false_positive_rate_is_at_most_five_percent(rounds: int, noise: float) -> None:
    seeds = 1000
    called = sum(
        _aa_trial(random.Random(seed), rounds, noise, 1.0) in (stats.FASTER, stats.SLOWER)
        for seed in range(seeds)
    )
    # Expected 5 %; the binomial stdev over 1000 seeds is 0.7 %, so allow 2 points.
    assert called / seeds <= 0.07, f"A/A called different in {called} of {seeds} seeds"


def test_real_difference_is_detected_in_most_seeds() -> None:
    # The same machinery must not be blind: +25 % with 10 % noise over 10 rounds.
    seeds = 300
    found = sum(
        _aa_trial(random.Random(seed), 10, 0.10, 1.25) == stats.FASTER for seed in range(seeds)
    )
    assert found / seeds >= 0.9


def test_stdev_is_statistics_stdev_to_the_last_bit() -> None:
    """stats.stdev (exact integer sums) gives the float statistics.stdev gives (exact
    fractions), for values of any size and spread; others go to statistics itself."""
    rng = random.Random(5)
    for trial in range(3000):
        n = rng.randint(2, 60)
        xs = [
            [rng.gauss(1000, 50) for _ in range(n)],
            [rng.gauss(0, 0.05) for _ in range(n)],
            [math.ldexp(rng.random(), rng.randint(-1000, 1000)) for _ in range(n)],
            [float(rng.randint(0, 3)) for _ in range(n)],
            [-rng.choice([0.1, 0.2, 0.3]) for _ in range(n)],
        ][trial % 5]
        assert stats.stdev(xs) == statistics.stdev(xs), xs
    assert stats.stdev([1, 2, 4]) == statistics.stdev([1, 2, 4])  # ints: statistics' own
    assert stats.stdev([5.0, 5.0]) == 0.0
    with pytest.raises(statistics.StatisticsError):
        stats.stdev([1.0])

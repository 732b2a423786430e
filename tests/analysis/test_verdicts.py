"""Verdicts that decide (issue 30): faster, slower, equal within ±X % (TOST at 5 %) and
undecided with the rounds that would decide it; TOST checked against statsmodels, the
rounds against simulations with a fixed seed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp
from statsmodels.stats.weightstats import ttost_paired

from blocklab.analysis import equivalence, stats
from blocklab.analysis.first_screen import undecided_reason, verdict_sentence
from blocklab.analysis.metrics import compare, metric_info, verdict_text
from blocklab.errors import UserError
from blocklab.experiment_file import load

TPS = metric_info("tps")
LOW2, HIGH2 = math.log(0.98), math.log(1.02)


def _pair(ratios: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    ref = {r: 1000.0 + 37 * r for r in range(len(ratios))}
    return ref, {r: ref[r] * q for r, q in enumerate(ratios)}


@pytest.mark.parametrize("seed", range(6))
def test_tost_p_is_statsmodels_ttost_paired_on_the_log_values(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(7.0, 0.2, 6 + seed))
    b = a * np.exp(rng.normal(0.004 * seed, 0.01 + 0.003 * seed, a.size))
    oracle, _lower, _upper = ttost_paired(np.log(b), np.log(a), LOW2, HIGH2)
    assert stats.tost_p(list(np.log(b / a)), LOW2, HIGH2) == pytest.approx(oracle, rel=1e-9)
    c = stats.compare_paired(dict(enumerate(a)), dict(enumerate(b)))
    assert c.tost_p == pytest.approx(oracle, rel=1e-9)
    # TOST at 5 % passes exactly when the 90 % t interval lies inside the bounds
    ci90 = sp.ttest_1samp(np.log(b / a), 0).confidence_interval(0.90)
    assert c.equivalent == (LOW2 < ci90.low and ci90.high < HIGH2)


def test_the_four_words_on_constructed_cases() -> None:
    faster = stats.compare_paired(*_pair([1.10, 1.12, 1.09, 1.11, 1.10]))
    slower = stats.compare_paired(*_pair([0.90, 0.88, 0.91, 0.89, 0.90]))
    equal = stats.compare_paired(*_pair([1.002, 0.997, 1.004, 0.995, 1.001, 0.999]))
    undecided = stats.compare_paired(*_pair([1.10, 0.95, 1.08, 0.97, 1.02]))
    assert [c.verdict for c in (faster, slower, equal, undecided)] == [
        stats.FASTER,
        stats.SLOWER,
        stats.EQUAL,
        stats.UNDECIDED,
    ]
    assert verdict_text(equal, TPS) == "equal within ±2 %"
    assert verdict_sentence(faster, TPS).startswith("faster by 10.4 % (+9.0 to +11.8)")
    assert verdict_sentence(slower, TPS).startswith("slower by 10.4 % (-11.8 to -9.0)")
    assert verdict_sentence(equal, TPS).startswith("equal within ±2 %: -0.0 % (")
    latency = stats.compare_paired(*_pair([1.10, 1.12, 1.09, 1.11, 1.10]), higher_is_better=False)
    assert verdict_sentence(latency, metric_info("latency_avg_ms")).startswith("slower by 10.")
    wider = stats.compare_paired(*_pair([1.10, 0.95, 1.08, 0.97, 1.02]), equivalence_pct=20)
    assert wider.verdict == stats.EQUAL and verdict_text(wider, TPS) == "equal within ±20 %"


def test_a_tiny_significant_change_inside_the_margin_stays_faster_and_says_within() -> None:
    c = stats.compare_paired(*_pair([1.008, 1.009, 1.007, 1.008, 1.009, 1.007, 1.008]))
    assert c.verdict == stats.FASTER and c.equivalent
    assert verdict_text(c, TPS) == "faster, within ±2 %"
    assert verdict_sentence(c, TPS).startswith("faster by 0.8 % (+0.7 to +0.9), within ±2 %")


def test_undecided_says_the_largest_difference_and_the_rounds_that_decide() -> None:
    c = stats.compare_paired(*_pair([1.10, 0.95, 1.08, 0.97, 1.02]))
    assert c.ci95_high is not None and c.sd is not None
    rounds = equivalence.rounds_to_decide(c.sd, 2.0)
    assert rounds is not None and rounds > c.n_pairs
    far = f"{(c.ci95_high - 1) * 100:+.1f} %"  # the bound farther from no change
    assert undecided_reason(c, TPS) == (
        f"cannot rule out a difference of up to {far}; about {rounds} rounds would decide "
        f"it (5 so far)"
    )
    one = stats.compare_paired({1: 100.0}, {1: 120.0})
    assert verdict_sentence(one, TPS) == "cannot tell with fewer than 2 rounds"


def test_equal_on_the_difference_scale_is_within_x_percent_of_the_reference_mean() -> None:
    ref = {1: 0.0, 2: 1000.0, 3: 1000.0, 4: 1000.0, 5: 1000.0}
    other = {1: 1.0, 2: 1001.0, 3: 999.0, 4: 1000.5, 5: 1000.0}
    c = stats.compare_paired(ref, other)
    assert c.scale == stats.DIFFERENCE and c.verdict == stats.EQUAL  # ±16 around 800
    apart = stats.compare_paired(ref, {1: 90.0, 2: 1100.0, 3: 1000.0, 4: 950.0, 5: 1150.0})
    assert apart.verdict == stats.UNDECIDED
    assert "cannot rule out a difference of up to +" in undecided_reason(apart, TPS)


def test_tost_power_matches_a_simulation() -> None:
    rng = np.random.default_rng(30)
    for sigma, n in ((0.02, 11), (0.01, 4), (0.05, 40)):
        x = rng.normal(0.0, sigma, (20_000, n))
        half = sp.t.ppf(0.95, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
        mean = x.mean(axis=1)
        simulated = np.mean((mean - half > LOW2) & (mean + half < HIGH2))
        assert equivalence.tost_power(sigma, n, 2.0) == pytest.approx(simulated, abs=0.012)
    n = equivalence.rounds_to_show_equal(0.02, 2.0)
    assert n == 11  # 0.85 at 11 rounds, 0.75 at 10 (simulated as above)
    assert equivalence.tost_power(0.02, n - 1, 2.0) < 0.8 <= equivalence.tost_power(0.02, n, 2.0)


@pytest.mark.parametrize("true_pct", [0.0, 1.0, 2.0, 4.0])
def test_the_rounds_to_decide_decide_whatever_the_truth(true_pct: float) -> None:
    """At rounds_to_decide, at least 80 % of experiments end faster, slower or equal,
    whatever the true change (the argument in blocklab.analysis.equivalence)."""
    sigma = 0.02
    n = equivalence.rounds_to_decide(sigma, 2.0)
    assert n is not None
    rng = np.random.default_rng(int(true_pct * 10))
    x = rng.normal(math.log1p(true_pct / 100), sigma, (4000, n))
    mean, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
    h95 = sp.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    h90 = sp.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    significant = np.abs(mean) > h95
    equal = (mean - h90 > LOW2) & (mean + h90 < HIGH2)
    assert np.mean(significant | equal) >= 0.8


def _experiment_file(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "x.toml"
    path.write_text(
        f'[experiment]\nname = "eq"\nrounds = 3\nreference = "bs=8k"\n{line}\n'
        "[matrix]\nblock_size = [4, 8]\n"
    )
    return path


def test_the_experiment_names_its_equivalence_margin(tmp_path: Path) -> None:
    exp = load(_experiment_file(tmp_path, "equivalence = 5"))
    assert exp.equivalence_pct == 5.0 and exp.to_json()["equivalence_pct"] == 5.0
    plain = load(_experiment_file(tmp_path, ""))
    assert plain.equivalence_pct is None and "equivalence_pct" not in plain.to_json()
    for bad in ("0", "100", "-1", '"two"', "true"):
        with pytest.raises(UserError, match=r"experiment\.equivalence"):
            load(_experiment_file(tmp_path, f"equivalence = {bad}"))
    with pytest.raises(UserError, match="equivalence"):  # the allowed keys name it
        load(_experiment_file(tmp_path, "equivalent = 2"))


def test_plan_prints_the_rounds_that_show_equal_within_x() -> None:
    from rich.console import Console

    from blocklab.analysis import precision
    from blocklab.analysis.noise import NoiseEstimate
    from blocklab.commands.plan import render_precision
    from blocklab.execution import plan
    from blocklab.experiment_file import demo

    sigma = 0.02
    found = NoiseEstimate(precision.Noise(sigma, 11), "pilot", "paired", 12)
    exp = demo(rounds=3).model_copy(update={"equivalence_pct": 2.0})
    out = Console(record=True, width=400)
    render_precision(plan.describe(exp), out, found, until_ci=None)
    text = out.export_text()
    assert (
        "equal within ±2 % ([experiment] equivalence): 11 rounds show it with 80 % probability "
        "if the variants are truly equal; with 22 rounds any outcome is a verdict" in text
    )


def test_an_equal_verdict_shows_the_90_percent_interval_it_was_judged_on() -> None:
    """The demo's third fresh run: "equal within ±3 %" with a 95 % CI of -3.3 to +2.9.
    The sentence names the 90 % interval (scipy's t interval on the log ratios) that lies
    inside ±3 %, so the verdict does not look contradicted by its own 95 % interval."""
    ratios = [0.9515, 1.0421, 1.0097, 1.0036, 0.9990, 0.9815]  # its six rounds' 4k/8k
    ref, other = _pair(ratios)
    c = stats.compare_paired(ref, other, equivalence_pct=3)
    assert c.verdict == stats.EQUAL
    assert c.ci95_low is not None and c.ci95_low < 0.97  # the 95 % interval reaches past -3 %
    logs = np.log(ratios)
    oracle = sp.t.interval(0.90, len(logs) - 1, loc=logs.mean(), scale=sp.sem(logs))
    interval = stats.tost_interval(c)
    assert interval is not None
    assert interval == pytest.approx(tuple(np.exp(oracle)), rel=1e-9)
    assert 0.97 < interval[0] < interval[1] < 1.03
    low, high = ((x - 1) * 100 for x in np.exp(oracle))
    sentence = verdict_sentence(c, TPS)
    assert sentence.startswith("equal within ±3 %: -0.2 % (")
    assert sentence.endswith(f"; 90 % CI {low:+.1f} to {high:+.1f}, inside ±3 %")


def test_no_tost_interval_without_a_spread() -> None:
    one = stats.compare_paired({1: 100.0}, {1: 101.0})
    assert stats.tost_interval(one) is None


def test_a_share_is_equal_within_x_percentage_points_by_statsmodels_tost() -> None:
    """A HOT-update ratio near 87 %: "equal within ±2" means ±2 percentage points (0.02 of
    the fraction), not 2 % of 0.87 (±1.74 pp); TOST on the differences is statsmodels'."""
    hot = metric_info("hot_update_ratio")
    ref = {r: 0.866 + 0.004 * (r % 3) for r in range(6)}
    diffs = [0.0155, 0.0195, 0.0135, 0.0175, 0.0165, 0.0165]  # +1.65 pp on average
    other = {r: ref[r] + d for r, d in enumerate(diffs)}
    c = compare(ref, other, hot)
    a, b = np.array(list(ref.values())), np.array(list(other.values()))
    oracle, _lower, _upper = ttost_paired(b, a, -0.02, 0.02)
    assert c.tost_p == pytest.approx(oracle, rel=1e-9)
    assert c.equivalent and c.equivalence_unit == "pp"
    assert verdict_text(c, hot) == "better, within ±2 pp"
    # the same data judged against 2 % of the mean (±1.74 pp) would not pass
    pct_of_mean = stats.compare_paired(ref, other, difference=True)
    assert not pct_of_mean.equivalent and pct_of_mean.equivalence_unit == "%"
    flat = {r: ref[r] + d for r, d in enumerate([0.002, -0.001, 0.001, 0.0, -0.002, 0.001])}
    equal = compare(ref, flat, hot)
    assert equal.verdict == stats.EQUAL
    assert verdict_sentence(equal, hot).startswith("equal within ±2 pp: ")
    assert verdict_sentence(equal, hot).endswith(", inside ±2 pp")

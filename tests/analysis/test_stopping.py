"""--until-ci's stop (blocklab.analysis.stopping): coverage of the final 95 % interval.

Simulation with a fixed seed: per cell 2,000 experiments of per-round log ratios
N(log 1.02, sigma), true noise sigma of 2 to 8 % per round, targets of 2 to 5 %, first
stages of 3 and 5 rounds; each stops where the rule stops and its final t interval (all
its rounds) either covers log 1.02 or not. Beside the hit rate, the coverage given the
rounds' stdev, 2 Phi(t s / sigma) - 1, averaged: exact, because the stop depends on the
log ratios only through their deviations from the mean (the stdevs), which for normal
values are independent of the mean, and with a smaller simulation error than hits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from blocklab.analysis import stopping

EXPERIMENTS = 2000
TRUE_LOG = math.log(1.02)
CAP = 400  # far above what the cells plan (Stein's N reaches about 300 at 8 % for ±2 %)


def _paths(rng: np.random.Generator, sigma: float) -> np.ndarray:
    return rng.normal(TRUE_LOG, sigma, (EXPERIMENTS, CAP))


def _final(x: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, stdev and t half-width of each experiment's first stop[i] values."""
    n = np.arange(1, CAP + 1)
    mask = n[None, :] <= stop[:, None]
    mean = (x * mask).sum(1) / stop
    sd = np.sqrt((((x - mean[:, None]) * mask) ** 2).sum(1) / (stop - 1))
    return mean, sd, st.t.ppf(0.975, stop - 1) * sd / np.sqrt(stop)


def _coverage(x: np.ndarray, stop: np.ndarray, sigma: float) -> tuple[float, float]:
    """(share of final intervals covering the truth, the exact coverage given the stdevs)."""
    mean, sd, half = _final(x, stop)
    hits = float(np.mean(np.abs(mean - TRUE_LOG) <= half))
    exact = float(np.mean(2 * st.norm.cdf(st.t.ppf(0.975, stop - 1) * sd / sigma) - 1))
    return hits, exact


def _stein_stops(x: np.ndarray, first: int, target_pct: float) -> np.ndarray:
    s0 = x[:, :first].std(axis=1, ddof=1)
    return np.minimum(stopping.planned_rounds_array(s0, first, target_pct), CAP)


def _first_narrow_stops(x: np.ndarray, first: int, target_pct: float) -> np.ndarray:
    """The former rule: the first round >= first whose interval is within the target."""
    n = np.arange(1, CAP + 1)
    csum, csq = np.cumsum(x, 1), np.cumsum(x * x, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(np.maximum(csq - csum**2 / n, 0) / (n - 1))
        half = st.t.ppf(0.975, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    narrow = (half <= math.asinh(target_pct / 100)) & (n >= first)
    narrow[:, -1] = True
    return np.argmax(narrow, axis=1) + 1


CELLS = [(s, t, m) for s in (0.02, 0.035, 0.05, 0.08) for t in (2.0, 3.0, 5.0) for m in (3, 5)]


def test_the_final_interval_keeps_its_coverage() -> None:
    rng = np.random.default_rng(2026)
    worst = 1.0
    for sigma, target, first in CELLS:
        x = _paths(rng, sigma)
        hits, exact = _coverage(x, _stein_stops(x, first, target), sigma)
        worst = min(worst, exact)
        assert exact >= 0.94, (sigma, target, first, exact)
        # the hit rate carries a simulation error of 0.005 (binomial, 2,000 experiments)
        assert hits >= 0.94 - 2 * math.sqrt(0.95 * 0.05 / EXPERIMENTS), (sigma, target, first)
    assert worst < 0.95  # the floor keeps it above 0.94; it does not make it exact


def test_the_former_rule_lowered_the_coverage() -> None:
    """The same simulation catches the stop at the first narrow interval: 0.90 here."""
    rng = np.random.default_rng(7)
    x = _paths(rng, 0.05)
    hits, exact = _coverage(x, _first_narrow_stops(x, 3, 5.0), 0.05)
    assert exact < 0.93 and hits < 0.94


def test_the_loop_decision_stops_where_the_simulation_does() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(TRUE_LOG, 0.05, (40, CAP))
    stops = _stein_stops(x, 3, 5.0)
    for row, n in zip(x, stops, strict=True):
        ratios = [list(row[: n - 1])]
        before = stopping.decide(ratios, 9.0, 5.0, first=3, max_rounds=CAP)
        assert not before.stop and before.rounds_planned == n
        at = stopping.decide([list(row[:n])], 4.0, 5.0, first=3, max_rounds=CAP)
        assert at.stop and f"the {n} rounds planned from the first 3" in at.reason
        assert "widest CI half-width 4.00 % <= 5 %" in at.reason


def test_first_stage_cap_and_several_comparisons() -> None:
    assert stopping.first_stage(2) == 3 and stopping.first_stage(6) == 6
    first = stopping.decide([[0.01, 0.02]], None, 5.0, first=3, max_rounds=30)
    assert not first.stop and first.rounds_planned is None and "first stage" in first.reason
    noisy, quiet = [0.1, -0.1, 0.12], [0.01, 0.0, 0.01]
    both = stopping.planned_rounds([quiet, noisy], 3, 5.0)
    assert (
        both == stopping.planned_rounds([noisy], 3, 5.0) > stopping.planned_rounds([quiet], 3, 5.0)
    )
    assert stopping.planned_rounds([quiet], 3, 5.0) == stopping.floor(3) == 15
    capped = stopping.decide([noisy], 20.0, 5.0, first=3, max_rounds=3)
    assert capped.stop and capped.reason.startswith("max rounds reached (3); the first 3")
    assert "20.00 % > 5 %" in capped.reason
    s = float(np.std(noisy, ddof=1))
    assert both == math.ceil((st.t.ppf(0.975, 2) * s / math.asinh(0.05)) ** 2)  # Stein's N
    assert stopping.floor(5) == 17 and stopping.floor(8) == 24


def test_a_first_stage_below_two_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 rounds"):
        stopping.planned_rounds_array([0.05], 1, 5.0)

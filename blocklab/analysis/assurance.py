"""Plans that keep their promise: rounds that reach a CI half-width with a stated
probability (assurance), and rounds that detect an effect with a stated power.

blocklab.analysis.precision.rounds_needed asks for the *expected* half-width to reach the
target; with the rounds it gives, about half of the experiments end wider than promised,
because the sample stdev s of n per-round log ratios scatters around sigma:
s^2 ~ sigma^2 chi2(n-1) / (n-1). The interval's log half-width is t(0.975, n-1) s / sqrt(n),
so it is <= h with probability `assurance` exactly when

    t(0.975, n-1) * sigma * sqrt(chi2_q(assurance, n-1) / (n-1)) / sqrt(n) <= h,

chi2_q being the chi-square quantile. `rounds_for_assurance` is the fewest such n.

`rounds_for_power` answers the other question a target invites: the fewest rounds at which
a two-sided paired t-test (alpha 0.05) detects a true change of the same size with power
0.8, from the noncentral t distribution (precision.power).

Pure: numbers in, numbers or frozen dataclasses out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special as _special

from blocklab.analysis import precision
from blocklab.analysis.stats import CONFIDENCE, t_quantile

ASSURANCE = 0.8  # the probability that the planned rounds reach the target half-width


def assured_half_width_log(
    sigma_log: float, n: int, assurance: float = ASSURANCE, confidence: float = CONFIDENCE
) -> float:
    """The log half-width that n rounds stay within with probability `assurance`."""
    precision.check_rounds(n)
    _check_probability(assurance, "assurance")
    df = n - 1
    s_quantile = sigma_log * math.sqrt(float(_special.chdtri(df, 1 - assurance)) / df)
    return t_quantile(df, confidence) * s_quantile / math.sqrt(n)


def assured_half_width_pct(
    sigma_log: float, n: int, assurance: float = ASSURANCE, confidence: float = CONFIDENCE
) -> float:
    """The same as a half-width in % of the ratio (as stats reports it)."""
    return precision.pct_from_log(assured_half_width_log(sigma_log, n, assurance, confidence))


def rounds_for_assurance(
    sigma_log: float,
    target_half_width_pct: float,
    assurance: float = ASSURANCE,
    confidence: float = CONFIDENCE,
) -> int | None:
    """The fewest rounds whose CI half-width is <= the target with probability
    `assurance`; None beyond precision.MAX_ROUNDS."""
    precision.check_sigma(sigma_log)
    _check_target(target_half_width_pct)
    if sigma_log == 0:
        return precision.MIN_ROUNDS

    def reached(n: int) -> bool:
        hw = assured_half_width_pct(sigma_log, n, assurance, confidence)
        return hw <= target_half_width_pct

    return precision.fewest_rounds(reached)


def effect_log(effect_pct: float) -> float:
    """A change of +effect_pct % on the log scale, as the comparisons test it."""
    return math.log1p(effect_pct / 100)


def rounds_for_power(
    sigma_log: float,
    effect_pct: float,
    target_power: float = precision.POWER,
    alpha: float = precision.ALPHA,
) -> int | None:
    """The fewest rounds at which the two-sided paired t-test at `alpha` detects a true
    change of +effect_pct % with `target_power`; None beyond precision.MAX_ROUNDS."""
    precision.check_sigma(sigma_log)
    _check_target(effect_pct)
    _check_probability(target_power, "power")
    if sigma_log == 0:
        return precision.MIN_ROUNDS
    d = effect_log(effect_pct)
    return precision.fewest_rounds(
        lambda n: precision.power(d, sigma_log, n, alpha) >= target_power
    )


@dataclass(frozen=True)
class TargetPlan:
    """What a target of ±PCT % needs, three ways, for `blocklab plan` to print."""

    target_pct: float
    rounds_assured: int | None  # half-width <= target with probability ASSURANCE
    rounds_expected: int | None  # the expected half-width <= target (about 50 %)
    rounds_power: int | None  # a true change of target_pct % detected with power 0.8
    seconds_assured: float | None


def plan_target(sigma_log: float, target_pct: float, seconds_per_round: float) -> TargetPlan:
    assured = rounds_for_assurance(sigma_log, target_pct)
    return TargetPlan(
        target_pct=target_pct,
        rounds_assured=assured,
        rounds_expected=precision.rounds_needed(sigma_log, target_pct),
        rounds_power=rounds_for_power(sigma_log, target_pct),
        seconds_assured=None if assured is None else assured * seconds_per_round,
    )


def _check_target(pct: float) -> None:
    if not pct > 0 or not math.isfinite(pct):
        raise ValueError(f"the target must be a finite percentage > 0, got {pct}")


def _check_probability(p: float, what: str) -> None:
    if not 0 < p < 1:
        raise ValueError(f"the {what} must be between 0 and 1, got {p}")

"""Plans that keep their promise: rounds that reach a CI half-width with a stated
probability (assurance), and rounds that detect an effect with a stated power.

blocklab.analysis.precision.rounds_needed asks for the *expected* half-width to reach the
target; with the rounds it gives, about half of the experiments end wider than promised,
because the sample stdev s of n per-round log ratios scatters around sigma:
s^2 ~ sigma^2 chi2(n-1) / (n-1). The interval's log half-width is t(0.975, n-1) s / sqrt(n),
so it is <= h with probability `assurance` exactly when

    t(0.975, n-1) * sigma * sqrt(chi2_q(assurance, n-1) / (n-1)) / sqrt(n) <= h,

chi2_q being the chi-square quantile. `rounds_for_assurance` is the fewest such n.

That treats sigma as known. A plan knows only s_p, the stdev of a pilot (or of stored
rounds) with df_p degrees of freedom, and from a 3-round pilot (df 2) sigma may be twice
s_p: the plan above then reached its target in 56 % of simulated experiments, with a
10-round pilot in 73 %. With `noise_df` the plan counts that uncertainty: the fresh
experiment's s and the pilot's are independent, so s^2 / s_p^2 ~ F(n-1, df_p) whatever
sigma is, and the half-width is <= h with probability `assurance` when

    t(0.975, n-1) * s_p * sqrt(F_q(assurance, n-1, df_p)) / sqrt(n) <= h.

As df_p grows F_q(n-1, df_p) tends to chi2_q(n-1) / (n-1), the known-sigma rule. Simulated
(tests/analysis/test_assurance.py): pilots of 3, 5 and 10 rounds, the plan's rounds, then
a fresh experiment of that many rounds: the target is reached in at least 80 %. The pilot's
honest df is its rounds - 1 (blocklab.analysis.noise.NoiseEstimate.honest_df), not the df
pooled over comparisons that share a reference.

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
    sigma_log: float,
    n: int,
    assurance: float = ASSURANCE,
    confidence: float = CONFIDENCE,
    *,
    noise_df: int | None = None,
) -> float:
    """The log half-width that n rounds stay within with probability `assurance`, for a
    known noise sigma_log (noise_df None) or one estimated with `noise_df` df."""
    precision.check_rounds(n)
    _check_probability(assurance, "assurance")
    df = n - 1
    if noise_df is None:
        ratio = float(_special.chdtri(df, 1 - assurance)) / df
    else:
        if noise_df < 1:
            raise ValueError(f"the noise estimate needs at least 1 df, got {noise_df}")
        ratio = float(_special.fdtri(df, noise_df, assurance))
    return t_quantile(df, confidence) * sigma_log * math.sqrt(ratio) / math.sqrt(n)


def assured_half_width_pct(
    sigma_log: float,
    n: int,
    assurance: float = ASSURANCE,
    confidence: float = CONFIDENCE,
    *,
    noise_df: int | None = None,
) -> float:
    """The same as a half-width in % of the ratio (as stats reports it)."""
    h = assured_half_width_log(sigma_log, n, assurance, confidence, noise_df=noise_df)
    return precision.pct_from_log(h)


def sigma_upper_factor(noise_df: int, assurance: float = ASSURANCE) -> float:
    """How many times the estimate the true noise may be (one-sided upper bound at
    `assurance`, chi-square with noise_df df): 2.1 for a 3-round pilot at 80 %."""
    return math.sqrt(noise_df / float(_special.chdtri(noise_df, assurance)))


def rounds_for_assurance(
    sigma_log: float,
    target_half_width_pct: float,
    assurance: float = ASSURANCE,
    confidence: float = CONFIDENCE,
    *,
    noise_df: int | None = None,
) -> int | None:
    """The fewest rounds whose CI half-width is <= the target with probability
    `assurance` (counting the noise estimate's `noise_df` when given); None beyond
    precision.MAX_ROUNDS."""
    precision.check_sigma(sigma_log)
    _check_target(target_half_width_pct)
    if sigma_log == 0:
        return precision.MIN_ROUNDS

    def reached(n: int) -> bool:
        hw = assured_half_width_pct(sigma_log, n, assurance, confidence, noise_df=noise_df)
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
    noise_df: int | None  # the noise estimate's df it counts (None: taken as exact)
    rounds_if_exact: int | None  # the same, were the noise exactly known
    rounds_expected: int | None  # the expected half-width <= target (about 50 %)
    rounds_power: int | None  # a true change of target_pct % detected with power 0.8
    seconds_assured: float | None


def plan_target(
    sigma_log: float, target_pct: float, seconds_per_round: float, noise_df: int | None = None
) -> TargetPlan:
    assured = rounds_for_assurance(sigma_log, target_pct, noise_df=noise_df)
    return TargetPlan(
        target_pct=target_pct,
        rounds_assured=assured,
        noise_df=noise_df,
        rounds_if_exact=rounds_for_assurance(sigma_log, target_pct),
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

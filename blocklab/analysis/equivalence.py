"""Equal within ±X %: what it takes to show it, and what would decide an undecided verdict.

blocklab.analysis.stats calls two variants EQUAL when two one-sided t-tests (TOST) at 5 %
put the ratio inside [1 - X/100, 1 + X/100]: the 90 % interval of the mean log ratio
inside log(1 - X/100) .. log(1 + X/100). Two questions follow from the noise sigma (stdev
of the per-round log ratios):

- `rounds_to_show_equal`: if the variants were truly equal, the fewest rounds at which
  TOST passes with probability 0.8 (its power). The power integrates over the sample
  stdev s (s^2 ~ sigma^2 chi2(n-1) / (n-1)): given s, TOST passes when the mean lies
  within delta - t(0.95, n-1) s / sqrt(n) of both bounds, and the mean is normal.
- `rounds_to_decide`: the rounds at which any outcome decides. If the 95 % half-width h
  is at most log(1 + X/100) / 2, either the 95 % interval excludes no change (faster or
  slower), or the estimate lies within h of 0 and the 90 % interval, narrower than the
  95 % one, lies within 2h <= log(1 + X/100) of 0: inside the bounds (equal). The rounds
  reaching that h with 80 % probability come from blocklab.analysis.assurance.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math

from scipy import special

from blocklab.analysis import assurance, precision
from blocklab.analysis.stats import EQUIVALENCE_ALPHA, RATIO, equivalence_bounds, t_quantile

POWER = 0.8


def tost_power(
    sigma_log: float, n: int, equivalence_pct: float, alpha: float = EQUIVALENCE_ALPHA
) -> float:
    """The probability that TOST at `alpha` shows "equal within ±equivalence_pct %" after
    n rounds when the true ratio is 1 and the per-round log ratios have stdev sigma_log."""
    precision.check_rounds(n)
    precision.check_sigma(sigma_log)
    low, high = equivalence_bounds(equivalence_pct, RATIO, 1.0)
    if sigma_log == 0:
        return 1.0
    df = n - 1
    t = t_quantile(df, 1 - 2 * alpha)  # one-sided alpha: the (1 - 2 alpha) two-sided quantile
    se = sigma_log / math.sqrt(n)

    def passes_given(v: float) -> float:  # v ~ chi2(df); s = sigma sqrt(v / df)
        reach = t * se * math.sqrt(v / df)
        p = special.ndtr((high - reach) / se) + special.ndtr((-low - reach) / se) - 1
        return max(float(p), 0.0) * _chi2_pdf(v, df)

    # TOST cannot pass once t s / sqrt(n) exceeds the nearer bound: v beyond that is 0
    v_max = df * (min(high, -low) / (t * se)) ** 2
    from scipy import integrate  # 0.5 s to import (scipy.optimize with it): only here

    value, _err = integrate.quad(passes_given, 0, v_max, limit=200)
    return min(max(value, 0.0), 1.0)


def _chi2_pdf(v: float, df: int) -> float:
    if v <= 0:
        return 0.0
    log_pdf = (df / 2 - 1) * math.log(v) - v / 2 - (df / 2) * math.log(2) - special.gammaln(df / 2)
    return math.exp(log_pdf)


def rounds_to_show_equal(
    sigma_log: float, equivalence_pct: float, power: float = POWER
) -> int | None:
    """The fewest rounds at which truly equal variants are shown "equal within ±X %" with
    probability `power`; None beyond precision.MAX_ROUNDS."""
    precision.check_sigma(sigma_log)
    return precision.fewest_rounds(lambda n: tost_power(sigma_log, n, equivalence_pct) >= power)


def deciding_half_width_pct(equivalence_pct: float) -> float:
    """The 95 % half-width (in % of the ratio) at which every outcome is a decision."""
    return precision.pct_from_log(math.log1p(equivalence_pct / 100) / 2)


def rounds_to_decide(sigma_log: float, equivalence_pct: float) -> int | None:
    """The rounds at which faster, slower or equal within ±X % is decided, whatever the
    truth, with probability assurance.ASSURANCE; None beyond precision.MAX_ROUNDS."""
    target = deciding_half_width_pct(equivalence_pct)
    return assurance.rounds_for_assurance(sigma_log, target)

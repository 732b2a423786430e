"""Pure statistics: per-variant summaries and paired comparisons with the reference.

No I/O here: no subprocess, file or database code. Every function takes numbers and
returns frozen dataclasses; warnings are data (`noisy`, `advice`, `note`), never prints.

Comparisons are paired by round: each round runs every variant once, in a fresh random
order, so the per-round ratio other/reference cancels the drift that a shared machine
puts on both. The confidence interval and the p-value come from a one-sample t-test on
the per-round log ratios (equivalently a paired t-test on log values): the interval is
for the geometric-mean ratio, exp(mean(log ratio)) x exp(+-t * se).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import special as _special  # t distribution; lighter to import than scipy.stats

CONFIDENCE = 0.95
NOISY_CV = 0.10  # pyperf flags a stdev above 10 % of the mean; so do we
FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no difference detected"
TOO_FEW = "not enough paired rounds"
MIN_PAIRS = 2


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student t critical value, e.g. t_quantile(9) = 2.2622 for 95 %."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return float(_special.stdtrit(df, 0.5 + confidence / 2))


def two_sided_p(t_stat: float, df: int) -> float:
    return float(2 * _special.stdtr(df, -abs(t_stat)))


@dataclass(frozen=True)
class Summary:
    """One variant's values (e.g. tps of each round)."""

    n: int
    mean: float
    stdev: float | None  # sample stdev (n-1); None when n < 2
    min: float
    median: float
    max: float
    ci95_low: float | None  # 95 % CI of the mean via t; None when n < 2
    ci95_high: float | None
    cv: float | None  # stdev / mean; None when n < 2 or mean == 0
    noisy: bool
    advice: str  # empty unless noisy (or too few values to judge)

    @property
    def ci_half_width_pct(self) -> float | None:
        if self.ci95_low is None or self.ci95_high is None or self.mean == 0:
            return None
        return (self.ci95_high - self.ci95_low) / 2 / abs(self.mean) * 100


def noisy_advice(cv: float, threshold: float = NOISY_CV) -> str:
    return (
        f"stdev is {cv * 100:.1f} % of the mean (threshold {threshold * 100:.0f} %): the "
        "measurements are noisy. Run longer (duration) with a warmup, add rounds, or quiet "
        "the machine (other load, CPU frequency scaling) before trusting small differences."
    )


def summarize(values: Sequence[float], *, noisy_cv: float = NOISY_CV) -> Summary:
    """n, mean, stdev, min, median, max, 95 % CI of the mean (t), coefficient of variation."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("summarize() needs at least one value")
    if any(not math.isfinite(x) for x in xs):
        raise ValueError("summarize() got a value that is not finite")
    n = len(xs)
    mean = statistics.fmean(xs)
    lo, mid, hi = min(xs), statistics.median(xs), max(xs)
    if n < 2:
        advice = "one value: no spread or confidence interval; run more rounds"
        return Summary(
            n,
            mean,
            None,
            lo,
            mid,
            hi,
            ci95_low=None,
            ci95_high=None,
            cv=None,
            noisy=False,
            advice=advice,
        )
    sd = statistics.stdev(xs)
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    cv = sd / abs(mean) if mean != 0 else None
    noisy = cv is not None and cv > noisy_cv
    return Summary(
        n,
        mean,
        sd,
        lo,
        mid,
        hi,
        ci95_low=mean - half,
        ci95_high=mean + half,
        cv=cv,
        noisy=noisy,
        advice=noisy_advice(cv, noisy_cv) if noisy and cv is not None else "",
    )


@dataclass(frozen=True)
class Comparison:
    """A variant against the reference, over the rounds where both have a value."""

    n_pairs: int
    ratio: float | None  # mean(other) / mean(reference) over the paired rounds
    geo_ratio: float | None  # exp(mean of per-round log ratios): the CI's centre
    ci95_low: float | None  # 95 % CI of the ratio (from the log ratios, via t)
    ci95_high: float | None
    p_value: float | None  # paired t-test on log values (= one-sample t on log ratios)
    verdict: str  # FASTER, SLOWER, NO_DIFFERENCE or TOO_FEW
    ci_half_width_pct: float | None  # (high - low) / 2 / geo_ratio, in percent
    note: str = ""

    @property
    def gain_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1) * 100


def paired_rounds(
    ref: Mapping[int, float], other: Mapping[int, float]
) -> tuple[list[int], list[int]]:
    """Rounds with a positive value on both sides, and rounds dropped for a value <= 0."""
    common = sorted(set(ref) & set(other))
    kept = [r for r in common if ref[r] > 0 and other[r] > 0]
    dropped = [r for r in common if r not in kept]
    return kept, dropped


def compare_paired(
    ref: Mapping[int, float],
    other: Mapping[int, float],
    *,
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Compare `other` with `ref`, both round -> value. Unpaired rounds are ignored.

    The verdict is FASTER (SLOWER) when the whole CI of the ratio lies above (below) 1
    for a higher-is-better metric such as tps; NO_DIFFERENCE otherwise, which means
    "not detected at this precision", not "equal".
    """
    rounds, dropped = paired_rounds(ref, other)
    note = f"rounds {dropped} dropped: a value <= 0 has no log ratio" if dropped else ""
    n = len(rounds)
    if n == 0:
        return Comparison(0, None, None, None, None, None, TOO_FEW, None, note)
    a = [ref[r] for r in rounds]
    b = [other[r] for r in rounds]
    ratio = statistics.fmean(b) / statistics.fmean(a)
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    geo = math.exp(statistics.fmean(logs))
    if n < MIN_PAIRS:
        note = _join(note, f"{n} paired round: need at least {MIN_PAIRS} for a CI")
        return Comparison(n, ratio, geo, None, None, None, TOO_FEW, None, note)
    return _t_comparison(logs, ratio, geo, higher_is_better, confidence, note)


def _t_comparison(
    logs: list[float],
    ratio: float,
    geo: float,
    higher_is_better: bool,
    confidence: float,
    note: str,
) -> Comparison:
    n = len(logs)
    mean_log = statistics.fmean(logs)
    se = statistics.stdev(logs) / math.sqrt(n)
    if se == 0:
        return _zero_variance(n, ratio, geo, mean_log, higher_is_better, note)
    half_log = t_quantile(n - 1, confidence) * se
    low, high = math.exp(mean_log - half_log), math.exp(mean_log + half_log)
    p = two_sided_p(mean_log / se, n - 1)
    verdict = _verdict(low, high, higher_is_better)
    width = (high - low) / 2 / geo * 100
    return Comparison(n, ratio, geo, low, high, p, verdict, width, note)


def _zero_variance(
    n: int, ratio: float, geo: float, mean_log: float, higher_is_better: bool, note: str
) -> Comparison:
    """Every round gave exactly the same ratio: the t statistic is undefined."""
    note = _join(note, "the per-round ratio is identical in every round (zero variance)")
    if mean_log == 0:
        return Comparison(n, ratio, geo, geo, geo, 1.0, NO_DIFFERENCE, 0.0, note)
    verdict = _verdict(geo, geo, higher_is_better)
    return Comparison(n, ratio, geo, geo, geo, 0.0, verdict, 0.0, note)


def _verdict(low: float, high: float, higher_is_better: bool) -> str:
    if low > 1:
        return FASTER if higher_is_better else SLOWER
    if high < 1:
        return SLOWER if higher_is_better else FASTER
    return NO_DIFFERENCE


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b

"""Pure statistics: per-variant summaries and paired comparisons with the reference.

No I/O here: no subprocess, file or database code. Every function takes numbers and
returns frozen dataclasses; warnings are data (`noisy`, `advice`, `note`), never prints.

Comparisons are paired by round: each round runs every variant once, in a fresh random
order, so the per-round ratio other/reference cancels the drift that a shared machine
puts on both. The confidence interval and the p-value come from a one-sample t-test on
the per-round log ratios (equivalently a paired t-test on log values): the interval is
for the geometric-mean ratio, exp(mean(log ratio)) x exp(+-t * se), and that geometric
mean is the estimate printed beside it. When a round has a 0 on either side (bytes the
background writer never wrote) no ratio exists: the comparison is then the paired
difference other - reference in the metric's unit, never a ratio over fewer rounds.

The verdict has four words (`_verdict`): FASTER or SLOWER when the 95 % interval excludes
no change; EQUAL when two one-sided tests (TOST) at 5 % show the ratio inside
[1 - X/100, 1 + X/100] (X = `equivalence_pct`, the experiment's [experiment] equivalence;
the bounds are symmetric on the ratio scale, log(1 - X/100) .. log(1 + X/100) on the log
scale the test works on), which is the 90 % interval inside those bounds; else UNDECIDED:
the interval holds both no change and a change larger than X.

A variant's own interval is on the log scale when every value is positive (tps, bytes):
the t interval of mean(log x), exponentiated, is the interval of the geometric mean and
is never negative, however few the rounds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scipy import special as _special  # t distribution; lighter to import than scipy.stats

CONFIDENCE = 0.95
NOISY_CV = 0.10  # pyperf flags a stdev above 10 % of the mean; so do we
FASTER = "faster"
SLOWER = "slower"
EQUAL = "equal"  # shown as "equal within ±X %"
UNDECIDED = "undecided"
NO_DIFFERENCE = "no difference detected"  # the old word for EQUAL or UNDECIDED; no verdict now
EQUIVALENCE_PCT = 2.0  # X of "equal within ±X %" when the experiment names none
EQUIVALENCE_ALPHA = 0.05  # each one-sided test of TOST
TOO_FEW = "not enough paired rounds"
UNDETERMINED = "undetermined"  # zero variance: no t statistic
MIN_PAIRS = 2
RATIO = "ratio"  # a comparison of other / reference
DIFFERENCE = "difference"  # a comparison of other - reference, in the metric's unit
GEOMETRIC_MEAN = "geometric mean"  # what a Summary's interval is for
MEAN = "mean"
_ZERO_SPREAD = 1e-12  # a stdev this small relative to the mean is rounding, not spread


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student t critical value, e.g. t_quantile(9) = 2.2622 for 95 %."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return float(_special.stdtrit(df, 0.5 + confidence / 2))


def stdev(values: Sequence[float]) -> float:
    """statistics.stdev of finite floats, the same float to the last bit (the square root
    of the exact sample variance, correctly rounded) from Python integers: each float is
    an integer over a power of 2, so over the largest of those powers the sums are exact;
    statistics' own fractions cost about ten times as much. Others go to statistics."""
    if not all(type(x) is float for x in values) or not all(map(math.isfinite, values)):
        return statistics.stdev(values)
    ratios = list(map(float.as_integer_ratio, values))
    n = len(ratios)
    if n < 2:
        raise statistics.StatisticsError("stdev requires at least two data points")
    scale = max(den for _, den in ratios)
    ints = [num * (scale // den) for num, den in ratios]
    total = sum(ints)
    # the variance: (n * sum(x^2) - sum(x)^2) / (n (n - 1)), in units of 1 / scale^2
    return _sqrt_of_frac(n * sum(i * i for i in ints) - total * total, n * (n - 1) * scale * scale)


def _sqrt_of_frac(num: int, den: int) -> float:
    """sqrt(num / den) correctly rounded (num >= 0, den > 0): an integer square root with
    rounding to odd on 109 bits, then one rounding to a float (statistics does the same)."""
    q = (num.bit_length() - den.bit_length() - 109) // 2
    if q >= 0:
        a = math.isqrt(num // (den << 2 * q))
        return float((a | (a * a * (den << 2 * q) != num)) << q)
    a = math.isqrt((num << -2 * q) // den)
    return (a | (a * a * den != num << -2 * q)) / (1 << -q)


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
    ci95_low: float | None  # 95 % CI (of `ci_of`) via t; None when n < 2
    ci95_high: float | None
    cv: float | None  # stdev / mean; None when n < 2 or mean == 0
    noisy: bool
    advice: str  # empty unless noisy (or too few values to judge)
    ci_of: str = ""  # GEOMETRIC_MEAN (every value > 0), MEAN, or "" without an interval
    geo_mean: float | None = None  # None unless every value is positive

    @property
    def ci_half_width_pct(self) -> float | None:
        centre = self.geo_mean if self.ci_of == GEOMETRIC_MEAN else self.mean
        if self.ci95_low is None or self.ci95_high is None or not centre:
            return None
        return (self.ci95_high - self.ci95_low) / 2 / abs(centre) * 100


def noisy_advice(cv: float, threshold: float = NOISY_CV) -> str:
    return (
        f"stdev is {cv * 100:.1f} % of the mean (threshold {threshold * 100:.0f} %): the "
        "measurements are noisy. Run longer (duration) with a warmup, add rounds, or quiet "
        "the machine (other load, CPU frequency scaling) before trusting small differences."
    )


def summarize(
    values: Sequence[float], *, noisy_cv: float = NOISY_CV, at_most: float | None = None
) -> Summary:
    """n, mean, stdev, min, median, max, 95 % CI, coefficient of variation.

    The interval is of the geometric mean (t on the log values) when every value is
    positive; with a 0 among non-negative values, or for a bounded quantity (`at_most`,
    1 for a fraction), it is the t interval of the mean cut to the bounds (the mean of a
    quantity that cannot be negative is not below 0)."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("summarize() needs at least one value")
    if any(not math.isfinite(x) for x in xs):
        raise ValueError("summarize() got a value that is not finite")
    n = len(xs)
    mean = statistics.fmean(xs)
    lo, mid, hi = min(xs), statistics.median(xs), max(xs)
    geo = statistics.geometric_mean(xs) if lo > 0 else None
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
            geo_mean=geo,
        )
    sd = stdev(xs)
    ci_of, (ci_low, ci_high) = _value_interval(xs, at_most)
    cv = sd / abs(mean) if mean != 0 else None
    noisy = cv is not None and cv > noisy_cv
    return Summary(
        n,
        mean,
        sd,
        lo,
        mid,
        hi,
        ci95_low=ci_low,
        ci95_high=ci_high,
        cv=cv,
        noisy=noisy,
        advice=noisy_advice(cv, noisy_cv) if noisy and cv is not None else "",
        ci_of=ci_of,
        geo_mean=geo,
    )


def _value_interval(xs: list[float], at_most: float | None) -> tuple[str, tuple[float, float]]:
    """(what the interval is of, (low, high)) for n >= 2 values."""
    if min(xs) > 0 and at_most is None:
        centre, half = t_half([math.log(x) for x in xs], CONFIDENCE)
        return GEOMETRIC_MEAN, (math.exp(centre - half), math.exp(centre + half))
    centre, half = t_half(xs, CONFIDENCE)
    low, high = centre - half, centre + half
    low = max(low, 0.0) if min(xs) >= 0 else low
    return MEAN, (low, high if at_most is None else min(high, at_most))


def t_half(xs: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """(mean, half-width of its t interval) for n >= 2 values."""
    n = len(xs)
    return statistics.fmean(xs), t_quantile(n - 1, confidence) * stdev(xs) / math.sqrt(n)


@dataclass(frozen=True)
class Comparison:
    """A variant against the reference, over the rounds where both have a value.

    On the RATIO scale `estimate` is the geometric mean of the per-round ratios
    other/reference, the centre of its interval; on the DIFFERENCE scale (a 0 in some
    round, so no ratio exists) it is the mean of other - reference, in the metric's unit.
    """

    n_pairs: int
    scale: str  # RATIO or DIFFERENCE
    estimate: float | None  # the interval's centre; None without a paired round
    ci95_low: float | None  # 95 % CI on `scale` (t on the log ratios, or on the differences)
    ci95_high: float | None
    p_value: float | None  # paired t-test (on log values for a ratio)
    verdict: str  # FASTER, SLOWER, EQUAL, UNDECIDED, UNDETERMINED or TOO_FEW
    ci_half_width_pct: float | None  # half-width, % of the ratio or of the reference mean
    note: str = ""
    equivalence_pct: float = EQUIVALENCE_PCT  # X of "equal within ±X %"
    equivalent: bool = False  # TOST at 5 % passed: the 90 % CI inside ±X (may also be FASTER)
    tost_p: float | None = None  # the larger of the two one-sided p-values
    sd: float | None = None  # stdev of the per-round samples (log ratios, or differences)
    equivalence_unit: str = "%"  # "pp" when X is in percentage points (a share's margin)
    se: float | None = None  # standard error of the estimate on the test's scale
    df: int | None = None  # its degrees of freedom (n - 1, or n - 2 with a nuisance fitted)
    nuisance: float | None = None  # the fitted nuisance coefficient (paired_fit), if any
    sessions: int = 1  # the sessions whose levels its fit took out (a self-check's); 1: none

    @property
    def ratio(self) -> float | None:
        return self.estimate if self.scale == RATIO else None

    @property
    def gain_pct(self) -> float | None:
        """The ratio's estimate as a change in percent: the centre of the ratio's CI."""
        return None if self.ratio is None else (self.ratio - 1) * 100

    @property
    def difference(self) -> float | None:
        return self.estimate if self.scale == DIFFERENCE else None

    @property
    def up(self) -> bool:
        """True when the whole interval lies above "no change" (1 for a ratio, 0 else)."""
        return self.ci95_low is not None and self.ci95_low > _no_change(self.scale)


def rounds_text(n_rounds: int, sessions: int = 1) -> str:
    """'11 rounds', or '11 rounds in 2 sessions, fitted per session' for a check whose fit
    took out each session's level (Comparison.sessions)."""
    if sessions > 1:
        return f"{n_rounds} rounds in {sessions} sessions, fitted per session"
    return f"{n_rounds} rounds"


def _no_change(scale: str) -> float:
    return 1.0 if scale == RATIO else 0.0


def compare_paired(
    ref: Mapping[int, float],
    other: Mapping[int, float],
    *,
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
    equivalence_pct: float = EQUIVALENCE_PCT,
    difference: bool = False,  # the DIFFERENCE scale even if all > 0 (a share: points)
    margin: float | None = None,  # X as an absolute difference (a share: X pp), not % of a mean
    nuisance: Mapping[int, float] | None = None,  # round -> -1/+1 factor to fit (paired_fit)
) -> Comparison:
    """Compare `other` with `ref`, both round -> value. Unpaired rounds are ignored.

    The verdict is FASTER (SLOWER) when the whole CI lies above (below) no change for a
    higher-is-better metric such as tps; else EQUAL when TOST shows the change inside
    ±equivalence_pct (on the difference scale: ±that % of the reference's mean), else
    UNDECIDED; UNDETERMINED when every round gave exactly the same ratio (or
    difference), where a t-test has nothing to go on. Both faster and equal: `_verdict`.
    """
    rounds = sorted(set(ref) & set(other))
    if not rounds:
        return Comparison(0, RATIO, None, None, None, None, TOO_FEW, None, "no paired round")
    a = [ref[r] for r in rounds]
    b = [other[r] for r in rounds]
    note = _no_ratio_note(rounds, a, b)
    scale = DIFFERENCE if note or difference else RATIO
    samples = (
        [y - x for x, y in zip(a, b, strict=True)] if scale == DIFFERENCE else _log_ratios(a, b)
    )
    back = _back(scale)
    n = len(rounds)
    if n < MIN_PAIRS:
        note = _join(note, f"{n} paired round: need at least {MIN_PAIRS} for a CI")
        return Comparison(n, scale, back(statistics.fmean(samples)), *_NONE3, TOO_FEW, None, note)
    fit = paired_fit(samples, _column(rounds, nuisance))
    if fit.sd <= _ZERO_SPREAD * max(1.0, abs(fit.centre)):
        note = _join(note, _zero_variance_note(scale, a, b))
        return Comparison(n, scale, back(fit.centre), *_NONE3, UNDETERMINED, None, note)
    half = t_quantile(fit.df, confidence) * fit.se
    low, high = back(fit.centre - half), back(fit.centre + half)
    points = margin is not None and scale == DIFFERENCE  # X in a share's points
    bounds = (
        (-margin, margin)
        if margin is not None and points
        else equivalence_bounds(equivalence_pct, scale, statistics.fmean(a))
    )
    p_tost = _tost_p_fit(fit, *bounds)
    equivalent = p_tost < EQUIVALENCE_ALPHA
    verdict = _verdict(low, high, _no_change(scale), higher_is_better, equivalent)
    base = back(fit.centre) if scale == RATIO else statistics.fmean(a)
    width = (high - low) / 2 / base * 100 if base > 0 else None
    p = two_sided_p(fit.centre / fit.se, fit.df)
    return Comparison(
        *(n, scale, back(fit.centre), low, high, p, verdict, width, note),
        *(equivalence_pct, equivalent, p_tost, fit.sd, "pp" if points else "%"),
        *(fit.se, fit.df, fit.nuisance),
    )


_NONE3 = (None, None, None)


def _column(rounds: Sequence[int], nuisance: Mapping[int, float] | None) -> list[float] | None:
    if nuisance is None or any(r not in nuisance for r in rounds):
        return None
    return [nuisance[r] for r in rounds]


@dataclass(frozen=True)
class Fit:
    """The per-round samples' effect on the test's scale, its standard error and degrees
    of freedom, and the per-round spread left around the fit (`sd`)."""

    centre: float
    se: float
    df: int
    sd: float
    nuisance: float | None = None  # the fitted nuisance coefficient, when one was fitted


def paired_fit(samples: Sequence[float], nuisance: Sequence[float] | None = None) -> Fit:
    """The mean of the per-round samples and its standard error on n - 1 df (a one-sample
    t-test), or, with a `nuisance` column that takes two values and leaves a degree of
    freedom (n >= 3), the intercept of the least-squares fit
    sample = effect + b * nuisance on n - 2 df. Coded -1/+1 for a factor the design
    balances (interleaved: which storage slot the variant held), the intercept is the
    effect averaged over both levels: the plain mean when the levels are balanced over the
    rounds, free of the factor's bias when they are not, and its error leaves out the
    spread the factor puts between rounds (the crossover trial's period effect, fitted the
    same way). statsmodels' OLS gives the same intercept, error and interval (tested)."""
    n = len(samples)
    if nuisance is None or len(set(nuisance)) < 2 or n < 3:
        sd = stdev(samples)
        return Fit(statistics.fmean(samples), sd / math.sqrt(n), n - 1, sd)
    zbar, dbar = statistics.fmean(nuisance), statistics.fmean(samples)
    sxx = sum((z - zbar) ** 2 for z in nuisance)
    slope = sum((z - zbar) * (d - dbar) for z, d in zip(nuisance, samples, strict=True)) / sxx
    centre = dbar - slope * zbar
    rss = sum((d - centre - slope * z) ** 2 for z, d in zip(nuisance, samples, strict=True))
    s2 = rss / (n - 2)
    se = math.sqrt(s2 * (1 / n + zbar**2 / sxx))
    return Fit(centre, se, n - 2, math.sqrt(s2), slope)


def equivalence_bounds(pct: float, scale: str, ref_mean: float) -> tuple[float, float]:
    """The bounds of "equal within ±pct %" on the scale the tests work on: the log of
    1 -/+ pct/100 for a ratio; -/+ pct % of the reference's mean for a difference."""
    if not 0 < pct < 100:
        raise ValueError(f"the equivalence must be a percentage between 0 and 100, got {pct}")
    if scale == RATIO:
        return math.log1p(-pct / 100), math.log1p(pct / 100)
    margin = abs(ref_mean) * pct / 100
    return -margin, margin


def tost_p(samples: Sequence[float], low: float, high: float) -> float:
    """Two one-sided t-tests that the samples' mean lies inside (low, high): the larger of
    the p-values of "mean <= low" and "mean >= high" (statsmodels' ttost_paired on the
    log values gives the same). Below alpha exactly when the (1 - 2 alpha) t interval lies
    inside (low, high). 1.0 when the bounds are empty or the samples have no spread."""
    if len(samples) < MIN_PAIRS:
        return 1.0
    return _tost_p_fit(paired_fit(samples), low, high)


def _tost_p_fit(fit: Fit, low: float, high: float) -> float:
    """TOST on a fitted effect: its t statistics against both bounds on the fit's df."""
    if not low < high:
        return 1.0
    if fit.se == 0:
        return 0.0 if low < fit.centre < high else 1.0
    p_low = float(_special.stdtr(fit.df, -(fit.centre - low) / fit.se))  # H0: mean <= low
    p_high = float(_special.stdtr(fit.df, (fit.centre - high) / fit.se))  # H0: mean >= high
    return max(p_low, p_high)


def _log_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [math.log(y / x) for x, y in zip(a, b, strict=True)]


def tost_interval(c: Comparison) -> tuple[float, float] | None:
    """The (1 - 2 alpha) interval TOST judges (90 % at alpha 5 %), on the comparison's
    reported scale: "equal within ±X %" holds exactly when it lies inside ±X, so a verdict
    of equal can show it beside the 95 % interval, which may reach past ±X. None without a
    spread to build it from."""
    if c.estimate is None or c.se is None or c.df is None:
        return None
    if c.scale == RATIO and c.estimate <= 0:
        return None
    centre = math.log(c.estimate) if c.scale == RATIO else c.estimate
    half = t_quantile(c.df, 1 - 2 * EQUIVALENCE_ALPHA) * c.se
    back = _back(c.scale)
    return back(centre - half), back(centre + half)


def _back(scale: str) -> Callable[[float], float]:
    """From the scale the t-test works on back to the reported one."""
    return math.exp if scale == RATIO else float


def _no_ratio_note(rounds: Sequence[int], a: Sequence[float], b: Sequence[float]) -> str:
    """Empty when every round has a positive value on both sides, else why there is no ratio."""
    ref_zero = [r for r, x in zip(rounds, a, strict=True) if x <= 0]
    other_zero = [r for r, y in zip(rounds, b, strict=True) if y <= 0]
    if not ref_zero and not other_zero:
        return ""
    where = [f"the reference is {_zero_or_less(a)} in rounds {ref_zero}"] if ref_zero else []
    if other_zero:
        where.append(f"this variant is {_zero_or_less(b)} in rounds {other_zero}")
    how = "compared as the difference (variant - reference) in its unit"
    return f"no ratio: {' and '.join(where)}; {how}"


def _zero_or_less(xs: Sequence[float]) -> str:
    return "0" if min(xs) == 0 else "<= 0"


def _zero_variance_note(scale: str, a: Sequence[float], b: Sequence[float]) -> str:
    if scale == DIFFERENCE and not any(a) and not any(b):
        return "both are 0 in every round: nothing to compare"
    return f"the per-round {scale} is identical in every round (zero variance): no t-test"


def _verdict(
    low: float, high: float, no_change: float, higher_is_better: bool, equivalent: bool
) -> str:
    """FASTER/SLOWER when the 95 % CI excludes no change; else EQUAL if TOST passed.

    A small change that is both significant and inside ±X stays FASTER (SLOWER), its
    Comparison's `equivalent` set: the interval says the direction for sure, and the
    reader learns from "within ±X %" that it is too small to matter; calling it "equal"
    would hide a real, if small, difference."""
    if low > no_change:
        return FASTER if higher_is_better else SLOWER
    if high < no_change:
        return SLOWER if higher_is_better else FASTER
    return EQUAL if equivalent else UNDECIDED


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b

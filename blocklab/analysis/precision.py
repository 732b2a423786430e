"""Pure precision model: what n paired rounds can resolve, given the per-round noise.

The noise is `sigma_log`, the standard deviation of the per-round log ratios
log(other / reference) of paired runs: exactly the samples blocklab.analysis.stats.compare_paired
runs its one-sample t-test on. It is estimated from stored runs of an experiment or from
a short pilot (`noise_from_rounds`), never guessed.

With n rounds the 95 % interval of the geometric-mean ratio is exp(centre +- h), with
h = t(0.975, n-1) * s / sqrt(n); its half-width as stats reports it (in % of the ratio)
is 100 * (exp(h) - exp(-h)) / 2 = 100 * sinh(h), whatever the centre. The expected
half-width uses E[s] = c4(n) * sigma (s is a biased estimate of sigma for small n).

The minimum detectable effect (MDE) is the smallest true change that a two-sided paired
t-test at alpha 0.05 detects with power 0.8. It is solved exactly with the noncentral t
distribution; `mde_closed_form_pct` is the textbook approximation
(t(1-alpha/2, n-1) + t(power, n-1)) * sigma / sqrt(n), which the exact value approaches
as n grows.

No I/O here: functions take numbers and return numbers or frozen dataclasses.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scipy import special as _special

from blocklab.analysis.stats import CONFIDENCE, t_quantile

ALPHA = 0.05
POWER = 0.8
MIN_ROUNDS = 2  # a t interval needs n - 1 >= 1
MAX_ROUNDS = 100_000  # the search for rounds_needed stops here
SIGMA_CONFIDENCE = 0.9  # early stop only when even this optimistic a noise misses the target


# -- noise ------------------------------------------------------------------------------


def log_ratios(ref: Mapping[int, float], other: Mapping[int, float]) -> list[float]:
    """log(other / ref) of every round where both have a positive value."""
    rounds = sorted(set(ref) & set(other))
    return [math.log(other[r] / ref[r]) for r in rounds if ref[r] > 0 and other[r] > 0]


@dataclass(frozen=True)
class Noise:
    """The per-round noise of paired log ratios, pooled over comparisons."""

    sigma_log: float  # stdev of the per-round log ratios
    df: int  # degrees of freedom behind it (sum of n - 1 over the comparisons)

    @property
    def sigma_pct(self) -> float:
        """The same noise as a typical per-round change in %, for people."""
        return (math.exp(self.sigma_log) - 1) * 100


def noise_from_rounds(comparisons: Sequence[Sequence[float]]) -> Noise | None:
    """Pooled stdev of per-round log ratios: each inner list is one comparison's log
    ratios (e.g. `log_ratios(ref, other)` per variant). Variances are pooled by their
    degrees of freedom. None when no comparison has two rounds."""
    ss, df = 0.0, 0
    for xs in comparisons:
        if len(xs) >= MIN_ROUNDS:
            ss += statistics.variance(xs) * (len(xs) - 1)
            df += len(xs) - 1
    return None if df == 0 else Noise(math.sqrt(ss / df), df)


# -- what n rounds give ----------------------------------------------------------------


def c4(n: int) -> float:
    """E[s] / sigma for n normal values (the bias of the sample stdev)."""
    check_rounds(n)
    return math.sqrt(2 / (n - 1)) * math.exp(
        _special.gammaln(n / 2) - _special.gammaln((n - 1) / 2)
    )


def half_width_log(sigma_log: float, n: int, confidence: float = CONFIDENCE) -> float:
    """h = t * sigma / sqrt(n): the interval's half-width on the log scale for s = sigma."""
    check_rounds(n)
    return t_quantile(n - 1, confidence) * sigma_log / math.sqrt(n)


def pct_from_log(h: float) -> float:
    """A half-width h on the log scale as stats reports it: 100 * sinh(h) % of the ratio."""
    return 100 * math.sinh(h)


def expected_ci_half_width_pct(
    sigma_log: float, n: int, confidence: float = CONFIDENCE, *, unbiased: bool = True
) -> float:
    """The 95 % CI half-width (in % of the ratio) expected after n rounds; with `unbiased`
    the stdev the rounds will show is c4(n) * sigma, its mean, rather than sigma."""
    s = sigma_log * (c4(n) if unbiased else 1.0)
    return pct_from_log(half_width_log(s, n, confidence))


def power(effect_log: float, sigma_log: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test on n log ratios for a true mean `effect_log`."""
    check_rounds(n)
    df = n - 1
    crit = float(_special.stdtrit(df, 1 - alpha / 2))
    nc = effect_log / sigma_log * math.sqrt(n)
    upper = 1 - float(_special.nctdtr(df, nc, crit))
    lower = float(_special.nctdtr(df, nc, -crit))
    if math.isnan(lower):  # nctdtr underflows to NaN far in the tail (below P(Z < -nc))
        lower = 0.0
    return upper + lower


def mde_log(sigma_log: float, n: int, alpha: float = ALPHA, target_power: float = POWER) -> float:
    """The smallest true effect (log scale, > 0) detected with `target_power`: exact, by
    solving the noncentral t power for the effect."""
    check_sigma(sigma_log)
    if sigma_log == 0:
        return 0.0

    def gap(d: float) -> float:
        return power(d, sigma_log, n, alpha) - target_power

    from scipy import optimize  # 0.35 s to import: only where a smallest effect is solved

    hi = sigma_log
    while gap(hi) < 0:
        hi *= 2
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12 * sigma_log))


def mde_pct(sigma_log: float, n: int, alpha: float = ALPHA, target_power: float = POWER) -> float:
    """The MDE as a change in %: an increase of exp(mde_log) - 1."""
    return (math.exp(mde_log(sigma_log, n, alpha, target_power)) - 1) * 100


def mde_closed_form_log(
    sigma_log: float, n: int, alpha: float = ALPHA, target_power: float = POWER
) -> float:
    """(t(1 - alpha/2, n-1) + t(power, n-1)) * sigma / sqrt(n): the usual approximation."""
    check_rounds(n)
    df = n - 1
    t_alpha = float(_special.stdtrit(df, 1 - alpha / 2))
    t_beta = float(_special.stdtrit(df, target_power))
    return (t_alpha + t_beta) * sigma_log / math.sqrt(n)


# -- what a target needs ---------------------------------------------------------------


def rounds_needed(
    sigma_log: float, target_half_width_pct: float, confidence: float = CONFIDENCE
) -> int | None:
    """The fewest rounds whose expected CI half-width is <= the target; None beyond
    MAX_ROUNDS. Monotone: more noise or a narrower target never needs fewer rounds."""
    check_sigma(sigma_log)
    if target_half_width_pct <= 0:
        raise ValueError(f"the target half-width must be > 0 %, got {target_half_width_pct}")
    if sigma_log == 0:
        return MIN_ROUNDS

    def reached(n: int) -> bool:
        return expected_ci_half_width_pct(sigma_log, n, confidence) <= target_half_width_pct

    return fewest_rounds(reached)


def fewest_rounds(reached: Callable[[int], bool]) -> int | None:
    """The fewest rounds n >= MIN_ROUNDS for which `reached(n)` holds, for a `reached` that
    stays true once it is true (more rounds never hurt); None beyond MAX_ROUNDS."""
    if reached(MIN_ROUNDS):
        return MIN_ROUNDS
    lo, hi = MIN_ROUNDS, MIN_ROUNDS * 2
    while not reached(hi):
        if hi >= MAX_ROUNDS:
            return None
        lo, hi = hi, min(hi * 2, MAX_ROUNDS)
    while hi - lo > 1:  # reached(hi), not reached(lo): the half-width falls with n
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Forecast:
    """What a plan can resolve, for `blocklab plan` to print."""

    sigma_log: float
    rounds: int
    seconds_per_round: float
    ci_half_width_pct: float  # expected at `rounds`
    mde_pct: float  # at `rounds`, alpha 0.05, power 0.8
    target_half_width_pct: float | None
    rounds_for_target: int | None  # None: no target, or beyond MAX_ROUNDS
    seconds_for_target: float | None


def forecast(
    sigma_log: float,
    rounds: int,
    seconds_per_round: float,
    target_half_width_pct: float | None = None,
) -> Forecast:
    need = (
        None if target_half_width_pct is None else rounds_needed(sigma_log, target_half_width_pct)
    )
    return Forecast(
        sigma_log=sigma_log,
        rounds=rounds,
        seconds_per_round=seconds_per_round,
        ci_half_width_pct=expected_ci_half_width_pct(sigma_log, rounds),
        mde_pct=mde_pct(sigma_log, rounds),
        target_half_width_pct=target_half_width_pct,
        rounds_for_target=need,
        seconds_for_target=None if need is None else need * seconds_per_round,
    )


# -- during an adaptive run ------------------------------------------------------------


@dataclass(frozen=True)
class Reachability:
    """Whether an adaptive run (--until-ci) can still reach its target."""

    reachable: bool
    rounds_seen: int
    rounds_allowed: int  # the most rounds the budget permits in total
    rounds_needed: int | None  # from the noise seen so far (None: beyond MAX_ROUNDS)
    rounds_needed_optimistic: int | None  # from the lower confidence bound of the noise
    half_width_at_budget_pct: float | None  # expected at rounds_allowed, noise seen so far
    note: str


def sigma_lower_bound(s: float, n: int, confidence: float = SIGMA_CONFIDENCE) -> float:
    """One-sided lower confidence bound of sigma from a sample stdev of n values
    (chi-square with n - 1 degrees of freedom)."""
    check_rounds(n)
    df = n - 1
    return s * math.sqrt(df / float(_special.chdtri(df, 1 - confidence)))


def rounds_allowed(
    rounds_seen: int,
    *,
    max_rounds: int | None,
    seconds_left: float | None,
    seconds_per_round: float | None,
) -> int:
    """The most rounds the budget permits in total: max rounds, and the whole rounds that
    fit in the time left."""
    allowed = [max_rounds] if max_rounds is not None else []
    if seconds_left is not None and seconds_per_round:
        allowed.append(rounds_seen + max(0, int(seconds_left // seconds_per_round)))
    if not allowed:
        raise ValueError("reachability needs max_rounds or a time budget")
    return max(min(allowed), rounds_seen)


def can_reach(
    log_ratios_seen: Sequence[Sequence[float]],
    target_half_width_pct: float,
    *,
    max_rounds: int | None,
    seconds_left: float | None = None,
    seconds_per_round: float | None = None,
) -> Reachability:
    """Say early when the budget cannot reach the target CI half-width.

    `log_ratios_seen` holds each comparison's log ratios so far. The run is declared
    unreachable only when even an optimistic noise (the 90 % lower confidence bound of
    sigma) needs more rounds than the budget allows, so a few lucky or unlucky early
    rounds do not end a run that could have made it."""
    n = max((len(xs) for xs in log_ratios_seen), default=0)
    allowed = rounds_allowed(
        n, max_rounds=max_rounds, seconds_left=seconds_left, seconds_per_round=seconds_per_round
    )
    noise = noise_from_rounds(log_ratios_seen)
    if noise is None or n < MIN_ROUNDS + 1:
        return Reachability(True, n, allowed, None, None, None, "too few rounds to judge yet")
    need = rounds_needed(noise.sigma_log, target_half_width_pct)
    optimistic = rounds_needed(
        sigma_lower_bound(noise.sigma_log, noise.df + 1), target_half_width_pct
    )
    at_budget = expected_ci_half_width_pct(noise.sigma_log, max(allowed, MIN_ROUNDS))
    reachable = optimistic is not None and optimistic <= allowed
    note = (
        f"noise {noise.sigma_pct:.2f} % per round after {n} rounds: the target "
        f"+-{target_half_width_pct:g} % needs about {_rounds_text(need)}, the budget allows "
        f"{allowed}, where the CI half-width would be about {at_budget:.2f} %"
    )
    return Reachability(reachable, n, allowed, need, optimistic, at_budget, note)


def _rounds_text(n: int | None) -> str:
    return f"more than {MAX_ROUNDS} rounds" if n is None else f"{n} rounds"


def check_rounds(n: int) -> None:
    if n < MIN_ROUNDS:
        raise ValueError(f"need at least {MIN_ROUNDS} rounds, got {n}")


def check_sigma(sigma_log: float) -> None:
    if not sigma_log >= 0 or not math.isfinite(sigma_log):
        raise ValueError(f"the noise must be a finite number >= 0, got {sigma_log}")

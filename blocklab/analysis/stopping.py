"""When an adaptive run (`--until-ci PCT`) stops: Stein's two-stage rule (pure).

Stopping at the first round whose 95 % interval is narrow enough picks the rounds whose
noise happened to look low: the final interval covered the true ratio in 90 to 93 % of
simulated experiments, not 95 %. Here the stop does not look at the interval's width:

1. First stage: the experiment's planned rounds, at least MIN_FIRST_STAGE (m).
2. Their noise fixes the total (Stein 1945): per comparison, with s the stdev of its first
   m per-round log ratios, the fewest N with t(0.975, m-1) s / sqrt(N) <= asinh(PCT/100)
   (the half-width that stats reports as PCT % of the ratio), and at least FLOOR_FACTOR x m
   and MIN_FRESH rounds beyond the first stage.
   The run's total is the largest N over its comparisons.
3. The run stops after N rounds (or at max rounds, the time budget, or when even an
   optimistic noise cannot reach PCT: blocklab.analysis.precision.can_reach) and says
   whether the widest interval reached PCT: with t(m-1) it does in 75 to 99 % of runs.

Why the floor: the final interval uses all N rounds, the first stage included, so a first
stage with a low s both shortens the run and narrows its interval. With N >= max(3 m,
m + 12) the fresh rounds dominate the final stdev: the coverage stays >= 0.944 for any
ratio of noise to target (0.940 with 3 m alone at m = 3, 0.90 without a floor; computed
from s0 ~ chi2(m-1) and the fresh rounds' chi2(N-m)), and tests/analysis/test_stopping.py
simulates it for true noise of 2 to 8 % per round and targets of 2 to 5 %.

Every decision is a function of the per-round log ratios seen so far (ordered by round),
so a resumed run decides the same. The stop must not look at the estimate's centre (the
interval would no longer be independent of the stop); a stop for a decided verdict
(equivalence) belongs here too, beside this rule, with its own simulation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from blocklab.analysis.precision import MIN_ROUNDS
from blocklab.analysis.stats import t_quantile

MIN_FIRST_STAGE = 3  # with 2 rounds t(0.975, 1) = 12.7 would plan 40 times the rounds
FLOOR_FACTOR = 3  # at least FLOOR_FACTOR x the first stage in total ...
MIN_FRESH = 12  # ... and this many rounds beyond it


def first_stage(rounds: int) -> int:
    """The first stage of an adaptive run of `rounds` planned rounds."""
    return max(rounds, MIN_FIRST_STAGE)


def planned_rounds_array(
    sigma_log: npt.ArrayLike, first: int, target_half_width_pct: float
) -> npt.NDArray[np.int64]:
    """Stein's total rounds for first-stage stdevs `sigma_log` of `first` rounds each
    (element-wise, so a simulation runs the same arithmetic as the loop)."""
    if first < MIN_ROUNDS:
        raise ValueError(f"the first stage needs at least {MIN_ROUNDS} rounds, got {first}")
    h = math.asinh(target_half_width_pct / 100)
    s = np.asarray(sigma_log, dtype=float)
    stein = np.ceil((t_quantile(first - 1) * s / h) ** 2 - 1e-9)
    return np.maximum(stein, floor(first)).astype(np.int64)


def floor(first: int) -> int:
    """The fewest rounds in total after a first stage of `first` rounds."""
    return max(FLOOR_FACTOR * first, first + MIN_FRESH)


def planned_rounds(log_ratios: Sequence[Sequence[float]], first: int, target_pct: float) -> int:
    """The total rounds the first `first` log ratios of every comparison plan (the most
    over the comparisons); the floor when none has two values yet."""
    sds = [statistics.stdev(xs[:first]) for xs in log_ratios if len(xs[:first]) >= MIN_ROUNDS]
    return int(planned_rounds_array(sds, first, target_pct).max(initial=floor(first)))


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str
    rounds_planned: int | None  # None during the first stage


def decide(
    log_ratios: Sequence[Sequence[float]],
    widest_pct: float | None,
    target_half_width_pct: float,
    *,
    first: int,
    max_rounds: int,
) -> Decision:
    """Stop or go on, after the rounds seen so far: `log_ratios` per comparison ordered by
    round, `widest_pct` the widest CI half-width now (None: not computable), `first` the
    first stage (`first_stage`), `max_rounds` the cap."""
    seen = max((len(xs) for xs in log_ratios), default=0)
    if seen < first:
        return Decision(seen >= max_rounds, f"first stage: {seen} of {first} rounds", None)
    planned = planned_rounds(log_ratios, first, target_half_width_pct)
    target = f"{target_half_width_pct:g} %"
    widest = "not computable" if widest_pct is None else f"{widest_pct:.2f} %"
    reached = widest_pct is not None and widest_pct <= target_half_width_pct
    verdict = f"widest CI half-width {widest} {'<=' if reached else '>'} {target}"
    if seen >= min(planned, max_rounds):
        if planned > max_rounds:
            why = f"max rounds reached ({max_rounds}); the first {first} rounds planned {planned}"
        else:
            why = f"the {planned} rounds planned from the first {first} rounds' noise are done"
        return Decision(True, f"{why}; {verdict}", planned)
    return Decision(False, f"{seen} of {planned} planned rounds; {verdict}", planned)

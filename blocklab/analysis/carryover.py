"""Carry-over, measured (pure): does a run right after a switch of variant differ from a
run right after a run of the same variant?

In a round every run but the first follows another run. A run "after a switch" follows a
run of another variant (A B B A: the first B, the last A); a run "after a repeat" follows
a run of the same variant (the second B). A position or carry-over effect (the previous
variant's caches, dirty pages or checkpoint debt) shows as a ratio switch / repeat away
from 1.

The estimate is paired by round, so a variant's level and the round's drift cancel: in
each round, for every variant with both kinds of runs, the log ratio of the geometric
mean of its after-switch runs to that of its after-repeat runs; a round's sample is the
mean over those variants. The ratio and its 95 % CI are the paired t interval of
blocklab.analysis.stats.compare_paired over those rounds. A design where a variant never
follows itself (paired: A B) has no repeat and gives no estimate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from blocklab.analysis import stats

SWITCH = "switch"
REPEAT = "repeat"


@dataclass(frozen=True)
class PositionRun:
    """One run of a round, in the order the round ran them."""

    round: int
    position: int
    variant_id: str
    value: float | None  # None: failed, or no value for the metric


@dataclass(frozen=True)
class CarryOver:
    comparison: stats.Comparison | None  # after a switch / after a repeat, paired by round
    n_rounds: int  # rounds with a variant run both after a switch and after a repeat
    note: str = ""  # why there is no estimate
    of: str = "runs"  # what was compared: "runs", or "slices" (interleaved rounds)

    @property
    def detected(self) -> bool:
        c = self.comparison
        return c is not None and c.verdict in (stats.FASTER, stats.SLOWER)


def estimate(runs: Iterable[PositionRun]) -> CarryOver:
    """The carry-over ratio (after a switch / after a repeat) with its 95 % CI."""
    return from_round_log_ratios(round_log_ratios(runs))


def from_round_log_ratios(samples: Mapping[int, float], of: str = "runs") -> CarryOver:
    """The CarryOver of per-round samples (round -> log(after a switch / after a
    repeat)) of `of` ("runs" or "slices"): their paired t interval, as a ratio; every
    estimate is built here."""
    if not samples:
        return CarryOver(
            None, 0, "no round ran a variant both after a switch and after a repeat", of
        )
    ones = dict.fromkeys(samples, 1.0)
    ratios = {r: math.exp(x) for r, x in samples.items()}
    return CarryOver(stats.compare_paired(ones, ratios), len(samples), of=of)


def round_log_ratios(runs: Iterable[PositionRun]) -> dict[int, float]:
    """round -> mean over its variants of log(after-switch / after-repeat geometric means)."""
    by_round: dict[int, list[PositionRun]] = {}
    for run in runs:
        by_round.setdefault(run.round, []).append(run)
    out = {}
    for rnd, rs in by_round.items():
        logs = _variant_log_ratios(sorted(rs, key=lambda r: r.position))
        if logs:
            out[rnd] = statistics.fmean(logs)
    return out


def _variant_log_ratios(ordered: list[PositionRun]) -> list[float]:
    """Per variant of one round with both kinds of runs, log(switch) - log(repeat) means."""
    kinds: dict[str, dict[str, list[float]]] = {}
    for prev, run in zip(ordered, ordered[1:], strict=False):
        value = run.value
        if run.position != prev.position + 1 or value is None or not _usable(value):
            continue  # a gap in the positions (what ran before is unknown), or no value
        kind = REPEAT if prev.variant_id == run.variant_id else SWITCH
        kinds.setdefault(run.variant_id, {}).setdefault(kind, []).append(math.log(value))
    return [
        statistics.fmean(k[SWITCH]) - statistics.fmean(k[REPEAT])
        for k in kinds.values()
        if SWITCH in k and REPEAT in k
    ]


def _usable(x: float) -> bool:
    return math.isfinite(x) and x > 0


def sentence(c: CarryOver, words: tuple[str, str] = ("faster", "slower")) -> str:
    """The carry-over in words: a warning when its CI excludes 1, else that none was seen.
    `words`: what a ratio above 1 and below 1 mean for the metric."""
    k = c.comparison
    if k is None or k.ratio is None:
        return f"carry-over: not measured ({c.note or (k.note if k else '')})"
    ci = _ci_pct(k)
    if not c.detected:
        return (
            f"carry-over: none detected: {c.of} right after a switch vs after a repeat "
            f"{k.ratio:.3f} (95 % CI {ci}, {c.n_rounds} rounds)"
        )
    pct = abs(k.ratio - 1) * 100
    up, down = words
    return (
        f"{c.of} right after a switch were {pct:.1f} % {up if k.ratio > 1 else down} "
        f"(95 % CI {ci}, {c.n_rounds} rounds): carry-over; {ADVICE.get(c.of, ADVICE['runs'])}"
    )


ADVICE = {
    "runs": "compare with A B B A or a longer warm-up",
    # interleaved: the Thue-Morse order gives each variant as many switched slices
    "slices": "the Thue-Morse order gives both variants as many switched slices, so it "
    "cancels in the comparison only if both gain or lose alike",
}


def _ci_pct(k: stats.Comparison) -> str:
    if k.ci95_low is None or k.ci95_high is None:
        return "none"
    return f"{(k.ci95_low - 1) * 100:+.1f} % to {(k.ci95_high - 1) * 100:+.1f} %"

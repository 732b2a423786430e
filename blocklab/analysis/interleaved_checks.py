"""The interleaved design's own A/A verdict and carry-over, from its slices (pure).

An interleaved round stores one record per variant (blocklab.execution.interleaved), so
there is no second copy and no position to compare between records. The slices inside
the record give both, in every round; the record carries them as metrics:

- `aa_tps_half0`, `aa_tps_half1`: the variant's slices split in two halves in Thue-Morse
  order of its own slices (its k-th slice to half thue_morse(k)), each half's throughput
  its total transactions / total seconds. The reference's half 1 against half 0, paired
  by round, is an A/A comparison: both halves ran the same server in the same round.
- `tps_after_switch`, `tps_after_repeat`: the throughput of its slices right after a
  slice of the other variant, and right after one of its own.

Both are computed here from per-round values (round -> value) that the caller reduced
the same way as everywhere else (blocklab.analysis.rounds: ok records only).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

from blocklab.analysis import carryover, stats
from blocklab.analysis.carryover import CarryOver
from blocklab.analysis.designs import aa_rounds

AA_TPS_HALF0 = "aa_tps_half0"
AA_TPS_HALF1 = "aa_tps_half1"
TPS_AFTER_SWITCH = "tps_after_switch"
TPS_AFTER_REPEAT = "tps_after_repeat"
SLICE_METRICS = (AA_TPS_HALF0, AA_TPS_HALF1, TPS_AFTER_SWITCH, TPS_AFTER_REPEAT)
AA_LABEL_SUFFIX = "(Thue-Morse halves of its slices)"

RoundValues = Mapping[int, float]  # round -> value


def aa_halves(
    refs: Iterable[tuple[RoundValues, RoundValues]], *, higher_is_better: bool = True
) -> stats.Comparison | None:
    """Half 1 against half 0 of each reference's slices, paired by round (rounds without
    both halves left out); several references pooled per round as aa-control's copies
    (blocklab.analysis.designs.aa_rounds). None when no round has both halves (its
    slices per round were not a multiple of 4): nothing to say."""
    copies = [
        {r: {0: half0[r], 1: half1[r]} for r in sorted(half0.keys() & half1.keys())}
        for half0, half1 in refs
    ]
    first, second = aa_rounds(copies)
    if not first.keys() & second.keys():
        return None
    return stats.compare_paired(first, second, higher_is_better=higher_is_better)


def carry_over(variants: Iterable[tuple[RoundValues, RoundValues]]) -> CarryOver:
    """Slices after a switch / after a repeat: per round and variant with both (positive)
    values, log(after switch / after repeat); a round's sample is the mean over its
    variants (blocklab.analysis.carryover.from_round_log_ratios)."""
    logs: dict[int, list[float]] = {}
    for switch, repeat in variants:
        for r in switch.keys() & repeat.keys():
            s, p = switch[r], repeat[r]
            if _usable(s) and _usable(p):
                logs.setdefault(r, []).append(math.log(s / p))
    return carryover.from_round_log_ratios(
        {r: statistics.fmean(xs) for r, xs in sorted(logs.items())}, of="slices"
    )


def _usable(x: float) -> bool:
    return math.isfinite(x) and x > 0

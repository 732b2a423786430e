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
- `storage_slot`: which of the round's two storage slots (0, 1) the variant's server
  ran on; the variants swap slots every two rounds (blocklab.execution.orders
  .storage_slots). The slot A/A (`slot_aa`) compares slot 1 with slot 0: it sees a bias
  between the two servers and storages, which the Thue-Morse halves (one server against
  itself) cannot, and it leaves the switch and repeat slices alone (every round's value
  is the variant's whole round).

Both are computed here from per-round values (round -> value) that the caller reduced
the same way as everywhere else (blocklab.analysis.rounds: ok records only).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from blocklab.analysis import aa, carryover, stats
from blocklab.analysis.carryover import CarryOver
from blocklab.analysis.designs import aa_rounds
from blocklab.analysis.sessions import least_squares, of_rounds

AA_TPS_HALF0 = "aa_tps_half0"
AA_TPS_HALF1 = "aa_tps_half1"
TPS_AFTER_SWITCH = "tps_after_switch"
TPS_AFTER_REPEAT = "tps_after_repeat"
STORAGE_SLOT = "storage_slot"
SLICE_METRICS = (AA_TPS_HALF0, AA_TPS_HALF1, TPS_AFTER_SWITCH, TPS_AFTER_REPEAT)
AA_LABEL_SUFFIX = "(Thue-Morse halves of its slices)"
SLOT_AA_LABEL = "(storage slot 1 / slot 0: both variants, slots swapped every two rounds)"
SLOT_AA_MIN_ROUNDS = 3  # two parameters (slot, variant) and one degree of freedom left

RoundValues = Mapping[int, float]  # round -> value


def design_aa(
    per_round: Callable[[str, str], RoundValues],
    ref: str,
    variant_ids: Sequence[str],
    *,
    higher_is_better: bool = True,
    session_of: Mapping[str, Mapping[int, str]] | None = None,
) -> tuple[stats.Comparison | None, str]:
    """The design's A/A and what it compares: the slot A/A (`slot_aa`) when the
    reference's records carry their storage slot and one other variant ran beside it,
    else (records from before the slots swapped) the Thue-Morse halves of the
    reference's slices (`aa_halves`). `per_round(variant_id, metric)`: round -> value,
    reduced as every metric is (blocklab.analysis.rounds); `session_of`: variant id ->
    round -> the session that ran it (analysis.sessions.rounds_by_session)."""
    others = [v for v in variant_ids if v != ref]
    slots = per_round(ref, STORAGE_SLOT)
    if slots and len(others) == 1:
        named = {v: (session_of or {}).get(v, {}) for v in (ref, others[0])}
        aa = slot_aa(per_round(ref, "tps"), slots, per_round(others[0], "tps"), of_rounds(named))
        if not higher_is_better and aa.estimate is not None:
            aa = dataclasses.replace(aa, verdict=_flipped(aa.verdict))
        return aa, SLOT_AA_LABEL
    halves = [(per_round(ref, AA_TPS_HALF0), per_round(ref, AA_TPS_HALF1))]
    return aa_halves(halves, higher_is_better=higher_is_better), AA_LABEL_SUFFIX


def slot_signs(slots: RoundValues) -> dict[int, float]:
    """A variant's storage slot per round as the -1/+1 factor its comparison fits beside
    the effect (stats.paired_fit): +1 on slot 1, -1 on slot 0. With two variants, the
    other's slot decides both (the reference held the other one)."""
    return {r: 1.0 if s == 1 else -1.0 for r, s in slots.items()}


def _flipped(verdict: str) -> str:
    return {stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER}.get(verdict, verdict)


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
    variants (blocklab.analysis.carryover.from_round_log_ratios). With two variants,
    `between` compares their gains (the second's log ratio minus the first's, paired by
    round): a gain alike for both cancels in the Thue-Morse order, one that differs
    leans the comparison."""
    per_variant: list[dict[int, float]] = []
    for switch, repeat in variants:
        per_variant.append(
            {
                r: math.log(switch[r] / repeat[r])
                for r in sorted(switch.keys() & repeat.keys())
                if _usable(switch[r]) and _usable(repeat[r])
            }
        )
    logs: dict[int, list[float]] = {}
    for gains in per_variant:
        for r, x in gains.items():
            logs.setdefault(r, []).append(x)
    result = carryover.from_round_log_ratios(
        {r: statistics.fmean(xs) for r, xs in sorted(logs.items())}, of="slices"
    )
    if len(per_variant) != 2 or result.comparison is None:
        return result
    first, second = per_variant
    both = sorted(first.keys() & second.keys())
    between = stats.compare_paired(
        dict.fromkeys(both, 1.0), {r: math.exp(second[r] - first[r]) for r in both}
    )
    return dataclasses.replace(result, between=between)


def _usable(x: float) -> bool:
    return math.isfinite(x) and x > 0


def slot_aa(
    ref_tps: RoundValues,
    ref_slot: RoundValues,
    other_tps: RoundValues,
    session_of: Mapping[int, str] | None = None,
) -> stats.Comparison:
    """The A/A of the two storage slots: per round d = log(tps on slot 1 / tps on slot 0)
    over the round's two variants, which is the slot effect plus or minus the variants'
    effect (plus when the other variant held slot 1). The least-squares fit of
    d = log(slot ratio) + x log(other / reference), x = +1 or -1, gives the slot ratio
    with a t interval on n - 2 degrees of freedom; with slots balanced over the rounds
    (x sums to 0) its estimate is the mean of d and is free of the variants' effect.
    Rounds with both tps positive only. No change (1) in the interval: no bias between
    the servers and storages seen at this precision.

    With rounds from two sessions or more (`session_of`: round -> the session that ran
    both variants; rounds without one are a group of their own), the variants' effect is
    fitted per session (x times each session's indicator, n - 1 - S df): a session level
    of the comparison (analysis.sessions) in a session that held the slots unequally (8
    rounds, then 3) would otherwise lean on the slot ratio, and read as a slot bias."""
    rounds = sorted(ref_tps.keys() & ref_slot.keys() & other_tps.keys())
    rounds = [r for r in rounds if _usable(ref_tps[r]) and _usable(other_tps[r])]
    # x = +1: the other variant on slot 1 (the reference on slot 0)
    ref_signs = slot_signs(ref_slot)
    x = [-ref_signs[r] for r in rounds]
    d = [xr * math.log(other_tps[r] / ref_tps[r]) for r, xr in zip(rounds, x, strict=True)]
    n = len(rounds)
    if n < SLOT_AA_MIN_ROUNDS or len(set(x)) < 2:
        centre = math.exp(statistics.fmean(d)) if n else None
        why = (
            f"{n} round(s) with both variants' tps; need {SLOT_AA_MIN_ROUNDS} or more, "
            "with each variant on each slot"
        )
        return stats.Comparison(n, stats.RATIO, centre, None, None, None, stats.TOO_FEW, None, why)
    groups = [(session_of or {}).get(r, "") for r in rounds]
    fit = stats.paired_fit(d, x) if len(set(groups)) < 2 else _fit_by_session(d, x, groups)
    if isinstance(fit, str):
        return stats.Comparison(n, stats.RATIO, None, None, None, None, stats.TOO_FEW, None, fit)
    centre, se = fit.centre, fit.se
    if se <= 1e-12:
        note = "the slot ratio is identical in every round (zero variance): no t-test"
        return stats.Comparison(
            n, stats.RATIO, math.exp(centre), None, None, None, stats.UNDETERMINED, None, note
        )
    half = stats.t_quantile(fit.df) * se
    low, high = math.exp(centre - half), math.exp(centre + half)
    verdict = stats.NO_DIFFERENCE
    if not low <= 1.0 <= high:
        verdict = stats.FASTER if low > 1 else stats.SLOWER
    width = (high - low) / 2 / math.exp(centre) * 100
    p = stats.two_sided_p(centre / se, fit.df)
    return stats.Comparison(
        n, stats.RATIO, math.exp(centre), low, high, p, verdict, width, aa.FITTED_OUT,
        sessions=len(set(groups)),
    )  # fmt: skip


def _fit_by_session(
    d: Sequence[float], x: Sequence[float], groups: Sequence[str]
) -> stats.Fit | str:
    """The least-squares fit of d = slot + sum over sessions s of effect[s] * x * [s]:
    the intercept (the slot's log ratio) and its standard error on n - 1 - S df; why not
    (str) when the intercept cannot be separated from the sessions' effects, or no
    degree of freedom is left."""
    names = list(dict.fromkeys(groups))
    design = np.array(
        [[1.0] + [xr if g == s else 0.0 for s in names] for xr, g in zip(x, groups, strict=True)]
    )
    y = np.array(d)
    df = len(y) - design.shape[1]
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return "the slots cannot be told from the sessions' levels: no session ran both orders"
    if df < 1:
        return f"{len(y)} rounds in {len(names)} sessions: no degree of freedom left"
    coef, rss = least_squares(design, y)
    s2 = rss / df
    cov = s2 * np.linalg.inv(design.T @ design)
    return stats.Fit(float(coef[0]), math.sqrt(max(float(cov[0, 0]), 0.0)), df, math.sqrt(s2))

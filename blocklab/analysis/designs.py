"""Pure experimental designs: the order of the runs within a round, and the analysis
that matches each order.

- `paired` (today's): every variant once per round, in an order balanced over the rounds
  (blocklab.execution.orders.round_order); per round the log ratio variant / reference.
- `short-runs`: the same as paired with runs `SHORT_FACTOR` times shorter and that many
  times more rounds (`short_runs_plan`); the same analysis. More rounds give the t
  interval more degrees of freedom and sample the machine's slow drift more often.
- `abba`: every variant twice per round, as a palindrome of a balanced order (A B B A
  and B A A B alternate; for three variants A C B B C A and so on). Per round each
  variant's value is the geometric mean of its two runs, and the comparison is the log
  ratio of those geometric means.
  Why this cancels drift: in a palindrome every variant's two slots have the same mean
  position (the round's midpoint). If throughput drifts linearly on the log scale
  within a round, log y = log mu_X + d * slot, the mean of a variant's two log values is
  log mu_X + d * midpoint for every variant, so d drops out of the log ratio exactly.
  (An additive linear drift cancels in the difference of the arithmetic means and, on
  the ratio, to first order in d / mu.) A paired order A B instead adds d to every
  round's log ratio; alternating orders (A B, B A) cancel it over pairs of rounds, ABBA
  within each round.
- `aa-control`: paired, plus the reference a second time in each round (its two runs are
  "copy 0" and "copy 1"; both take every position equally often over the design's
  period, so a drift within the round cannot lean the A/A ratio one way). The A/A
  comparison copy 1 / copy 0 measures the machine's noise floor inside the experiment:
  a true ratio of 1, so its 95 % CI should miss 1 in at most 5 % of experiments. The
  variants are compared with the geometric mean of both reference copies. With grouped
  references every group's reference runs twice, and the A/A comparison pools the groups
  (`aa_rounds`: per round the geometric mean of each copy over the groups that have both).
- `interleaved`: two variants, both servers up at once on storages of their own; the
  driver alternates `slices` short pgbench slices of `slice_s` seconds per variant between
  them in the Thue-Morse order (blocklab.execution.orders.slice_order: A B B A B A A B ...,
  every pair of slices holds each variant once, and with a multiple of 4 slices both mean
  positions are equal, so a drift linear in time cancels within the round). A round stores
  ONE record per variant (its slices aggregated: total transactions / total seconds), so
  it is analysed as paired with one term more: the variants swap their two storage
  slots every two rounds, balanced over 4 rounds, and every comparison fits the slot the
  variant held (-1/+1) beside the effect (blocklab.analysis.stats.paired_fit, n - 2 df),
  so a bias between the slots neither shifts the estimate of 6 rounds (4 on one slot, 2
  on the other) nor widens its interval; the design's A/A is the same fit's slot term,
  slot 1 / slot 0 (blocklab.analysis.interleaved_checks.slot_aa). Two caveats.
  (a) With checkpoint "free"
  each server's checkpoint timer runs in wall-clock time while the server is driven about
  half of it: each server sees about twice as many checkpoints per transaction as a run
  alone, so per-transaction WAL and full-page images are not those of a run alone;
  checkpoint "aligned" (a CHECKPOINT before each server's first measured slice,
  checkpoint_timeout 1d) gives both servers windows that start at a checkpoint and span
  the same driven seconds. (b) A slice right after a switch of server ran
  3.5 % faster in the bench than one right after a repeat (carry-over 1.035, 1.023 ..
  1.047: the server rested a slice); the Thue-Morse balance cancels it when both variants
  gain alike.

Values for the analysis are `variant_id -> round -> values by copy` (index = Slot.copy).
No I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from blocklab.analysis.rounds import RunValue, combine
from blocklab.analysis.stats import EQUIVALENCE_PCT, Comparison, compare_paired
from blocklab.experiment_file.design import AA_CONTROL, ABBA, check_design, check_reference

Values = Mapping[str, Mapping[int, Sequence[float]]]  # variant -> round -> values by copy


@dataclass(frozen=True)
class DesignResult:
    design: str
    comparisons: dict[str, Comparison]  # every other variant against the reference
    aa: Comparison | None  # aa-control: reference copy 1 / copy 0; None otherwise


def analyse(
    design: str,
    values: Values,
    *,
    reference: str,
    higher_is_better: bool = True,
    equivalence_pct: float = EQUIVALENCE_PCT,
    nuisance: Mapping[int, float] | None = None,
) -> DesignResult:
    """Compare every variant with the reference the way `design` ran them; "equal" means
    within ±`equivalence_pct` %; `nuisance` (round -> -1/+1, an interleaved experiment's
    storage slot) is fitted beside the effect (stats.compare_paired)."""
    check_design(design)
    check_reference(design, list(values), reference)
    copies = 2 if design == ABBA else 1
    per_round = {v: _round_values(rounds, copies) for v, rounds in values.items()}
    aa = None
    if design == AA_CONTROL:
        ref_copies = values.get(reference, {})
        first = _copy(ref_copies, 0)
        second = _copy(ref_copies, 1)
        aa = compare_paired(first, second, higher_is_better=higher_is_better)
        per_round[reference] = _round_values(ref_copies, 2)
    ref = per_round.get(reference, {})
    comparisons = {
        v: compare_paired(
            ref,
            other,
            higher_is_better=higher_is_better,
            equivalence_pct=equivalence_pct,
            nuisance=nuisance,
        )
        for v, other in per_round.items()
        if v != reference
    }
    return DesignResult(design, comparisons, aa)


RoundCopies = Mapping[int, Mapping[int, float]]  # round -> copy index -> value


def aa_rounds(refs: Sequence[RoundCopies]) -> tuple[dict[int, float], dict[int, float]]:
    """aa-control's A/A pairs: (copy 0, copy 1) per round. One reference: its two copies
    as stored. Several (grouped references): per round the geometric mean of copy 0 and
    of copy 1 over the groups with both copies positive, so that the round's A/A log
    ratio is the mean of the groups' own log ratios."""
    if len(refs) == 1:
        only = refs[0]
        return (
            {r: cs[0] for r, cs in only.items() if 0 in cs},
            {r: cs[1] for r, cs in only.items() if 1 in cs},
        )
    first: dict[int, float] = {}
    second: dict[int, float] = {}
    for r in sorted({r for ref in refs for r in ref}):
        pairs = [
            (cs[0], cs[1])
            for ref in refs
            if (cs := ref.get(r)) is not None and cs.get(0, 0) > 0 and cs.get(1, 0) > 0
        ]
        if pairs:
            first[r] = math.exp(sum(math.log(a) for a, _ in pairs) / len(pairs))
            second[r] = math.exp(sum(math.log(b) for _, b in pairs) / len(pairs))
    return first, second


def _round_values(rounds: Mapping[int, Sequence[float]], copies: int) -> dict[int, float]:
    """Per round, one value from the first `copies` values (blocklab.analysis.rounds: the
    one reduction the summary, the report and the CSV use)."""
    runs = [RunValue(r, c, x) for r, xs in rounds.items() for c, x in enumerate(xs)]
    return combine(copies, runs).values


def _copy(rounds: Mapping[int, Sequence[float]], copy: int) -> dict[int, float]:
    return {r: xs[copy] for r, xs in rounds.items() if len(xs) > copy and math.isfinite(xs[copy])}

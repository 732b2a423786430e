"""Pure experimental designs: the order of the runs within a round, and the analysis
that matches each order.

- `paired` (today's): every variant once per round, in a fresh random order
  (blocklab.plan.round_order); per round the log ratio variant / reference.
- `short-runs`: the same as paired with runs `SHORT_FACTOR` times shorter and that many
  times more rounds (`short_runs_plan`); the same analysis. More rounds give the t
  interval more degrees of freedom and sample the machine's slow drift more often.
- `abba`: every variant twice per round, as a palindrome of a random order (A B B A,
  or for three variants A C B B C A). Per round each variant's value is the geometric
  mean of its two runs, and the comparison is the log ratio of those geometric means.
  Why this cancels drift: in a palindrome every variant's two slots have the same mean
  position (the round's midpoint). If throughput drifts linearly on the log scale
  within a round, log y = log mu_X + d * slot, the mean of a variant's two log values is
  log mu_X + d * midpoint for every variant, so d drops out of the log ratio exactly.
  (An additive linear drift cancels in the difference of the arithmetic means and, on
  the ratio, to first order in d / mu.) A paired order A B instead adds d to every
  round's log ratio; a random order turns that bias into noise, ABBA removes it.
- `aa-control`: paired, plus the reference a second time in each round (its two runs are
  "copy 0" and "copy 1"; which runs first is drawn, and counterbalanced over pairs of
  rounds, so a drift within the round cannot lean the A/A ratio one way). The A/A
  comparison copy 1 / copy 0 measures the machine's noise floor inside the experiment:
  a true ratio of 1, so its 95 % CI should miss 1 in at most 5 % of experiments. The
  variants are compared with the geometric mean of both reference copies.

Values for the analysis are `variant_id -> round -> values by copy` (index = Slot.copy).
No I/O here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from blocklab.errors import UserError
from blocklab.stats import Comparison, compare_paired

PAIRED = "paired"
SHORT_RUNS = "short-runs"
ABBA = "abba"
AA_CONTROL = "aa-control"
DESIGNS = (PAIRED, SHORT_RUNS, ABBA, AA_CONTROL)
SHORT_FACTOR = 2  # short-runs: runs this many times shorter, this many times more rounds


@dataclass(frozen=True)
class Slot:
    """One run of a round: which variant, and which of its runs in the round."""

    variant_id: str
    copy: int = 0


def check_design(name: str, *, key: str = "design") -> str:
    """The design name, or a UserError naming the key and the allowed values."""
    if name not in DESIGNS:
        raise UserError(f"{key}: unknown design {name!r}; allowed: {', '.join(DESIGNS)}")
    return name


def check_reference(design: str, variant_ids: Sequence[str], reference: str | None) -> None:
    """aa-control repeats the reference: it needs one among the variants."""
    if design == AA_CONTROL and (reference is None or reference not in variant_ids):
        raise UserError(
            f"design {AA_CONTROL!r} runs the reference twice per round: set the experiment's "
            f"reference to one of the variants ({', '.join(sorted(variant_ids))})"
        )


def runs_per_round(design: str, n_variants: int) -> int:
    check_design(design)
    if design == ABBA:
        return 2 * n_variants
    return n_variants + 1 if design == AA_CONTROL else n_variants


def short_runs_plan(
    duration_s: float, rounds: int, factor: int = SHORT_FACTOR
) -> tuple[float, int]:
    """(duration, rounds) of the short-runs design: the same measuring time in more rounds."""
    return duration_s / factor, rounds * factor


def round_slots(
    design: str, variant_ids: Sequence[str], *, reference: str | None, seed: int, round_no: int
) -> list[Slot]:
    """The runs of one round in the order they run; reproducible from (seed, round_no)
    and independent of the order the ids are given in."""
    from blocklab.plan import round_order  # plan imports the spec, which imports designs

    check_design(design)
    check_reference(design, variant_ids, reference)
    order = round_order(variant_ids, seed, round_no)
    if design == ABBA:
        return [Slot(v, 0) for v in order] + [Slot(v, 1) for v in reversed(order)]
    if design == AA_CONTROL:
        assert reference is not None
        return _aa_slots(variant_ids, reference, seed, round_no)
    return [Slot(v, 0) for v in order]


def _aa_slots(variant_ids: Sequence[str], reference: str, seed: int, round_no: int) -> list[Slot]:
    """Rounds go in pairs (1-2, 3-4, ...) that share one drawn order, the second with the
    reference's copy labels swapped: whatever drift separates the two slots adds +d to
    one round's A/A log ratio and -d to the other's, so it cancels in the mean instead
    of leaning on it."""
    pair = (round_no + 1) // 2
    slots = [Slot(v, 0) for v in sorted(variant_ids)] + [Slot(reference, 1)]
    random.Random(f"{seed}:{pair}:{AA_CONTROL}").shuffle(slots)
    if round_no % 2 == 0:
        slots = [Slot(s.variant_id, 1 - s.copy) if s.variant_id == reference else s for s in slots]
    return slots


# -- analysis ---------------------------------------------------------------------------

Values = Mapping[str, Mapping[int, Sequence[float]]]  # variant -> round -> values by copy


@dataclass(frozen=True)
class DesignResult:
    design: str
    comparisons: dict[str, Comparison]  # every other variant against the reference
    aa: Comparison | None  # aa-control: reference copy 1 / copy 0; None otherwise


def analyse(
    design: str, values: Values, *, reference: str, higher_is_better: bool = True
) -> DesignResult:
    """Compare every variant with the reference the way `design` ran them."""
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
        v: compare_paired(ref, other, higher_is_better=higher_is_better)
        for v, other in per_round.items()
        if v != reference
    }
    return DesignResult(design, comparisons, aa)


def _round_values(rounds: Mapping[int, Sequence[float]], copies: int) -> dict[int, float]:
    """Per round, the geometric mean of the first `copies` values; rounds that lack one of
    them (a failed run) are left out, since half a palindrome does not cancel drift."""
    out = {}
    for r, xs in rounds.items():
        if len(xs) >= copies and all(x > 0 for x in xs[:copies]):
            out[r] = math.exp(sum(math.log(x) for x in xs[:copies]) / copies)
        elif copies == 1 and xs:
            out[r] = xs[0]  # a 0 or negative single value: stats compares differences
    return out


def _copy(rounds: Mapping[int, Sequence[float]], copy: int) -> dict[int, float]:
    return {r: xs[copy] for r, xs in rounds.items() if len(xs) > copy}

"""Pure orders: which runs a round holds and in which order they run, for each design.

The design names and what each promises are the experiment file's vocabulary
(blocklab.experiment_file.design); the analysis that matches each order is
blocklab.analysis.designs. No I/O here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from blocklab.experiment_file.design import (
    AA_CONTROL,
    ABBA,
    check_design,
    check_reference,
)


def round_order(variant_ids: Sequence[str], seed: int, round_no: int) -> list[str]:
    """A permutation of `variant_ids`, reproducible from (seed, round_no) alone.

    The ids are sorted first, so the order does not depend on how the caller listed them.
    """
    ids = sorted(variant_ids)
    if len(set(ids)) != len(ids):
        raise ValueError("round_order() got a variant id twice")
    order = list(ids)
    random.Random(f"{seed}:{round_no}").shuffle(order)
    return order


@dataclass(frozen=True)
class Slot:
    """One run of a round: which variant, and which of its runs in the round."""

    variant_id: str
    copy: int = 0


def runs_per_round(design: str, n_variants: int) -> int:
    check_design(design)
    if design == ABBA:
        return 2 * n_variants
    return n_variants + 1 if design == AA_CONTROL else n_variants


def round_slots(
    design: str, variant_ids: Sequence[str], *, reference: str | None, seed: int, round_no: int
) -> list[Slot]:
    """The runs of one round in the order they run; reproducible from (seed, round_no)
    and independent of the order the ids are given in."""
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

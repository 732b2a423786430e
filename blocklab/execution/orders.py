"""Pure orders: which runs a round holds and in which order they run, for each design.

Orders are balanced over the rounds, not drawn afresh each round: a round's runs (its
slots) follow a row of a Williams design on those slots, round r taking row
(r - 1) mod period. In every `positions_period` consecutive rounds each slot takes each
position once; in every `carryover_period` rounds each slot also follows every other
slot equally often (a Williams design: n rows for an even number of slots, 2 n for an
odd one). The experiment's seed only picks which slot plays which symbol of the design,
so the orders are reproducible from (seed, round_no) alone; they do not depend on the
planned rounds, so more rounds (a resume with --rounds, or adaptive rounds) keep the
rounds already run and stay balanced over every completed period. Where balance is
impossible (rounds not a multiple of the period), the last partial period is the
design's first rows under the seeded labelling: `balance_note` says so.

- paired, short-runs: the slots are the variants.
- abba: the first half of the round is a row on the variants, the second half its mirror
  (A B B A then B A A B for two variants).
- aa-control: the slots are the variants plus each reference's second copy (copy 1), so
  both copies of every reference take every position equally often.
- interleaved: one slot per variant (two variants), as in paired: the round's first
  variant alternates from round to round. Within the round the two servers are driven in
  turns of short slices in the Thue-Morse order (`slice_order`: A B B A B A A B ...), so
  every pair of slices (2k, 2k+1) holds each variant once, and with a multiple of 4
  slices both variants' mean positions are equal (a drift linear in time cancels). The
  two storage slots swap between the variants (`storage_slots`), balanced over 4 rounds.

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
    INTERLEAVED,
    check_design,
    check_reference,
)

ORDER_SCHEME = "williams"  # what `balance_note` names


@dataclass(frozen=True)
class Slot:
    """One run of a round: which variant, and which of its runs in the round."""

    variant_id: str
    copy: int = 0


def williams_rows(n: int) -> list[list[int]]:
    """A Williams design on symbols 0..n-1: row i is the base row 0, 1, n-1, 2, n-2, ...
    shifted by i (mod n), so the n rows form a Latin square and each symbol follows every
    other exactly once; for an odd n the mirrored rows are added (2 n rows) to balance
    the carry-over."""
    if n < 1:
        raise ValueError("williams_rows() needs at least one symbol")
    base = [0]
    low, high = 1, n - 1
    while len(base) < n:
        if len(base) % 2:
            base.append(low)
            low += 1
        else:
            base.append(high)
            high -= 1
    rows = [[(x + i) % n for x in base] for i in range(n)]
    if n % 2 and n > 1:
        rows += [row[::-1] for row in rows]
    return rows


def balanced_order(items: Sequence[str], seed: int, round_no: int) -> list[str]:
    """A permutation of `items` from the Williams design's row for `round_no`, the items
    labelled onto the design's symbols by `seed`; independent of the order `items` are
    given in."""
    labels = sorted(items)
    if len(set(labels)) != len(labels):
        raise ValueError("balanced_order() got an item twice")
    if round_no < 1:
        raise ValueError(f"round numbers start at 1 (got {round_no})")
    random.Random(f"{seed}:{ORDER_SCHEME}").shuffle(labels)
    rows = williams_rows(len(labels))
    return [labels[symbol] for symbol in rows[(round_no - 1) % len(rows)]]


def round_order(variant_ids: Sequence[str], seed: int, round_no: int) -> list[str]:
    """Every variant once, in the balanced order of round `round_no` (the paired design)."""
    return balanced_order(variant_ids, seed, round_no)


def thue_morse(k: int) -> int:
    """The k-th term of the Thue-Morse sequence (0 1 1 0 1 0 0 1 ...)."""
    return bin(k).count("1") % 2


def slice_order(variant_ids: Sequence[str], slices: int, round_no: int) -> list[str]:
    """The round's 2 x `slices` slices: Thue-Morse over the two variants, the first one
    being variant_ids[0] in odd rounds and variant_ids[1] in even ones."""
    if len(variant_ids) != 2:
        raise ValueError(f"interleaving takes two variants, got {len(variant_ids)}")
    a, b = variant_ids if round_no % 2 else (variant_ids[1], variant_ids[0])
    return [(a, b)[thue_morse(k)] for k in range(2 * slices)]


def round_slices(variant_ids: Sequence[str], *, seed: int, slices: int, round_no: int) -> list[str]:
    """interleaved: the round's slices, the two variants labelled by `seed` (as in
    `balanced_order`), so the first slice is the first of the round's `round_slots`."""
    return slice_order(balanced_order(variant_ids, seed, 1), slices, round_no)


SLOT_PERIOD = 4  # interleaved: rounds over which first variant and storage slot balance


def storage_slots(variant_ids: Sequence[str], *, seed: int, round_no: int) -> dict[str, int]:
    """interleaved: which of the two storage slots (0, 1) each variant's server gets in
    round `round_no`. The round's first variant (`round_slices`) alternates every round
    and holds slot 0 in rounds 1, 4, 5, 8 ... and slot 1 in rounds 2, 3, 6, 7 ..., so in
    every 4 rounds each variant takes each slot twice, once as the round's first variant
    and once as its second: a bias of one slot (its storage, its server directory) falls
    on both variants alike and is estimated from the swap
    (blocklab.analysis.interleaved_checks.slot_aa)."""
    first, second = dict.fromkeys(round_slices(variant_ids, seed=seed, slices=2, round_no=round_no))
    first_slot = ((round_no - 1) // 2 + round_no - 1) % 2
    return {first: first_slot, second: 1 - first_slot}


def runs_per_round(design: str, n_variants: int, n_references: int = 1) -> int:
    check_design(design)
    if design == ABBA:
        return 2 * n_variants
    return n_variants + n_references if design == AA_CONTROL else n_variants


def round_slots(
    design: str,
    variant_ids: Sequence[str],
    *,
    reference: str | None,
    seed: int,
    round_no: int,
    references: Sequence[str] | None = None,
) -> list[Slot]:
    """The runs of one round in the order they run; reproducible from (seed, round_no)
    and independent of the order the ids are given in. `references` (aa-control with a
    grouped reference): every reference that runs a second copy; default [reference]."""
    check_design(design)
    refs = _references(design, variant_ids, reference, references)
    if design == ABBA:
        order = balanced_order(variant_ids, seed, round_no)
        return [Slot(v, 0) for v in order] + [Slot(v, 1) for v in reversed(order)]
    if design == AA_CONTROL:
        slots = [Slot(v, 0) for v in variant_ids] + [Slot(r, 1) for r in refs]
        by_key = {_key(s): s for s in slots}
        return [by_key[k] for k in balanced_order(list(by_key), seed, round_no)]
    return [Slot(v, 0) for v in balanced_order(variant_ids, seed, round_no)]


def _references(
    design: str, variant_ids: Sequence[str], reference: str | None, refs: Sequence[str] | None
) -> list[str]:
    """The references that run twice (aa-control), each checked to be a variant."""
    chosen = sorted(set(refs)) if refs else ([reference] if reference is not None else [None])
    for ref in chosen:
        check_reference(design, variant_ids, ref)
    return [r for r in chosen if r is not None]


def _key(slot: Slot) -> str:
    # "\0" sorts before any character of an id: a copy 0 key sorts before its copy 1
    return f"{slot.variant_id}\0{slot.copy}"


@dataclass(frozen=True)
class Balance:
    """Over how many rounds a design's orders balance."""

    slots: int  # runs per round the design orders (abba: the first half)
    positions_period: int  # every slot takes every position once in this many rounds
    carryover_period: int  # ... and follows every other slot equally often


def balance(design: str, n_variants: int, n_references: int = 1) -> Balance:
    check_design(design)
    n = n_variants + n_references if design == AA_CONTROL else n_variants
    return Balance(n, n, len(williams_rows(n)))


def balance_note(design: str, n_variants: int, rounds: int, n_references: int = 1) -> str:
    """What `plan` says of the orders of `rounds` rounds, in a user's words: balanced, or
    what is uneven, why it matters and which numbers of rounds would balance."""
    b = balance(design, n_variants, n_references)
    if design == INTERLEAVED:
        first = "alternates" if rounds % 2 == 0 else "alternates (an odd number of rounds)"
        return (
            "slices in Thue-Morse order (A B B A B A A B ...): every pair of slices holds "
            f"each variant once; the round's first variant {first}"
        )
    if b.slots <= 1:
        return "orders: one run per round, nothing to balance"
    if rounds % b.carryover_period == 0:
        return (
            f"orders balanced over the {rounds} rounds: each variant runs first, second, ... "
            "equally often and right after every other variant equally often (Williams "
            f"design: it evens out every {b.carryover_period} rounds)"
        )
    p = b.positions_period
    if rounds % p == 0:
        return (
            f"orders balanced over the {rounds} rounds: each variant runs first, second, "
            f"... equally often; which variant runs right before which evens out every "
            f"{b.carryover_period} rounds ({_rounds_hint(rounds, b.carryover_period)} to "
            "balance that too; it matters only if one run leaves the machine warm or dirty "
            "for the next)"
        )
    return _unbalanced_note(b, rounds)


def _unbalanced_note(b: Balance, rounds: int) -> str:
    p = b.positions_period
    where = (
        f"each variant runs at only {rounds} of the {p} places in the round"
        if rounds < p
        else "some variants run first (or last) once more than others"
    )
    return (
        f"unbalanced order: a round runs {b.slots} runs, and a variant's place in the "
        f"round evens out every {p} rounds; with {rounds} rounds {where}, so a machine "
        "that speeds up or slows down during a round favours some variants: "
        f"{_rounds_hint(rounds, p)} to balance it"
    )


def _rounds_hint(rounds: int, period: int) -> str:
    """'plan 6 rounds' or 'plan 3 or 6 rounds': the multiples of `period` around `rounds`."""
    below, above = rounds - rounds % period, rounds - rounds % period + period
    return f"plan {below} or {above} rounds" if below else f"plan {above} rounds"

"""Balanced orders (blocklab.execution.orders): over the planned rounds every run takes
every position equally often, reproducibly from the seed; grouped aa-control runs every
reference twice."""

from __future__ import annotations

from collections import Counter

import pytest

from blocklab.execution import orders
from blocklab.execution.orders import Slot
from blocklab.experiment_file.design import AA_CONTROL, ABBA, PAIRED, SHORT_RUNS

DESIGNS = (PAIRED, ABBA, AA_CONTROL)


def _ids(n: int) -> list[str]:
    return [f"v{i}" for i in range(n)]


def _rounds(design: str, ids: list[str], rounds: int, seed: int = 7) -> list[list[Slot]]:
    return [
        orders.round_slots(design, ids, reference=ids[0], seed=seed, round_no=r)
        for r in range(1, rounds + 1)
    ]


def _position_counts(rounds: list[list[Slot]], by_variant: bool = False) -> Counter[object]:
    """(run, position) -> how often; by_variant: a variant's copies count as one run."""
    return Counter(
        (slot.variant_id if by_variant else slot, pos)
        for slots in rounds
        for pos, slot in enumerate(slots)
    )


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("design", DESIGNS)
def test_every_run_takes_every_position_equally_often(design: str, n: int) -> None:
    ids = _ids(n)
    b = orders.balance(design, n)
    assert b.positions_period == (n + 1 if design == AA_CONTROL else n)
    for periods in (1, 2, 3):
        rounds = _rounds(design, ids, periods * b.positions_period)
        width = len(rounds[0])
        assert width == orders.runs_per_round(design, n)
        # abba: each variant runs twice a round, so it takes each position `periods` times
        # as a variant (either copy); aa-control: each of the reference's copies does
        counts = _position_counts(rounds, by_variant=design == ABBA)
        runs = {run for run, _pos in counts}
        assert len(runs) == (n if design == ABBA else width)
        assert len(counts) == len(runs) * width
        assert set(counts.values()) == {periods}  # each (run, position) `periods` times


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_each_run_follows_every_other_equally_often_over_the_williams_period(n: int) -> None:
    rows = orders.williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    follows = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1
    for col in range(n):
        assert Counter(row[col] for row in rows) == {s: len(rows) // n for s in range(n)}


def test_two_variants_alternate_abba_and_baab() -> None:
    rounds = _rounds(ABBA, ["a", "b"], 4, seed=3)
    shapes = ["".join(s.variant_id for s in slots) for slots in rounds]
    assert {shapes[0], shapes[1]} == {"abba", "baab"}
    assert shapes[2:] == shapes[:2]
    assert [s.copy for s in rounds[0]] == [0, 0, 1, 1]


def test_paired_rounds_alternate_who_runs_first() -> None:
    # the demo that ran 4k first in all three rounds cannot happen: rounds 1 and 2 differ
    for seed in range(20):
        firsts = [orders.round_order(["4k", "8k"], seed, r)[0] for r in (1, 2, 3, 4)]
        assert firsts[0] != firsts[1] and firsts[:2] == firsts[2:]


@pytest.mark.parametrize("design", DESIGNS + (SHORT_RUNS,))
def test_orders_are_reproducible_and_independent_of_the_ids_order(design: str) -> None:
    ids = _ids(4)
    for r in range(1, 9):
        a = orders.round_slots(design, ids, reference="v0", seed=11, round_no=r)
        b = orders.round_slots(design, ids[::-1], reference="v0", seed=11, round_no=r)
        assert a == b == orders.round_slots(design, ids, reference="v0", seed=11, round_no=r)


def test_the_seed_picks_the_labelling() -> None:
    ids = _ids(4)
    firsts = {tuple(orders.round_order(ids, seed, 1)) for seed in range(40)}
    assert len(firsts) > 10  # the seed relabels the design: many first rounds
    # stable across processes: random.Random(str) seeds from the string's bytes
    assert orders.round_order(["a", "b", "c", "d"], 1, 1) == ["a", "b", "d", "c"]


def test_grouped_aa_control_runs_every_reference_twice() -> None:
    ids = ["r1", "x1", "r2", "x2", "r3"]
    refs = ["r1", "r2", "r3"]
    b = orders.balance(AA_CONTROL, len(ids), len(refs))
    assert b.positions_period == 8 and orders.runs_per_round(AA_CONTROL, 5, 3) == 8
    rounds = [
        orders.round_slots(AA_CONTROL, ids, reference="r1", seed=2, round_no=r, references=refs)
        for r in range(1, 17)
    ]
    for slots in rounds:
        per_variant = Counter(s.variant_id for s in slots)
        assert per_variant == {"r1": 2, "r2": 2, "r3": 2, "x1": 1, "x2": 1}
        assert sorted(s.copy for s in slots if s.variant_id in refs) == [0, 0, 0, 1, 1, 1]
    assert set(_position_counts(rounds).values()) == {2}  # both copies of every reference


def test_grouped_aa_control_refuses_a_reference_that_is_not_a_variant() -> None:
    from blocklab.errors import UserError

    with pytest.raises(UserError, match="reference"):
        orders.round_slots(
            AA_CONTROL, ["a", "b"], reference="a", seed=1, round_no=1, references=["a", "z"]
        )


def test_balance_note_says_when_rounds_do_not_balance() -> None:
    # (the wording changed for issue 35: what is uneven, why it matters, which rounds fix it)
    assert orders.balance_note(ABBA, 2, 6).startswith("orders balanced over the 6 rounds")
    note = orders.balance_note(ABBA, 2, 3)
    assert note.startswith("unbalanced order: a round runs 2 runs")
    assert "evens out every 2 rounds" in note and "plan 2 or 4 rounds to balance it" in note
    # 3 variants: positions every 3 rounds, which follows which every 6
    note = orders.balance_note(PAIRED, 3, 3)
    assert note.startswith("orders balanced over the 3 rounds: each variant runs first")
    assert "right before which evens out every 6 rounds (plan 6 rounds" in note
    assert "first 0 rounds" not in note
    assert orders.balance_note(AA_CONTROL, 2, 6).startswith("orders balanced over the 6 rounds")
    assert "evens out every 3 rounds" in orders.balance_note(AA_CONTROL, 2, 4)
    assert "nothing to balance" in orders.balance_note(PAIRED, 1, 3)


def test_balance_note_with_fewer_rounds_than_places_says_so() -> None:
    note = orders.balance_note(PAIRED, 8, 3)
    assert "with 3 rounds each variant runs at only 3 of the 8 places" in note
    assert "plan 8 rounds to balance it" in note


def test_thue_morse_is_the_sequence() -> None:
    assert [orders.thue_morse(k) for k in range(8)] == [0, 1, 1, 0, 1, 0, 0, 1]


@pytest.mark.parametrize("slices", [2, 4, 6, 12])
def test_interleaved_every_pair_of_slices_holds_each_variant_once(slices: int) -> None:
    for round_no in (1, 2, 3):
        order = orders.round_slices(["a", "b"], seed=3, slices=slices, round_no=round_no)
        assert len(order) == 2 * slices
        pairs = [order[k : k + 2] for k in range(0, len(order), 2)]
        assert all(sorted(p) == ["a", "b"] for p in pairs)


def test_interleaved_mean_positions_are_equal_with_a_multiple_of_four_slices() -> None:
    order = orders.slice_order(["a", "b"], 12, 1)
    mean = {v: sum(i for i, x in enumerate(order) if x == v) / 12 for v in "ab"}
    assert mean["a"] == mean["b"] == 11.5
    assert order[:8] == ["a", "b", "b", "a", "b", "a", "a", "b"]


def test_interleaved_one_slot_per_variant_first_alternating_over_rounds() -> None:
    rounds = _rounds("interleaved", ["a", "b"], 4)
    assert all(sorted(s.variant_id for s in r) == ["a", "b"] for r in rounds)
    assert all({s.copy for s in r} == {0} for r in rounds)
    firsts = [r[0].variant_id for r in rounds]
    assert firsts[0] != firsts[1] and firsts[0] == firsts[2] and firsts[1] == firsts[3]
    assert orders.runs_per_round("interleaved", 2) == 2
    for n, first in enumerate(firsts, start=1):  # the round's first slice: its first slot
        assert orders.round_slices(["b", "a"], seed=7, slices=2, round_no=n)[0] == first
    assert orders.balance("interleaved", 2).positions_period == 2
    assert "Thue-Morse" in orders.balance_note("interleaved", 2, 4)


def test_slice_order_takes_two_variants() -> None:
    with pytest.raises(ValueError, match="two variants"):
        orders.slice_order(["a", "b", "c"], 2, 1)


@pytest.mark.parametrize("seed", [1, 7, 1823227456])
def test_interleaved_storage_slots_balance_over_four_rounds(seed: int) -> None:
    """In every 4 rounds each variant takes each storage slot twice, once as the round's
    first variant and once as its second; both slots are used every round."""
    for start in (1, 5, 9):
        seen: dict[tuple[str, int, bool], int] = {}
        for n in range(start, start + orders.SLOT_PERIOD):
            slots = orders.storage_slots(["a", "b"], seed=seed, round_no=n)
            assert sorted(slots.values()) == [0, 1]
            first = orders.round_slices(["a", "b"], seed=seed, slices=2, round_no=n)[0]
            for vid, slot in slots.items():
                key = (vid, slot, vid == first)
                seen[key] = seen.get(key, 0) + 1
        assert seen == {(v, s, f): 1 for v in "ab" for s in (0, 1) for f in (True, False)}


def test_interleaved_storage_slots_swap_and_ignore_the_ids_order() -> None:
    got = [orders.storage_slots(["a", "b"], seed=3, round_no=n)["a"] for n in range(1, 9)]
    assert sorted(got[:4]) == [0, 0, 1, 1] and got[:4] == got[4:]
    for n in range(1, 9):
        assert orders.storage_slots(["b", "a"], seed=3, round_no=n) == orders.storage_slots(
            ["a", "b"], seed=3, round_no=n
        )

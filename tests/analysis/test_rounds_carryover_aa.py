"""The one per-round reduction, the carry-over estimate and the A/A verdict (pure)."""

from __future__ import annotations

import math
import random
import re

import pytest

from blocklab.analysis import carryover, stats
from blocklab.analysis.aa import aa_comparison, aa_sentence, biased
from blocklab.analysis.rounds import RunValue, combine, per_round_values
from blocklab.experiment_file.design import AA_CONTROL, ABBA, PAIRED


def test_abba_rounds_are_geometric_means_and_a_half_palindrome_is_dropped() -> None:
    runs = [
        RunValue(1, 0, 100.0),
        RunValue(1, 1, 400.0),
        RunValue(2, 0, 90.0),
        RunValue(2, 1, None, "failed: server died"),
    ]
    got = per_round_values(ABBA, runs, is_reference=False)
    assert got.values == {1: pytest.approx(200.0)}
    assert "half a palindrome" in got.dropped[2] and "server died" in got.dropped[2]


def test_a_zero_copy_is_kept_as_the_mean_and_nan_is_dropped() -> None:
    runs = [RunValue(1, 0, 0.0), RunValue(1, 1, 10.0), RunValue(2, 0, math.nan)]
    got = per_round_values(AA_CONTROL, runs, is_reference=True)
    assert got.values == {1: 5.0}
    assert "nan" in got.dropped[2] and "copy 1 has no run" in got.dropped[2]
    inf = per_round_values(PAIRED, [RunValue(3, 0, math.inf)], is_reference=False)
    assert inf.values == {} and "not a finite number" in inf.dropped[3]


def test_paired_and_aa_control_variants_take_one_copy() -> None:
    runs = [RunValue(1, 0, 7.0), RunValue(2, 0, 0.0)]
    assert per_round_values(AA_CONTROL, runs, is_reference=False).values == {1: 7.0, 2: 0.0}


def test_one_copy_takes_its_value_as_the_general_reduction_does() -> None:
    """combine's one-copy shortcut gives what the mean of one copy gives: -0.0 reads 0.0
    (float(value or 0.0)), a round's first copy 0 counts, failures keep their reasons."""
    runs = [
        RunValue(1, 0, -0.0),
        RunValue(2, 0, 5),
        RunValue(2, 0, 9.0),  # a second copy 0 of round 2: the first one counts
        RunValue(3, 0, None, "server died"),
        RunValue(4, 1, 3.0),  # no copy 0
        RunValue(5, 0, math.inf),
    ]
    got = combine(1, runs)
    assert got.values == {1: 0.0, 2: 5.0}
    assert math.copysign(1.0, got.values[1]) == 1.0 and type(got.values[2]) is float
    assert got.dropped == {
        3: "copy 0 has no value (failed: server died)",
        4: "copy 0 has no run",
        5: "copy 0 is inf, not a finite number",
    }


def _abba_runs(penalty: float, rounds: int, seed: int) -> list[carryover.PositionRun]:
    """A B B A rounds (alternating with B A A B); a run after a switch is `penalty` x."""
    rng = random.Random(seed)
    level = {"A": 1000.0, "B": 1100.0}
    out = []
    for rnd in range(1, rounds + 1):
        order = "ABBA" if rnd % 2 else "BAAB"
        drift = rng.uniform(0.9, 1.1)
        for pos, v in enumerate(order):
            after_switch = pos > 0 and order[pos - 1] != v
            x = level[v] * drift * rng.gauss(1.0, 0.01) * (penalty if after_switch else 1.0)
            out.append(carryover.PositionRun(rnd, pos, v, x))
    return out


def test_carryover_recovers_a_known_penalty() -> None:
    c = carryover.estimate(_abba_runs(0.90, rounds=8, seed=1))
    k = c.comparison
    assert k is not None and k.ratio is not None and k.ci95_low is not None
    assert k.ratio == pytest.approx(0.90, abs=0.01)
    assert k.ci95_low < 0.90 < k.ci95_high  # type: ignore[operator]
    assert c.detected and c.n_rounds == 8
    text = carryover.sentence(c)
    assert re.match(r"runs right after a switch were (9\.[5-9]|10\.[0-4]) % slower \(95 % CI", text)
    assert "carry-over; compare with A B B A or a longer warm-up" in text


def test_carryover_without_a_penalty_contains_1() -> None:
    c = carryover.estimate(_abba_runs(1.0, rounds=8, seed=2))
    k = c.comparison
    assert k is not None and k.ci95_low is not None and k.ci95_high is not None
    assert k.ci95_low < 1.0 < k.ci95_high and not c.detected
    assert carryover.sentence(c).startswith("carry-over: none detected")


def test_carryover_needs_repeats_and_skips_failed_runs() -> None:
    paired = [carryover.PositionRun(r, p, v, 100.0) for r in (1, 2) for p, v in enumerate("AB")]
    c = carryover.estimate(paired)
    assert c.comparison is None and "after a repeat" in c.note
    one = [carryover.PositionRun(1, p, v, None if p == 2 else 1.0) for p, v in enumerate("ABBA")]
    assert carryover.round_log_ratios(one) == {}  # the repeat failed: no pair in round 1


def _aa_runs(bias: float, rounds: int = 8) -> list[RunValue]:
    rng = random.Random(5)
    out = []
    for rnd in range(1, rounds + 1):
        level = 1000 * rng.uniform(0.9, 1.1)
        out.append(RunValue(rnd, 0, level * rng.gauss(1.0, 0.01)))
        out.append(RunValue(rnd, 1, level * bias * rng.gauss(1.0, 0.01)))
    return out + [RunValue(rounds + 1, 0, math.nan), RunValue(rounds + 1, 1, 1.0)]


def test_aa_verdict_names_a_bias_when_the_ci_excludes_1() -> None:
    c = aa_comparison(_aa_runs(1.05))
    assert c.n_pairs == 8 and c.ratio == pytest.approx(1.05, abs=0.01)  # the NaN round is out
    assert biased(c)
    text = aa_sentence(c)
    assert c.ratio is not None and c.ci95_low is not None and c.ci95_high is not None
    lo, hi = (c.ci95_low - 1) * 100, (c.ci95_high - 1) * 100
    assert text.startswith(
        f"A/A: this machine or design shows a bias of {(c.ratio - 1) * 100:+.1f} % "
        f"(95 % CI {lo:+.1f} % to {hi:+.1f} %, 8 rounds)"
    )
    assert lo > 0
    assert text.endswith("differences smaller than that are not trustworthy")


def test_aa_verdict_without_a_bias() -> None:
    c = aa_comparison(_aa_runs(1.0))
    assert not biased(c) and c.verdict not in (stats.FASTER, stats.SLOWER)
    assert aa_sentence(c).startswith("A/A: no bias detected (")
    assert aa_sentence(None) == ""

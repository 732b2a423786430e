"""The overall figure of a SQL workload: the geometric mean of the statements' server
times per variant and round, its ratio to the reference with a 95 % CI over the rounds
(blocklab.analysis.query_overall), checked against scipy."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from blocklab.analysis import query_overall as qo
from blocklab.analysis import stats

# variant -> round -> statement -> ms
DATA = {
    "a": {1: {"q1": 5.0, "q2": 120.0, "q3": 0.8}, 2: {"q1": 5.4, "q2": 118.0, "q3": 0.9},
          3: {"q1": 4.9, "q2": 125.0, "q3": 0.85}, 4: {"q1": 5.1, "q2": 121.0, "q3": 0.82}},
    "b": {1: {"q1": 4.1, "q2": 110.0, "q3": 0.7}, 2: {"q1": 4.6, "q2": 111.0, "q3": 0.8},
          3: {"q1": 4.0, "q2": 119.0, "q3": 0.74}, 4: {"q1": 4.4, "q2": 109.0, "q3": 0.69}},
}  # fmt: skip
LABELS = {"a": "bs=8k", "b": "bs=4k"}


def _times(data: dict[str, dict[int, dict[str, float]]]) -> dict[tuple[str, int, str], list[float]]:
    return {(v, r, s): [ms] for v, rounds in data.items() for r, got in rounds.items()
            for s, ms in got.items()}  # fmt: skip


def test_the_geometric_means_and_the_ratios_ci_are_scipys() -> None:
    o = qo.overall(_times(DATA), LABELS, "a")
    assert o is not None and [v.label for v in o.variants] == ["bs=8k", "bs=4k"]
    a, b = o.variants
    for v, key in ((a, "a"), (b, "b")):
        for rnd, got in DATA[key].items():
            assert v.values[rnd] == pytest.approx(sps.gmean(list(got.values())), rel=1e-12)
    logs = [math.log(b.values[r] / a.values[r]) for r in (1, 2, 3, 4)]
    low, high = sps.t.interval(0.95, len(logs) - 1, loc=np.mean(logs), scale=sps.sem(logs))
    c = b.comparison
    assert c is not None and a.comparison is None
    assert c.ratio == pytest.approx(math.exp(np.mean(logs)), rel=1e-12)
    assert c.ci95_low == pytest.approx(math.exp(low), rel=1e-9)
    assert c.ci95_high == pytest.approx(math.exp(high), rel=1e-9)
    assert c.p_value == pytest.approx(sps.ttest_1samp(logs, 0.0).pvalue, rel=1e-9)
    assert c.ci95_high < 1 and c.verdict == stats.FASTER  # lower time: faster
    assert qo.verdict_words(c) == "faster"
    low, high = ((r - 1) * 100 for r in (c.ci95_low, c.ci95_high))
    gain = f"{(c.ratio - 1) * 100:+.1f} % ({low:+.1f} to {high:+.1f})"
    assert qo.describe(c) == f"{gain}, faster"  # the summary's form, as the first screen
    assert o.statements == {r: ("q1", "q2", "q3") for r in (1, 2, 3, 4)} and not o.left_out


def test_a_statement_missing_in_one_variant_is_left_out_of_that_round_for_all() -> None:
    data = {v: {r: dict(got) for r, got in rounds.items()} for v, rounds in DATA.items()}
    del data["b"][2]["q2"]  # q2 failed in bs=4k, round 2
    o = qo.overall(_times(data), LABELS, "a")
    assert o is not None
    assert o.statements[2] == ("q1", "q3") and o.statements[1] == ("q1", "q2", "q3")
    assert o.left_out == {"q2": [2]}
    a, b = o.variants
    assert a.values[2] == pytest.approx(sps.gmean([5.4, 0.9]), rel=1e-12)  # not q2's 118
    assert b.values[2] == pytest.approx(sps.gmean([4.6, 0.8]), rel=1e-12)
    assert a.values[1] == pytest.approx(sps.gmean([5.0, 120.0, 0.8]), rel=1e-12)
    assert qo.covered(o) == (
        "over the 3 statement(s) that ran in every variant of a round",
        "left out where a variant lacks it: q2 (rounds 2)",
    )


def test_copies_count_once_and_a_round_without_the_reference_is_unpaired() -> None:
    times = _times(DATA)
    times[("a", 1, "q1")] = [4.0, 6.25]  # abba: two runs of the reference in round 1
    times.update({("c", 5, s): [1.0] for s in ("q1", "q2", "q3")})  # only c ran round 5
    o = qo.overall(times, {**LABELS, "c": "bs=16k"}, "a")
    assert o is not None
    assert o.variants[0].values[1] == pytest.approx(sps.gmean([5.0, 120.0, 0.8]), rel=1e-12)
    c = o.variants[2].comparison
    assert c is not None and c.n_pairs == 0 and c.verdict == stats.TOO_FEW


def test_nothing_in_common_gives_no_figure() -> None:
    times = {("a", 1, "q1"): [1.0], ("b", 1, "q2"): [1.0]}
    assert qo.overall(times, LABELS, "a") is None


def test_verdicts_false_alarms_and_detection_under_shared_drift() -> None:
    """Simulated experiments of 6 rounds, 8 statements of very different sizes, each
    round a drift of up to ±30 % on both variants (a busy machine), statement noise 5 %:
    with no difference, "faster" or "slower" at most ~5 % of the time; with a 10 %
    slowdown of every statement, "slower" nearly always; equal within ±2 % needs more
    than noise this size allows, so "undecided" is the honest word when unsure."""
    rng = random.Random(32)
    base = [0.5, 2.0, 5.0, 40.0, 300.0, 1.2, 9.0, 2500.0]

    def verdict(effect: float) -> str:
        times: dict[tuple[str, int, str], list[float]] = {}
        for rnd in range(1, 7):
            drift = math.exp(rng.uniform(-0.3, 0.3))
            for vid, f in (("a", 1.0), ("b", effect)):
                for i, ms in enumerate(base):
                    times[(vid, rnd, f"q{i}")] = [ms * f * drift * math.exp(rng.gauss(0, 0.05))]
        o = qo.overall(times, LABELS, "a")
        assert o is not None and o.variants[1].comparison is not None
        return o.variants[1].comparison.verdict

    null = [verdict(1.0) for _ in range(400)]
    alarms = sum(v in (stats.FASTER, stats.SLOWER) for v in null) / len(null)
    assert alarms <= 0.08  # nominal 5 %: 400 trials, ±2.2 % at one sigma
    slow = [verdict(1.10) for _ in range(200)]
    assert sum(v == stats.SLOWER for v in slow) / len(slow) >= 0.95
    assert not any(v == stats.FASTER for v in slow)


def test_the_summary_and_the_report_page_show_the_overall_line(tmp_path: Path) -> None:
    """Through a store: `blocklab summary`'s lines under the per-query table and the
    queries page's context, with a statement that failed in one variant left out."""
    from pg_results import _register, _run

    from blocklab.analysis.query_summary import summarize_queries
    from blocklab.analysis.query_table import overall_lines
    from blocklab.report.queries import page_context
    from blocklab.store import ResultsDB
    from blocklab.store.base import QueryRow

    with ResultsDB(tmp_path / "results.sqlite") as db:
        _register(db)
        for vid, rounds in DATA.items():
            for rnd, got in rounds.items():
                run = _run(vid, rnd, tps=3600.0)
                run.raw_dir = ""
                run.queries = [QueryRow(q, 1, ms, ms, "fp", "{}") for q, ms in got.items()
                               if not (vid == "b" and rnd == 3 and q == "q3")]  # fmt: skip
                db.record_run(run)
        qs = summarize_queries(db, "e1")
        assert qs is not None and qs.overall is not None
        lines = overall_lines(qs)
        ctx = page_context(qs)
    assert lines[0].startswith("Overall: geometric mean of the statements' server times")
    assert lines[1] == "  left out where a variant lacks it: q3 (rounds 3)"
    assert lines[2].startswith("  A: ") and lines[2].endswith(", reference")
    assert lines[3].startswith("  B: ") and "vs A: -" in lines[3] and "faster" in lines[3]
    a_round3 = sps.gmean([DATA["a"][3]["q1"], DATA["a"][3]["q2"]])
    assert qs.overall.variants[0].values[3] == pytest.approx(a_round3, rel=1e-12)
    assert ctx["overall"] == lines

"""The interleaved design's own A/A verdict and carry-over, from its records' slice
metrics, in the summary, its printed lines and the report's experiment page."""

from __future__ import annotations

import io
import math
import random
import statistics
from pathlib import Path

import pytest
from helpers import small_experiment
from rich.console import Console
from scipy import stats as scipy_stats

from blocklab.analysis import carryover, interleaved_checks
from blocklab.analysis.carryover import CarryOver
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import print_summary
from blocklab.report.data import load_experiment, take_checks
from blocklab.report.pagedata import experiment_json
from blocklab.store import ResultsDB, RunRecord

# two-sided 95 % Student t critical values (tables), by degrees of freedom
T95 = {7: 2.364624251010299, 8: 2.306004135204166}
NOISE = [0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.0, 0.0]  # rounds 1 .. 8
ROUNDS = range(1, 9)


def _expected(log_ratios: list[float]) -> tuple[float, float, float]:
    """(ratio, CI low, CI high) of the paired t interval on the log ratios, here."""
    n = len(log_ratios)
    m = statistics.fmean(log_ratios)
    half = T95[n - 1] * statistics.stdev(log_ratios) / math.sqrt(n)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _two_variants(db: ResultsDB, design: dict[str, object]) -> None:
    """Experiment "il" of the reference "ref" and "new", in `design`."""
    spec = {"design": design}
    small_experiment(
        db, "il", "ref", [("ref", "ref", "{}", {}), ("new", "new", "{}", {})], spec=spec
    )


def _store(db: ResultsDB, aa_bias: float) -> None:
    """Rounds 1..8: both ok; the reference's half 1 = half 0 x aa_bias x (1 + noise), its
    switch/repeat 1.04 x (1 + noise), the other's 1.02 / (1 + noise). Round 9: the
    reference failed (its metrics must be ignored), the other ok with ratio 1.03."""
    _two_variants(db, {"kind": "interleaved", "slice_s": 1, "slices": 4})
    for rnd in ROUNDS:
        base = 1000.0 + 37.0 * rnd  # the round's drift: paired away
        e = NOISE[rnd - 1]
        ref = {
            "aa_tps_half0": base,
            "aa_tps_half1": base * aa_bias * (1 + e),
            "tps_after_switch": base * 1.04 * (1 + e),
            "tps_after_repeat": base,
        }
        new = {"tps_after_switch": 2 * base * 1.02 / (1 + e), "tps_after_repeat": 2 * base}
        new |= {"aa_tps_half0": 2 * base, "aa_tps_half1": 2 * base}
        db.record_run(RunRecord("il", "ref", rnd, 0, "ok", "t0", "t1", tps=base, metrics=ref))
        db.record_run(RunRecord("il", "new", rnd, 1, "ok", "t0", "t1", tps=2 * base, metrics=new))
    bad = {k: 10.0 for k in interleaved_checks.SLICE_METRICS} | {"aa_tps_half0": 1.0}
    db.record_run(
        RunRecord("il", "ref", 9, 0, "failed", "t0", "t1", reason="slice 3: boom", metrics=bad)
    )
    nine = {"tps_after_switch": 1030.0, "tps_after_repeat": 1000.0}
    db.record_run(RunRecord("il", "new", 9, 1, "ok", "t0", "t1", tps=1000.0, metrics=nine))


def _carryover_expected() -> tuple[float, float, float]:
    per_round = [
        statistics.fmean([math.log(1.04 * (1 + e)), math.log(1.02 / (1 + e))]) for e in NOISE
    ]
    return _expected([*per_round, math.log(1.03)])  # round 9: the other variant alone


def _printed(db: ResultsDB) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    print_summary(console, summarize_experiment(db, "il"))
    return " ".join(console.export_text().split())


def test_a_bias_between_the_halves_is_named_and_carry_over_measured(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "results") as db:
        _store(db, aa_bias=1.10)
        s = summarize_experiment(db, "il")
        ratio, lo, hi = _expected([math.log(1.10 * (1 + e)) for e in NOISE])
        assert s.aa is not None and s.aa.n_pairs == 8  # round 9's failed record left out
        assert (s.aa.estimate, s.aa.ci95_low, s.aa.ci95_high) == pytest.approx((ratio, lo, hi))
        assert lo > 1  # the CI excludes 1: a bias
        assert s.aa_label == "ref (Thue-Morse halves of its slices)"
        c = s.carryover
        assert c is not None and c.comparison is not None and c.n_rounds == 9
        k = c.comparison
        assert (k.ratio, k.ci95_low, k.ci95_high) == pytest.approx(_carryover_expected())
        out = _printed(db)
        bias = f"bias of {(ratio - 1) * 100:+.1f} % (95 % CI {(lo - 1) * 100:+.1f} %"
        assert f"A/A: this machine or design shows a {bias}" in out, out
        assert "A/A noise floor (ref (Thue-Morse halves of its slices) half 1 vs half 0" in out
        assert "+10.0 %" in bias
        pct = (_carryover_expected()[0] - 1) * 100
        co = f"slices right after a switch were {pct:.1f} % faster"
        assert co in out, out
        # the two variants' gains, paired by rounds 1 to 8: new's over ref's
        b = c.between
        gains = [math.log(1.02 / (1 + e)) - math.log(1.04 * (1 + e)) for e in NOISE]
        assert b is not None and b.n_pairs == 8
        assert (b.ratio, b.ci95_low, b.ci95_high) == pytest.approx(_expected(gains))
        assert not c.differs and not c.warns  # its CI holds 1: the order cancels a shared gain
        assert (
            "no difference between the two variants' gains detected (-1.9 %, 95 % CI -3.9 % "
            "to +0.1 %): a gain both share cancels in the balanced order"
        ) in out
        # the report's experiment page: the same numbers and sentences
        view = load_experiment(db, "il")
        take_checks(view, s)  # as the site's page takes them
        page = experiment_json(view)
        assert page["aa"]["ratio"] == pytest.approx(ratio, rel=1e-3)
        assert page["aa"]["flagged"] is True and bias in page["aa"]["text"]
        assert page["carryover"]["ratio"] == pytest.approx(_carryover_expected()[0], rel=1e-3)
        assert page["carryover"]["rounds"] == 9 and co in page["carryover"]["text"]


def test_equal_halves_with_noise_show_no_bias(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "results") as db:
        _store(db, aa_bias=1.0)
        s = summarize_experiment(db, "il")
        ratio, lo, hi = _expected([math.log(1 + e) for e in NOISE])
        assert s.aa is not None
        assert (s.aa.estimate, s.aa.ci95_low, s.aa.ci95_high) == pytest.approx((ratio, lo, hi))
        assert lo < 1 < hi
        assert "A/A: no bias detected" in _printed(db)
        # no 1 Hz series: said once, in words, not as "windows of 0 points"
        assert s.stationarity == ["stationarity: not judged (interleaved slices keep no "
                                  "per-second series: a window holds the other server's "
                                  "slices)"]  # fmt: skip


def test_without_slice_metrics_there_is_no_verdict_and_other_metrics_have_none(
    tmp_path: Path,
) -> None:
    with ResultsDB(tmp_path / "results") as db:
        _two_variants(db, {"kind": "interleaved"})
        for rnd in ROUNDS:
            for pos, vid in enumerate(("ref", "new")):
                db.record_run(RunRecord("il", vid, rnd, pos, "ok", "t0", "t1", tps=100.0 + rnd))
        s = summarize_experiment(db, "il")
        assert s.aa is None  # nothing to say
        assert s.carryover is not None and s.carryover.comparison is None
        out = _printed(db)
        assert "design interleaved" in out and "A/A" not in out and "carry-over" not in out
        assert summarize_experiment(db, "il", "latency_avg_ms").aa is None


def test_from_round_log_ratios_is_the_estimate_of_positions() -> None:
    runs = [
        carryover.PositionRun(1, 0, "a", 100.0),
        carryover.PositionRun(1, 1, "b", 100.0),
        carryover.PositionRun(1, 2, "b", 90.0),
        carryover.PositionRun(1, 3, "a", 105.0),
    ]
    # round 1: only b has both: after a switch 100 (pos 1), after a repeat 90 (pos 2)
    assert carryover.round_log_ratios(runs) == pytest.approx({1: math.log(100 / 90)})
    same = carryover.from_round_log_ratios({1: math.log(100 / 90)})
    assert same.comparison is not None and same.comparison.estimate == pytest.approx(100 / 90)
    assert (same.n_rounds, same.note) == (1, "")
    # runs (not slices) are estimated by the model with a drift slope per round
    # (blocklab.analysis.carryover.estimate): one A B B A round cannot separate the two
    got = carryover.estimate(runs)
    assert got.comparison is None and got.note.startswith("not identifiable")
    assert carryover.from_round_log_ratios({}).note == carryover.estimate([]).note != ""


def test_records_with_their_storage_slot_give_the_slot_aa(tmp_path: Path) -> None:
    """Records that carry storage_slot (the slots swapped every two rounds): the summary's
    and the report's A/A is slot 1 / slot 0 over both variants (checks.slot_aa), which
    sees a 5 % bias of slot 1 that the halves (equal here) cannot."""
    with ResultsDB(tmp_path / "results") as db:
        _two_variants(db, {"kind": "interleaved", "slice_s": 1, "slices": 4})
        ref_tps, ref_slot, new_tps = {}, {}, {}
        for rnd in ROUNDS:
            slot = rnd // 2 % 2  # 0 1 1 0 0 1 1 0 ...: rounds 1..8
            e = NOISE[rnd - 1]
            ref_tps[rnd] = 1000.0 * (1.05 if slot else 1.0) * (1 + e)
            new_tps[rnd] = 980.0 * (1.0 if slot else 1.05)
            ref_slot[rnd] = float(slot)
            for pos, (vid, tps, sl) in enumerate(
                (("ref", ref_tps[rnd], slot), ("new", new_tps[rnd], 1 - slot))
            ):
                m = {"storage_slot": float(sl), "aa_tps_half0": tps, "aa_tps_half1": tps}
                db.record_run(RunRecord("il", vid, rnd, pos, "ok", "t0", "t1", tps=tps, metrics=m))
        s = summarize_experiment(db, "il")
        want = interleaved_checks.slot_aa(ref_tps, ref_slot, new_tps)
        assert s.aa == want and want.ci95_low is not None and want.ci95_low > 1
        assert want.estimate == pytest.approx(1.05, rel=0.01)
        # the A/B fits the same slot beside the effect (stats.paired_fit): n - 2 df, and
        # the 5 % slot bias leaves the interval
        (ab,) = [v.comparison for v in s.variants if v.variant_id == "new"]
        assert ab is not None and (ab.df, ab.n_pairs) == (6, 8)
        assert ab.nuisance == pytest.approx(math.log(1.05), abs=0.01)
        assert ab.estimate == pytest.approx(0.98, rel=0.01)
        assert s.aa_label == f"ref {interleaved_checks.SLOT_AA_LABEL}"
        out = _printed(db)
        assert f"A/A noise floor (ref {interleaved_checks.SLOT_AA_LABEL}, 8 rounds)" in out, out
        assert "half 1 vs half 0" not in out


def _gains(rng: random.Random, ref_gain: float, new_gain: float, rounds: int = 8) -> CarryOver:
    """Per round each variant's slices after a switch and after a repeat, with 2 % noise
    on each (log scale): the checks' carry-over of the pair."""
    kinds = []
    for gain in (ref_gain, new_gain):
        repeat = {r: 1000 * math.exp(rng.gauss(0, 0.02)) for r in range(1, rounds + 1)}
        switch = {r: gain * 1000 * math.exp(rng.gauss(0, 0.02)) for r in repeat}
        kinds.append((switch, repeat))
    return interleaved_checks.carry_over(kinds)


def test_a_gain_both_variants_share_is_carry_over_that_cancels_not_a_difference() -> None:
    """500 simulated 8-round experiments each (seed 40): both variants 4.6 % faster after a
    switch is detected as carry-over in 100 % and warned of as a difference between the
    variants in 3 % (nominal 5 %); a 4.6 % gain for one variant only is warned of in 73 %,
    whether or not the average gain is detected."""
    rng = random.Random(40)
    shared = [_gains(rng, 1.046, 1.046) for _ in range(500)]
    one = [_gains(rng, 1.0, 1.046) for _ in range(500)]
    assert sum(c.detected for c in shared) / 500 >= 0.9
    assert sum(c.warns for c in shared) / 500 <= 0.07  # the differential's false alarms
    assert sum(c.warns for c in one) / 500 >= 0.65  # 73 %: 2 % noise on each, 8 rounds
    c = next(c for c in one if c.warns)
    assert "the two variants' gains differ (+" in carryover.sentence(c)
    assert "the comparison may carry it" in carryover.sentence(c)


def test_the_difference_between_the_gains_is_a_paired_t_on_their_log_ratios() -> None:
    """scipy's one-sample t test on the per-round differences of the two variants' log
    gains is the oracle of `between`'s p-value and interval."""
    c = _gains(random.Random(41), 1.01, 1.05, rounds=6)
    assert c.between is not None
    kinds_again = random.Random(41)
    logs = []
    for gain in (1.01, 1.05):
        repeat = [1000 * math.exp(kinds_again.gauss(0, 0.02)) for _ in range(6)]
        switch = [gain * 1000 * math.exp(kinds_again.gauss(0, 0.02)) for _ in range(6)]
        logs.append([math.log(s / p) for s, p in zip(switch, repeat, strict=True)])
    diffs = [b - a for a, b in zip(*logs, strict=True)]
    test = scipy_stats.ttest_1samp(diffs, 0.0)
    low, high = test.confidence_interval(0.95)
    assert c.between.p_value == pytest.approx(test.pvalue, rel=1e-9)
    assert (c.between.ci95_low, c.between.ci95_high) == pytest.approx(
        (math.exp(low), math.exp(high)), rel=1e-9
    )

"""The between-session check (blocklab.analysis.sessions) against statsmodels and scipy,
in simulations with a fixed seed, and through the summary of a stored experiment."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from report_fixture import write_synthetic_results
from scipy import stats as scipy_stats
from statsmodels.stats.anova import anova_lm

from blocklab.analysis import first_screen, sessions
from blocklab.analysis.summary import summarize_experiment
from blocklab.report import answer
from blocklab.store import ResultsDB

SLOTS = [1.0, 1.0, -1.0, -1.0]  # the interleaved design swaps the slots every two rounds


def _slot(rounds: range) -> dict[int, float]:
    return {r: SLOTS[(r - 1) % 4] for r in rounds}


def _data(
    d: np.ndarray, names: list[str]
) -> tuple[dict[int, float], dict[int, float], dict[str, dict[int, str]]]:
    """Reference values 1,000, the variant's exp(d) times that, round r in session names[r-1]."""
    ref = {r: 1000.0 for r in range(1, len(d) + 1)}
    values = {r: 1000.0 * math.exp(float(x)) for r, x in enumerate(d, start=1)}
    of = {r: s for r, s in enumerate(names, start=1)}
    return ref, values, {"v": of, "ref": dict(of)}


def _check(
    d: np.ndarray, names: list[str], slot: dict[int, float] | None
) -> sessions.SessionCheck | None:
    ref, values, of = _data(d, names)
    return sessions.check("v", "bs=4k", ref, values, of, "ref", slot)


def test_the_f_test_is_statsmodels_anova_of_the_two_nested_fits_with_the_slot() -> None:
    rng = np.random.default_rng(20261201)
    names = ["a"] * 6 + ["b"] * 5 + ["c"] * 4
    slot = _slot(range(1, 16))
    d = 0.02 * np.array(list(slot.values())) + rng.normal(0, 0.03, 15)
    d[6:11] += 0.04
    c = _check(d, names, slot)
    assert c is not None
    df = pd.DataFrame({"d": d, "session": names, "slot": list(slot.values())})
    one = smf.ols("d ~ slot", df).fit()
    each = smf.ols("d ~ C(session) + slot", df).fit()
    table = anova_lm(one, each)
    assert c.f_stat == pytest.approx(table["F"][1], rel=1e-9)
    assert c.p_value == pytest.approx(table["Pr(>F)"][1], rel=1e-9)
    levels = {s.name: math.log1p(s.level_pct / 100) for s in c.sessions}
    fitted = smf.ols("d ~ C(session) + slot - 1", df).fit().params
    for name, level in levels.items():
        assert level == pytest.approx(fitted[f"C(session)[{name}]"], rel=1e-9)
    assert [s.rounds for s in c.sessions] == [
        tuple(range(1, 7)),
        tuple(range(7, 12)),
        tuple(range(12, 16)),
    ]


def test_without_the_slot_it_is_scipys_one_way_anova_and_t_interval() -> None:
    rng = np.random.default_rng(7)
    d = rng.normal(0, 0.02, 12)
    d[6:] += 0.08
    names = ["s1"] * 6 + ["s2"] * 6
    c = _check(d, names, None)
    assert c is not None and c.disagree
    oracle = scipy_stats.f_oneway(d[:6], d[6:])
    assert c.f_stat == pytest.approx(oracle.statistic, rel=1e-9)
    assert c.p_value == pytest.approx(oracle.pvalue, rel=1e-9)
    means = np.array([d[:6].mean(), d[6:].mean()])
    low, high = scipy_stats.t.interval(0.95, 1, loc=means.mean(), scale=scipy_stats.sem(means))
    assert c.across_pct == pytest.approx(
        tuple(100 * math.expm1(x) for x in (means.mean(), low, high)), rel=1e-9
    )


def _rate(
    rng: np.random.Generator,
    n: int,
    names: list[str],
    *,
    slot: dict[int, float],
    bias: float,
    effect: float,
    noise: float,
    fit_slot: bool,
) -> tuple[float, float]:
    """Of `n` simulated experiments: the share whose sessions the check calls different,
    and the mean difference between the second session's level and the first's (logs).
    A slot bias `bias` and noise `noise` per round (logs), the second session's answer
    moved by `effect`."""
    rounds = len(names)
    s = np.array(list(slot.values()))
    second = np.array([1.0 if x != names[0] else 0.0 for x in names])
    hits, moved = 0, 0.0
    for _ in range(n):
        d = 0.01 + bias * s + effect * second + rng.normal(0, noise, rounds)
        c = _check(d, names, slot if fit_slot else None)
        assert c is not None
        hits += c.disagree
        a, b = (math.log1p(x.level_pct / 100) for x in c.sessions)
        moved += b - a
    return hits / n, moved / n


def test_with_no_session_effect_it_alarms_at_its_level_and_a_slot_bias_does_not_count() -> None:
    """Sessions of 8 and 3 rounds: the second holds slot 1 twice and slot 0 once. A 10 %
    bias between the slots then moves its plain mean by a third of it (3.3 %), which the
    line would print as the sessions' difference; with the slot fitted, the levels do not
    move and the check alarms in 5 % of experiments, as its level says."""
    rng = np.random.default_rng(20261201)
    names = ["s1"] * 8 + ["s2"] * 3
    slot = _slot(range(1, 12))
    kw = {"slot": slot, "bias": 0.10, "effect": 0.0, "noise": 0.02}
    fitted, fitted_moved = _rate(rng, 4000, names, fit_slot=True, **kw)  # type: ignore[arg-type]
    _, plain_moved = _rate(rng, 4000, names, fit_slot=False, **kw)  # type: ignore[arg-type]
    assert 0.04 <= fitted <= 0.06, fitted  # 5 % +- 1.4 sigma of a 4,000-draw binomial
    assert abs(fitted_moved) < 0.002, fitted_moved
    assert plain_moved == pytest.approx(0.10 / 3, abs=0.002)


def test_a_session_effect_of_5_percent_is_found_in_8_plus_8_rounds_at_3_percent_noise() -> None:
    rng = np.random.default_rng(3)
    names = ["s1"] * 8 + ["s2"] * 8
    found, moved = _rate(
        rng, 2000, names, slot=_slot(range(1, 17)), bias=0.03, effect=0.05, noise=0.03,
        fit_slot=True,
    )  # fmt: skip
    assert found > 0.85, found  # the power of F(1, 13) at a noncentrality of 16.7: about 0.96
    assert moved == pytest.approx(0.05, abs=0.002)


def test_what_moves_both_variants_of_a_session_alike_is_not_a_session_effect() -> None:
    """A slower machine in session 2 (both servers 20 % slower) leaves every round's ratio
    as it was: the same F, the same levels."""
    rng = np.random.default_rng(5)
    d = rng.normal(0, 0.03, 10)
    names = ["s1"] * 5 + ["s2"] * 5
    ref, values, of = _data(d, names)
    slower = {r: (0.8 if r > 5 else 1.0) for r in ref}
    c1 = sessions.check("v", "x", ref, values, of, "ref")
    c2 = sessions.check(
        "v", "x", {r: v * slower[r] for r, v in ref.items()},
        {r: v * slower[r] for r, v in values.items()}, of, "ref",
    )  # fmt: skip
    assert c1 is not None and c2 is not None
    assert c2.f_stat == pytest.approx(c1.f_stat, rel=1e-9)
    assert [s.level_pct for s in c2.sessions] == pytest.approx([s.level_pct for s in c1.sessions])


def test_one_session_no_df_left_or_unseparable_slots_give_no_check() -> None:
    d = np.zeros(6)
    assert _check(d, ["a"] * 6, None) is None
    assert _check(d[:2], ["a", "b"], None) is None  # one round each: nothing within them
    # each session on one slot only: the slot term is the session term
    assert _check(d[:4], ["a", "a", "b", "b"], _slot(range(1, 5))) is None
    ref, values, of = _data(np.zeros(4), ["a", "a", "b", "b"])
    values[1] = 0.0
    assert sessions.check("v", "x", ref, values, of, "ref") is None


def test_rounds_by_session_leaves_out_rounds_split_between_sessions_or_unnamed() -> None:
    runs = [
        ("v", 1, "a"), ("ref", 1, "a"),
        ("v", 2, "a"), ("ref", 2, "b"),  # interrupted: the reference ran again later
        ("v", 3, "b"), ("v", 3, "c"),  # the same variant's copies in two sessions
        ("v", 4, None), ("ref", 4, None),  # stored before sessions were recorded
    ]  # fmt: skip
    assert sessions.rounds_by_session(runs) == {"v": {1: "a", 2: "a"}, "ref": {1: "a", 2: "b"}}
    ref, values, _ = _data(np.zeros(2), ["a", "a"])
    assert sessions.check("v", "x", ref, values, sessions.rounds_by_session(runs), "ref") is None


def test_the_lines_say_which_rounds_gave_what() -> None:
    d = np.array([0.05, 0.04, 0.06, 0.05, -0.03, -0.02, -0.04, -0.03])
    c = _check(d, ["s1"] * 4 + ["s2"] * 4, None)
    assert c is not None and c.disagree
    assert c.line() == (
        "! sessions: bs=4k differed between its 2 sessions (rounds 1-4: +5.1 %, rounds 5-8: "
        "-3.0 %; F = 192.00, p < 0.001): its interval counts rounds, not sessions; across "
        f"sessions +1.0 % ({c.across_pct[1]:+.1f} to {c.across_pct[2]:+.1f})"
    )
    assert c.across_pct[1] < -30 and c.across_pct[2] > 50
    same = _check(np.array([0.01, 0.03, 0.02, 0.02, 0.03, 0.01]), ["a", "b"] * 3, None)
    assert same is not None and not same.disagree
    assert same.line() == (
        "sessions: bs=4k in 2 sessions (rounds 1, 3, 5: +2.0 %, rounds 2, 4, 6: +2.0 %): no "
        "difference between them detected (F = 0.00, p = 1.00); across sessions +2.0 % (+2.0 "
        "to +2.0)"
    )


def _store(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_synthetic_results(
        results, name="two", rounds=6, block_sizes_kb=(4, 8), fs_block_sizes=(4096,),
        failed_run=False,
    )  # fmt: skip
    return results


def _halves(round_no: int) -> str:
    return "s1" if round_no <= 3 else "s2"


def _name_sessions(db: ResultsDB, moved_pct: float, name_of: Callable[[int], str] = _halves) -> str:
    """Each round's runs named with the session `name_of` gives it (their provenance and
    kept facts, as the experiment loop stores them: rounds 1-3 one, 4-6 another); bs=4k's
    tps in rounds 4-6 moved by `moved_pct`. Returns bs=4k's variant id."""
    four = db.conn.execute("SELECT variant_id FROM variants WHERE label LIKE 'bs=4k%'").fetchone()
    stored = (("runs", "provenance_json", "id"), ("run_facts", "facts_json", "run_id"))
    for table, column, key in stored:
        for round_no in range(1, 7):
            db.conn.execute(
                f"UPDATE {table} SET {column} = json_set({column}, '$.session', ?) WHERE "
                f"{key} IN (SELECT id FROM runs WHERE round = ?)",
                (name_of(round_no), round_no),
            )
    db.conn.execute(
        "UPDATE runs SET tps = tps * ? WHERE variant_id = ? AND round > 3",
        (1 + moved_pct / 100, four[0]),
    )
    db.conn.commit()
    return str(four[0])


def test_the_summary_names_sessions_that_disagree_and_flags_the_verdict(tmp_path: Path) -> None:
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        assert summarize_experiment(db, "two").sessions == sessions.Sessions()  # none named
        four = _name_sessions(db, 40.0)
        db.read_ahead("two")  # as the report and `blocklab summary` read them
        s = summarize_experiment(db, "two")
    (c,) = s.sessions.checks
    assert [name for name, _ in s.sessions.rounds_of] == ["s1", "s2"]
    assert c.variant_id == four and c.disagree
    assert [x.rounds for x in c.sessions] == [(1, 2, 3), (4, 5, 6)]
    assert c.sessions[1].level_pct - c.sessions[0].level_pct > 30
    screen = first_screen.first_screen(s)
    assert f"  {c.line()}" in screen
    flagged = [line for line in screen if "! the sessions disagree" in line]
    assert len(flagged) == 1
    # under the verdict, the same comparison counted by sessions: 2 observations, t on 1 df
    verdict = next(i for i, line in enumerate(screen) if line.startswith("  bs=4k"))
    low, high = c.across_pct[1:]
    assert screen[verdict + 1] == (
        f"    across its 2 sessions: undecided, {c.across_pct[0]:+.1f} % ({low:+.1f} to "
        f"{high:+.1f})"
    )
    (got,) = [v for v in answer.verdicts(s) if v["mixed"]]
    assert "the sessions disagree" in got["mixed"]
    assert got["layout"] == screen[verdict + 1].strip()


def test_sessions_that_agree_get_a_plain_line_and_no_flag(tmp_path: Path) -> None:
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        _name_sessions(db, 0.0)
        s = summarize_experiment(db, "two")
        stored = json.loads(db.conn.execute("SELECT facts_json FROM run_facts").fetchone()[0])
    assert stored["session"] in ("s1", "s2")
    (c,) = s.sessions.checks
    screen = first_screen.first_screen(s)
    assert c.line().startswith("sessions: ") and f"  {c.line()}" in screen
    assert not [line for line in screen if "sessions disagree" in line]


def test_one_session_says_the_interval_holds_within_it_and_how_to_add_one(tmp_path: Path) -> None:
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        _name_sessions(db, 0.0, lambda _: "only")
        s = summarize_experiment(db, "two")
    assert s.sessions.checks == ()
    assert (
        "  sessions: 1 (rounds 1-6): the interval holds within it; `--rounds 12` later adds "
        "a second to compare"
    ) in first_screen.first_screen(s)


def test_rounds_that_name_no_session_are_not_claimed_for_one(tmp_path: Path) -> None:
    """Rounds 1-3 stored before sessions were recorded, 4-6 by one session: no line says
    the experiment ran in one."""
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        _name_sessions(db, 0.0, lambda r: "later" if r > 3 else "")
        db.conn.execute(
            "UPDATE runs SET provenance_json = json_remove(provenance_json, "
            "'$.session') WHERE round <= 3"
        )
        db.conn.execute(
            "UPDATE run_facts SET facts_json = json_remove(facts_json, '$.session') "
            "WHERE run_id IN (SELECT id FROM runs WHERE round <= 3)"
        )
        db.conn.commit()
        s = summarize_experiment(db, "two")
    assert s.sessions.unnamed and s.sessions.lines() == []
    assert not [line for line in first_screen.first_screen(s) if "sessions" in line]


def test_a_session_a_round_as_a_fleet_runs_them_holds_across_sessions(tmp_path: Path) -> None:
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        _name_sessions(db, 0.0, lambda r: f"job {r}")
        s = summarize_experiment(db, "two")
    assert s.sessions.checks == ()  # nothing left within a session to test against
    screen = first_screen.first_screen(s)
    assert "  sessions: one a round (6): the interval holds across sessions" in screen


def test_with_a_session_level_the_answer_across_sessions_covers_and_the_pooled_one_does_not() -> (
    None
):
    """4 sessions of 8 rounds, 5 % noise per round and a session level of 2.7 % (the most
    the demos here showed, docs/PRECISION.md): the interval across sessions covers the true
    answer in 95 % of experiments; the t interval of the 32 rounds pooled, about 80 %."""
    rng = np.random.default_rng(20261201)
    names = [f"s{k}" for k in range(4) for _ in range(8)]
    across = pooled = 0
    n = 2000
    for _ in range(n):
        d = np.repeat(rng.normal(0, 0.027, 4), 8) + rng.normal(0, 0.05, 32)
        c = _check(d, names, None)
        assert c is not None
        across += c.across_pct[1] < 0 < c.across_pct[2]
        half = scipy_stats.t.ppf(0.975, 31) * scipy_stats.sem(d)
        pooled += abs(d.mean()) < half
    assert 0.935 <= across / n <= 0.965, across / n
    assert pooled / n < 0.87, pooled / n


def test_three_sessions_that_agree_on_a_large_difference_decide_it_counted_by_sessions(
    tmp_path: Path,
) -> None:
    """The synthetic bs=4k is about 26 % faster in every round: three sessions of two rounds
    agree (no flag), and counted as three observations they still say faster."""
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        _name_sessions(db, 0.0, lambda r: f"s{(r + 1) // 2}")  # rounds 1-2, 3-4, 5-6
        s = summarize_experiment(db, "two")
    (c,) = s.sessions.checks
    assert [x.rounds for x in c.sessions] == [(1, 2), (3, 4), (5, 6)]
    screen = first_screen.first_screen(s)
    verdict = next(i for i, line in enumerate(screen) if line.startswith("  bs=4k"))
    assert not c.disagree
    low, high = c.across_pct[1:]
    assert low > 10
    assert screen[verdict + 1] == (
        f"    across its 3 sessions: faster by {c.across_pct[0]:.1f} % ({low:+.1f} to {high:+.1f})"
    )


def test_of_rounds_keeps_the_rounds_whose_variants_name_one_session() -> None:
    named = {"a": {1: "s1", 2: "s1", 3: "s2", 4: "s2"}, "b": {1: "s1", 2: "s2", 3: "s2"}}
    assert sessions.of_rounds(named) == {1: "s1", 3: "s2", 4: "s2"}
    assert sessions.of_rounds({}) == {}


def test_a_round_split_between_sessions_is_claimed_for_neither() -> None:
    """A fleet's jobs, one a round, but round 3's variants ran in two jobs (one resumed):
    no session holds round 3, so no line counts four sessions in three rounds."""
    named = {"ref": {1: "j1", 2: "j2", 3: "j3"}, "v": {1: "j1", 2: "j2", 3: "j3b"}}
    values = {r: 1000.0 for r in (1, 2, 3)}

    class V:
        def __init__(self, vid: str, ref: str | None):
            self.variant_id, self.label, self.values = vid, vid, values
            self.is_reference, self.reference_id, self.comparison = ref is None, ref, None

    found = sessions.find([V("ref", None), V("v", "ref")], named, {})
    assert found.rounds_of == (("j1", (1,)), ("j2", (2,)))
    assert found.unnamed and found.lines() == []

"""The experiment loop against a lab that replays recorded real pgbench output.

Each replayed run takes its tps from successive `-P 1` lines of a real pgbench run (so
values vary as real ones do); the aborted recording replays as a failed run. The real
end-to-end loop, with builds and servers, is in test_experiment_real.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import Silent

from blocklab import experiment_file as spec
from blocklab.analysis import kept_trends, stationarity
from blocklab.analysis.summary import summarize_experiment
from blocklab.errors import UserError
from blocklab.execution import orders
from blocklab.execution.experiment import Loop, StoppingRule, register
from blocklab.model import Variant
from blocklab.store import ResultsDB, RunRecord
from blocklab.workloads import pgbench

DATA = Path(__file__).parents[1] / "data" / "pgbench"


def _experiment(rounds: int = 3) -> spec.Experiment:
    return spec.from_dict(
        {
            "experiment": {"name": "loop", "rounds": rounds, "reference": {"block_size": 8}},
            "matrix": {"postgres": "18", "block_size": [2, 4, 8], "duration": 5},
        },
        base=DATA,
    )


class ReplayLab:
    """Replays recorded real pgbench output; `fail_calls` replays the aborted run."""

    def __init__(
        self, fail_calls: frozenset[int] = frozenset(), *, series: bool = False, build: str = ""
    ):
        stderr = (DATA / "pg15-simple-update-prepared.stderr").read_text()
        self.tps = itertools.cycle([p.tps for p in pgbench.parse_progress(stderr)])
        self.aborted = pgbench.parse_report((DATA / "pg15-aborted.stdout").read_text())
        self.fail_calls = fail_calls
        self.series = series  # each ok run with a 20-second tps series of replayed values
        self.build = build  # the build key each ok run's provenance names ("": none)
        self.calls: list[tuple[str, int]] = []

    def run(self, variant, *, experiment, round_no, position, raw_dir):  # type: ignore[no-untyped-def]
        self.calls.append((variant.variant_id, round_no))
        assert raw_dir.is_dir() and not any(raw_dir.iterdir())
        common = dict(
            experiment=experiment,
            variant_id=variant.variant_id,
            round=round_no,
            position=position,
            started_at="t0",
            ended_at="t1",
        )
        if len(self.calls) - 1 in self.fail_calls:
            return RunRecord(
                status="failed",
                reason="pgbench exit code 2",
                exit_code=2,
                transactions=self.aborted.transactions,
                **common,
            )
        rec = RunRecord(status="ok", tps=next(self.tps), latency_avg_ms=0.7, exit_code=0, **common)
        if self.series:
            rec.series = {"tps": [(float(t), next(self.tps)) for t in range(1, 21)]}
        if self.build:
            rec.provenance = {"build_key": self.build}
        return rec


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    with ResultsDB(tmp_path / "results") as d:
        yield d


def test_rounds_run_every_variant_once_in_the_seeded_order(db: ResultsDB) -> None:
    exp = _experiment(rounds=3)
    variants = register(db, exp, {})
    lab = ReplayLab()
    out = Loop(exp, variants, db=db, lab=lab, progress=Silent()).run(StoppingRule(rounds=3))
    assert out.runs_done == 9 and out.runs_failed == 0
    ids = [v.variant_id for v in variants]
    for r in (1, 2, 3):
        in_round = [vid for vid, rn in lab.calls if rn == r]
        assert in_round == orders.round_order(ids, exp.seed, r)
        assert sorted(in_round) == sorted(ids)
    stored = [(row["variant_id"], row["round"]) for row in db.runs("loop")]
    assert len(stored) == len(set(stored)) == 9
    assert out.end_reason.startswith("planned rounds done")


def test_a_failed_run_is_stored_without_numbers(db: ResultsDB) -> None:
    exp = _experiment(rounds=1)
    variants = register(db, exp, {})
    Loop(exp, variants, db=db, lab=ReplayLab(frozenset({1})), progress=Silent()).run(
        StoppingRule(rounds=1)
    )
    failed = [r for r in db.runs("loop") if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["tps"] is None and failed[0]["exit_code"] == 2
    s = summarize_experiment(db, "loop")
    assert sum(v.n_failed for v in s.variants) == 1


def test_each_run_is_judged_as_it_is_stored_and_never_again(
    db: ResultsDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop keeps each successful run's stationarity trends with its row
    (kept_trends.judged), the very ones judging its stored series again gives, so the
    summary judges none; a failed run is not judged."""
    exp = _experiment(rounds=2)
    variants = register(db, exp, {})
    lab = ReplayLab(frozenset({1}), series=True)
    Loop(exp, variants, db=db, lab=lab, progress=Silent()).run(StoppingRule(rounds=2))
    runs = db.runs("loop")
    ok = [int(r["id"]) for r in runs if r["status"] == "ok"]
    failed = [int(r["id"]) for r in runs if r["status"] != "ok"]
    assert len(ok) == 5 and len(failed) == 1
    kept = db.run_trends([*ok, *failed], stationarity.METHOD)
    assert sorted(kept) == ok and all(len(rows) == 2 for rows in kept.values())  # run, tps
    judged: list[int] = []
    judge = stationarity.runs_trends
    monkeypatch.setattr(stationarity, "runs_trends", lambda rs: judged.extend(rs) or judge(rs))
    s = summarize_experiment(db, "loop")
    assert judged == [] and s.stationarity
    by_run = {"all": ok}
    assert kept_trends.windows_of(db, by_run) == kept_trends.windows_of(db, by_run, fresh=True)
    assert len(judged) == len(ok)


def test_resume_keeps_stored_runs_discards_partial_ones_and_duplicates_none(
    db: ResultsDB,
) -> None:
    exp = _experiment(rounds=2)
    variants = register(db, exp, {})
    first = ReplayLab()
    loop = Loop(exp, variants, db=db, lab=first, progress=Silent())
    done: set[tuple[str, int]] = set()
    loop.run_round(1, done)
    # an interrupted invocation left the raw directory of a run it never stored
    order2 = orders.round_order([v.variant_id for v in variants], exp.seed, 2)
    from blocklab.execution.experiment import raw_dir_for

    partial = raw_dir_for(db.directory, "loop", 2, exp.variant(order2[0]))
    partial.mkdir(parents=True)
    (partial / "pgbench.stdout").write_text("half a run")
    second = ReplayLab()
    out = Loop(exp, register(db, exp, {}), db=db, lab=second, progress=Silent()).run(
        StoppingRule(rounds=2)
    )
    assert [rn for _, rn in second.calls] == [2, 2, 2]
    assert out.runs_done == 3
    stored = [(r["variant_id"], r["round"]) for r in db.runs("loop")]
    assert len(stored) == len(set(stored)) == 6
    assert not (partial / "pgbench.stdout").exists()


def test_until_ci_adds_rounds_until_max_rounds_and_says_so(db: ResultsDB) -> None:
    exp = _experiment(rounds=2)
    variants = register(db, exp, {})
    out = Loop(exp, variants, db=db, lab=ReplayLab(), progress=Silent()).run(
        StoppingRule(rounds=2, until_ci_pct=0.001, max_rounds=3)
    )
    assert out.rounds_done == 3
    assert "max rounds reached (3)" in out.end_reason
    assert len(db.runs("loop")) == 9


def test_until_ci_stops_early_when_the_budget_cannot_reach_the_target(db: ResultsDB) -> None:
    exp = _experiment(rounds=2)
    variants = register(db, exp, {})
    out = Loop(exp, variants, db=db, lab=ReplayLab(), progress=Silent()).run(
        StoppingRule(rounds=2, until_ci_pct=0.001, max_rounds=50)
    )
    assert out.rounds_done == 3  # the first round with enough to judge
    assert "stopped early: the budget cannot reach a CI half-width of 0.001 %" in out.end_reason
    assert "the budget allows 50" in out.end_reason


def test_abba_stores_both_copies_and_the_summary_pairs_rounds(db: ResultsDB) -> None:
    exp = spec.from_dict(
        {
            "experiment": {"name": "loop", "rounds": 2, "reference": {"block_size": 8}},
            "design": {"kind": "abba"},
            "matrix": {"postgres": "18", "block_size": [4, 8], "duration": 5},
        },
        base=DATA,
    )
    variants = register(db, exp, {})
    lab = ReplayLab()
    Loop(exp, variants, db=db, lab=lab, progress=Silent()).run(StoppingRule(rounds=2))
    keys = sorted((r["variant_id"], r["round"], r["copy_index"]) for r in db.runs("loop"))
    ids = sorted(v.variant_id for v in variants)
    assert keys == [(v, r, c) for v in ids for r in (1, 2) for c in (0, 1)]
    first = [vid for vid, rnd in lab.calls if rnd == 1]
    assert first == first[::-1]  # A B B A
    s = summarize_experiment(db, "loop")
    (other,) = [v for v in s.variants if not v.is_reference]
    assert other.comparison is not None and other.comparison.n_pairs == 2
    assert s.design == "abba"


def test_until_ci_stops_after_the_rounds_the_first_stage_planned(db: ResultsDB) -> None:
    """Not at the first narrow interval (that stop lowered the coverage): after the rounds
    planned from the first stage's noise, at least 12 beyond the first stage
    (blocklab.analysis.stopping)."""
    exp = _experiment(rounds=3)
    variants = register(db, exp, {})
    out = Loop(exp, variants, db=db, lab=ReplayLab(), progress=Silent()).run(
        StoppingRule(rounds=3, until_ci_pct=99.0, max_rounds=20)
    )
    assert out.rounds_done == 15
    assert "the 15 rounds planned from the first 3 rounds' noise are done" in out.end_reason
    assert "widest CI half-width" in out.end_reason and "<= 99 %" in out.end_reason


def test_time_budget_ends_the_experiment(db: ResultsDB) -> None:
    exp = _experiment(rounds=5)
    variants = register(db, exp, {})
    ticks = itertools.count(0.0, 10.0)
    out = Loop(
        exp, variants, db=db, lab=ReplayLab(), progress=Silent(), clock=lambda: next(ticks)
    ).run(StoppingRule(rounds=5, time_budget_s=45.0))
    assert out.end_reason == "time budget reached"
    assert out.rounds_done < 5


def test_a_changed_matrix_under_the_same_name_is_refused(db: ResultsDB) -> None:
    from blocklab.errors import UserError

    register(db, _experiment(rounds=2), {})
    register(db, _experiment(rounds=5), {})  # more rounds: the same experiment
    other = spec.from_dict(
        {
            "experiment": {"name": "loop", "reference": {"block_size": 8}},
            "matrix": {"postgres": "18", "block_size": [4, 8]},
        },
        base=DATA,
    )
    with pytest.raises(UserError, match="different definition"):
        register(db, other, {})


def test_grouped_aa_control_runs_and_pairs_every_groups_reference(db: ResultsDB) -> None:
    # two reference groups (one per client count): each reference runs a second copy in
    # every round, and the A/A comparison pairs the copies of both groups
    exp = spec.from_dict(
        {
            "experiment": {"name": "loop", "rounds": 2, "reference": {"block_size": 8}},
            "design": {"kind": "aa-control"},
            "matrix": {"postgres": "18", "block_size": [4, 8], "clients": [1, 2], "duration": 5},
        },
        base=DATA,
    )
    refs = exp.reference_ids()
    assert len(refs) == 2
    variants = register(db, exp, {})
    lab = ReplayLab()
    loop = Loop(exp, variants, db=db, lab=lab, progress=Silent())
    assert loop.runs_per_round() == 6
    out = loop.run(StoppingRule(rounds=2))
    assert out.runs_done == 12 and out.runs_failed == 0
    for ref in refs:
        copies = sorted((r["round"], r["copy_index"]) for r in db.runs("loop", ref))
        assert copies == [(1, 0), (1, 1), (2, 0), (2, 1)]
    s = summarize_experiment(db, "loop")
    assert s.aa is not None and s.aa.n_pairs == 2
    assert set(s.aa_label.split(", ")) == {exp.variant(r).label for r in refs}


def test_a_resume_on_another_build_is_refused_before_anything_runs(db: ResultsDB) -> None:
    """A patch edited in place between two sessions: the stored runs name build K1, this
    session would make K2. Refused (exit 2) while runs are left to do, naming each variant
    and both builds; the same build, or nothing left to run, goes on."""
    exp = _experiment(rounds=2)
    variants = register(db, exp, {})
    Loop(exp, variants, db=db, lab=ReplayLab(build="K1"), progress=Silent()).run(
        StoppingRule(rounds=2)
    )
    lab = ReplayLab(build="K2")
    loop = Loop(exp, variants, db=db, lab=lab, progress=Silent())
    with pytest.raises(UserError) as e:
        loop.check_builds(StoppingRule(rounds=3), lambda v: "K2")
    assert e.value.exit_code == 2 and lab.calls == []
    for v in variants:
        assert f"{v.label}: stored runs on K1; now K2" in str(e.value)
    assert "([experiment] name)" in str(e.value)
    with pytest.raises(UserError):  # adaptive rounds may always run more
        loop.check_builds(StoppingRule(rounds=2, until_ci_pct=2.0), lambda v: "K2")
    loop.check_builds(StoppingRule(rounds=2), lambda v: "K2")  # nothing left: its summary
    loop.check_builds(StoppingRule(rounds=3), lambda v: "K1")  # the same build: resumed
    assert loop.run(StoppingRule(rounds=3)).runs_done == 3


def test_a_fleet_job_on_another_build_is_refused_while_its_round_has_runs_left(
    db: ResultsDB,
) -> None:
    """A fleet agent's job (one round of one host): refused before anything is built when
    a run of its round is left to do and the host's stored runs name another build; a
    round already done, or the same build, is not refused. Another host's runs do not
    count."""
    exp = _experiment(rounds=1)
    variants = register(db, exp, {})
    Loop(exp, variants, db=db, lab=ReplayLab(build="K1"), progress=Silent(), host="h1").run(
        StoppingRule(rounds=1)
    )
    lab = ReplayLab(build="K2")
    loop = Loop(exp, variants, db=db, lab=lab, progress=Silent(), host="h1")
    with pytest.raises(UserError, match="stored runs on K1; now K2") as e:
        loop.check_round_builds(2, lambda v: "K2")
    assert e.value.exit_code == 2 and lab.calls == []
    loop.check_round_builds(1, lambda v: "K2")  # round 1 is done: nothing runs
    loop.check_round_builds(2, lambda v: "K1")  # the same build: goes on
    other = Loop(exp, variants, db=db, lab=lab, progress=Silent(), host="h2")
    other.check_round_builds(2, lambda v: "K2")  # h2 stored nothing
    assert lab.calls == []


def test_a_first_session_asks_for_no_build_key(db: ResultsDB) -> None:
    exp = _experiment(rounds=1)
    variants = register(db, exp, {})
    loop = Loop(exp, variants, db=db, lab=ReplayLab(), progress=Silent())

    def never(v: Variant) -> str:
        raise AssertionError("no stored run: no build key needed")

    loop.check_builds(StoppingRule(rounds=1), never)

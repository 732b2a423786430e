"""The experiment loop with the interleaved design: one call per round, one stored record
per variant (copy 0, position of its first slice), a stored round skipped on resume and a
partial one run again whole with only its missing record stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from helpers import Silent

from blocklab import experiment_file as spec
from blocklab.execution import orders
from blocklab.execution.experiment import Loop, StoppingRule, register
from blocklab.execution.run_state import RunLabel
from blocklab.experiment_file.design import RunDesign
from blocklab.model import Variant
from blocklab.store import ResultsDB, RunRecord


class RoundLab:
    """Answers each interleaved round with one record per variant, tps 100 + round."""

    def __init__(self) -> None:
        self.rounds: list[int] = []

    def run(self, variant, *, experiment, round_no, position, raw_dir):  # type: ignore[no-untyped-def]
        raise AssertionError("interleaved rounds are run as one piece")

    def run_interleaved(
        self,
        variants: Sequence[Variant],
        design: RunDesign,
        raw_dirs: Mapping[str, Path],
        *,
        label: RunLabel,
        seed: int,
    ) -> dict[str, RunRecord]:
        self.rounds.append(label.round_no)
        assert design.kind == "interleaved" and len(variants) == 2
        ids = [v.variant_id for v in variants]
        order = orders.round_slices(ids, seed=seed, slices=design.slices, round_no=label.round_no)
        assert order[0] == ids[0]  # the variants come in the round's slot order
        return {
            vid: RunRecord(
                experiment=label.experiment,
                variant_id=vid,
                round=label.round_no,
                position=order.index(vid),
                status="ok",
                started_at="t0",
                ended_at="t1",
                tps=100.0 + label.round_no + (5 if i else 0),
                raw_dir=str(raw_dirs[vid]),
            )
            for i, vid in enumerate(ids)
        }


def _experiment() -> spec.Experiment:
    return spec.from_dict(
        {
            "experiment": {"name": "il", "rounds": 2, "reference": {"block_size": 8}},
            "design": {"kind": "interleaved", "slice_s": 1, "slices": 2},
            "matrix": {"postgres": "18", "block_size": [4, 8], "duration": 5},
        },
        base=Path("."),
    )


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    with ResultsDB(tmp_path / "results") as d:
        yield d


def test_one_call_per_round_and_one_record_per_variant(db: ResultsDB) -> None:
    exp = _experiment()
    lab = RoundLab()
    out = Loop(exp, register(db, exp, {}), db=db, lab=lab, progress=Silent()).run(
        StoppingRule(rounds=2)
    )
    assert lab.rounds == [1, 2] and out.runs_done == 4
    keys = db.run_keys("il")
    assert keys == {(v.variant_id, r, 0) for v in exp.variants() for r in (1, 2)}
    positions = sorted((r["round"], r["position"]) for r in db.runs("il"))
    assert positions == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_resume_skips_stored_rounds_and_reruns_a_partial_one(db: ResultsDB) -> None:
    exp = _experiment()
    variants = register(db, exp, {})
    first = RoundLab()
    loop = Loop(exp, variants, db=db, lab=first, progress=Silent())
    done: set[tuple[str, int, int]] = set()
    loop.run_round(1, done)
    # round 2 interrupted after its first store: only one record of it
    by_id = {v.variant_id: v for v in variants}
    one = first.run_interleaved(
        [by_id[s.variant_id] for s in loop.slots(2)],
        exp.run_design,
        {v.variant_id: Path("x") for v in variants},
        label=RunLabel("il", 2, 0),
        seed=exp.seed,
    )
    kept = next(iter(one.values()))
    db.record_run(kept)
    second = RoundLab()
    Loop(exp, variants, db=db, lab=second, progress=Silent()).run(StoppingRule(rounds=2))
    assert second.rounds == [2]  # round 1 skipped, round 2 run again whole
    rows = db.runs("il")
    assert len(rows) == 4 and len({(r["variant_id"], r["round"]) for r in rows}) == 4
    assert not list(db.directory.rglob("*-rerun"))  # the re-run's twin output is removed


class Events(Silent):
    def __init__(self) -> None:
        self.started: list[tuple[str, int, int]] = []
        self.finished: list[tuple[str, float]] = []

    def run_started(self, label: str, round_no: int, position: int) -> None:
        self.started.append((label, round_no, position))

    def run_finished(self, record: RunRecord, elapsed_s: float) -> None:
        self.finished.append((record.variant_id, elapsed_s))


def test_progress_names_each_record_and_splits_the_round_between_them(db: ResultsDB) -> None:
    exp = _experiment()
    variants = register(db, exp, {})
    ticks = iter([0.0, 100.0, 160.0])  # Loop's start, the round's start, its end
    events = Events()
    loop = Loop(exp, variants, db=db, lab=RoundLab(), progress=events, clock=lambda: next(ticks))
    loop.run_round(1, set())
    labels = {v.variant_id: v.label for v in variants}
    first, second = (s.variant_id for s in loop.slots(1))
    assert events.started == [
        (f"{labels[first]} / {labels[second]}", 1, 0),  # while the round runs
        (labels[first], 1, 0),
        (labels[second], 1, 1),
    ]
    assert events.finished == [(first, 30.0), (second, 30.0)]  # 60 s shared: the ETA's unit

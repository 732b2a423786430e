"""analysis.summary_memo: the summary a resident process makes with its memo is the summary
made without one, update after update; a reduction or comparison is taken again only for
the same runs (by id, start and end), and the memo keeps only what an update used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.analysis import summary
from blocklab.analysis.summary import ExperimentSummary, summarize_experiment
from blocklab.analysis.summary_memo import SummaryMemo
from blocklab.store import ResultsDB

NAME = "synthetic-geometry"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return write_synthetic_results(tmp_path / "results", rounds=3, seconds=10)


def _summary(results: Path, memo: SummaryMemo | None) -> ExperimentSummary:
    """One update's summary: with `memo`, begun and kept as report.summaries does."""
    with ResultsDB(results, create=False) as db:
        db.read_ahead(NAME)
        if memo is None:
            return summarize_experiment(db, NAME)
        memo.begin(memo.windows or {})
        made = summarize_experiment(db, NAME, memo=memo)
        memo.keep(memo.delta())
        return made


def _first_variant(results: Path) -> str:
    with ResultsDB(results, create=False) as db:
        return str(db.variants(NAME)[0]["variant_id"])


def test_the_summary_with_the_memo_is_the_one_made_without(results: Path) -> None:
    memo = SummaryMemo()
    for seed in range(3):
        with_memo, without = _summary(results, memo), _summary(results, None)
        assert with_memo == without
        assert with_memo.side and with_memo.stationarity  # the side metrics and windows too
        add_synthetic_run(results, NAME, seconds=10, seed=seed)


def test_only_the_changed_variant_is_reduced_and_compared_again(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo = SummaryMemo()
    _summary(results, memo)
    compared: list[Any] = []
    real_compare = summary.compare
    monkeypatch.setattr(
        summary, "compare", lambda *a, **k: compared.append(a) or real_compare(*a, **k)
    )
    kept = dict(memo.reductions)
    _summary(results, memo)  # nothing new: all taken again
    assert compared == [] and memo.reductions == kept
    add_synthetic_run(results, NAME, seconds=10)  # the first variant's run, in a new round
    memo.begin(memo.windows or {})
    with ResultsDB(results, create=False) as db:
        db.read_ahead(NAME)
        summarize_experiment(db, NAME, memo=memo)
    delta = memo.delta()
    assert {key[1] for key in delta.made} == {_first_variant(results)}
    assert compared  # its comparisons made again (or those against it, a reference)
    memo.keep(delta)
    assert len(memo.reductions) == len(kept)  # the first variant's old ones dropped
    assert set(memo.reductions) - set(kept) == set(delta.made)


def test_a_run_given_again_with_another_start_is_reduced_again(results: Path) -> None:
    """A run removed and its id given to another (another start): its variant's
    reductions are not taken from the memo."""
    memo = SummaryMemo()
    _summary(results, memo)
    with ResultsDB(results, create=False) as db:
        run = next(r for r in db.runs(NAME) if r["status"] == "ok")
        db.conn.execute(
            "UPDATE runs SET started_at = ?, tps = tps * 2 WHERE id = ?",
            ("2030-01-01T00:00:00+00:00", run["id"]),
        )
        db.conn.commit()
    assert _summary(results, memo) == _summary(results, None)

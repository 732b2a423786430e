"""Summary and report of a fleet's runs: one per host, rounds paired within a host only,
the same on SQLite and PostgreSQL (a real server, tests/store/test_results_postgres.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pg_results import _register, _run

from blocklab.analysis.summary import summarize_by_host, summarize_experiment
from blocklab.errors import UserError
from blocklab.report import data
from blocklab.store import ResultsStore

# host -> variant -> tps per round; pairing across hosts would pair 100 with 1000
TPS = {
    "fast": {"a": [1000.0, 1010.0, 990.0], "b": [1100.0, 1115.0, 1085.0]},
    "slow": {"a": [100.0, 104.0, 96.0], "b": [90.0, 93.0, 87.0]},
}


def _fleet_runs(db: ResultsStore) -> None:
    _register(db)
    for host, by_variant in TPS.items():
        for vid, values in by_variant.items():
            for rnd, tps in enumerate(values, start=1):
                db.record_run(replace(_run(vid, rnd, tps), host=host))


def test_summary_per_host_never_pairs_across_hosts(store: ResultsStore) -> None:  # noqa: F811
    _fleet_runs(store)
    with pytest.raises(UserError, match="hosts fast, slow"):
        summarize_experiment(store, "e1")
    by_host = dict(summarize_by_host(store, "e1"))
    assert list(by_host) == ["fast", "slow"]
    fast_b = next(v for v in by_host["fast"].variants if v.variant_id == "b")
    slow_b = next(v for v in by_host["slow"].variants if v.variant_id == "b")
    assert fast_b.values == {1: 1100.0, 2: 1115.0, 3: 1085.0}
    assert fast_b.comparison is not None and slow_b.comparison is not None
    assert fast_b.comparison.n_pairs == 3 and fast_b.comparison.estimate == pytest.approx(
        1.1, rel=1e-3
    )  # b 10 % faster on fast
    assert slow_b.comparison.estimate == pytest.approx(0.9, rel=1e-3)  # and 10 % slower on slow
    views = data.load_experiments(store)
    assert [v.name for v in views] == ["e1 @ fast", "e1 @ slow"]
    assert {r.tps for r in views[1].runs} == set(TPS["slow"]["a"] + TPS["slow"]["b"])


def test_same_fleet_summary_on_sqlite_and_postgresql(tmp_path: Path, pg_uri: str) -> None:  # noqa: F811
    from blocklab.store.factory import open_store

    tables = []
    for spec in (str(tmp_path / "results"), pg_uri):
        with open_store(spec) as db:
            _fleet_runs(db)
            tables.append(
                [(h, [(v.variant_id, v.values, v.comparison) for v in s.variants])
                 for h, s in summarize_by_host(db, "e1")]
            )  # fmt: skip
    assert tables[0] == tables[1]

"""Each run's stationarity trends are judged once and kept in the results store
(blocklab.analysis.kept_trends, schema version 5): kept ones read back give the very
Windows judging gives, runs without them are judged and kept, `fresh` judges all again,
and trends kept under another METHOD are judged again. SYNTHETIC results
(tests/report_fixture.py): one variant's full-page images/s decay through every run."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.analysis import kept_trends, stationarity
from blocklab.analysis.summary import summarize_experiment
from blocklab.store import ResultsDB, RunRecord

NAME = "synthetic-geometry"
STORM = "4k8wext41024"


def _ids(db: ResultsDB) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in db.runs(NAME):
        if r["status"] == "ok":
            out.setdefault(r["variant_id"], []).append(int(r["id"]))
    return out


def _judged(monkeypatch: Any) -> list[int]:
    """Counts the runs judged (stationarity.runs_trends) from now on."""
    calls: list[int] = []
    judge = stationarity.runs_trends

    def counted(runs: Any) -> Any:
        calls.extend([1] * len(runs))
        return judge(runs)

    monkeypatch.setattr(stationarity, "runs_trends", counted)
    return calls


def test_kept_trends_read_back_as_judged(tmp_path: Path, monkeypatch: Any) -> None:
    results = write_synthetic_results(
        tmp_path / "results", block_sizes_kb=(4, 8), fs_block_sizes=(1024,), fpi_storm=STORM
    )
    with ResultsDB(results, create=False) as db:
        ids = _ids(db)
        n = sum(len(v) for v in ids.values())
        series = {
            label: [s for _, s in db.series_of_runs(run_ids)] for label, run_ids in ids.items()
        }
        judged = {label: stationarity.windows(s) for label, s in series.items()}
        lines = stationarity.summary_lines(series)
        calls = _judged(monkeypatch)
        first = kept_trends.windows_of(db, ids)
        assert len(calls) == n and first == judged
        assert any(t.drifted for ws in first.values() for w in ws for t in w.trends.values())
        again = kept_trends.windows_of(db, ids)  # read back: nothing judged
        assert len(calls) == n and again == judged
        kept_trends.windows_of(db, ids, fresh=True)
        assert len(calls) == 2 * n
        assert stationarity.window_lines(again) == lines
    run_id = add_synthetic_run(results, NAME)
    with ResultsDB(results, create=False) as db:
        ids = _ids(db)
        assert run_id in [i for v in ids.values() for i in v]
        kept_trends.windows_of(db, ids)
        assert len(calls) == 2 * n + 1  # only the new run is judged
        monkeypatch.setattr(stationarity, "METHOD", "another-test")
        kept_trends.windows_of(db, ids)
        assert len(calls) == 3 * n + 2  # kept under another method: judged again


def test_the_summary_says_the_same_from_kept_trends(tmp_path: Path) -> None:
    results = write_synthetic_results(
        tmp_path / "results", block_sizes_kb=(4, 8), fs_block_sizes=(1024,), fpi_storm=STORM
    )
    with ResultsDB(results, create=False) as db:
        judged = summarize_experiment(db, NAME, "tps").stationarity
        kept = summarize_experiment(db, NAME, "tps").stationarity
        fresh = summarize_experiment(db, NAME, "tps", fresh_trends=True).stationarity
    assert judged == kept == fresh
    assert any(line.startswith(stationarity.FINDING_PREFIX) for line in judged)


def test_the_store_keeps_trend_rows_exactly(tmp_path: Path) -> None:
    results = write_synthetic_results(tmp_path / "results", rounds=1)
    with ResultsDB(results, create=False) as db:
        run_id = int(db.runs(NAME)[0]["id"])
        rows = [
            (run_id, "", 60, None, None, None, None, None, None),
            (run_id, "tps", 60, 1234.5678901234567, 0.1 + 0.2, 1e-300, math.inf, 0.049, 1),
        ]
        db.keep_run_trends("m1", rows)
        assert db.run_trends([run_id], "m1") == {run_id: [r[1:] for r in rows]}
        assert db.run_trends([run_id], "m2") == {}
        db.keep_run_trends("m2", rows[:1])  # replaces the run's rows of any method
        assert db.run_trends([run_id], "m1") == {}
        assert db.run_trends([run_id], "m2") == {run_id: [rows[0][1:]]}


def _untidy_run(seconds: int = 60) -> RunRecord:
    """A run as a lab may hand it over: its points out of order, a second given twice
    (the store keeps the last value), a second not measured, a series no judge reads."""
    tps = [(float(t), 1000.0 + 3.0 * t + (t % 7)) for t in range(seconds)]
    fpi = [(float(t), 2000.0 * 0.95**t) for t in range(seconds)]
    tps[10] = (10.0, None)
    return RunRecord(
        experiment=NAME,
        variant_id="8k8wext41024",
        round=9,
        position=0,
        status="ok",
        started_at="2025-06-01T12:00:00+00:00",
        ended_at="2025-06-01T12:01:00+00:00",
        tps=1090.0,
        series={
            "tps": [*reversed(tps), (20.0, 5.0), (20.0, tps[20][1])],
            "wal_fpi_per_s": fpi,
            "not_judged": [(0.0, 1.0)],
        },
    )


def test_trends_judged_before_storing_are_those_judged_from_the_store(tmp_path: Path) -> None:
    """kept_trends.judged (the experiment loop, before it stores a run) gives the rows
    judging the stored run gives (windows_of, fresh), and record_run keeps them with the
    run in its transaction."""
    results = write_synthetic_results(tmp_path / "results", rounds=1, failed_run=False)
    rec = _untidy_run()
    method, rows = kept_trends.judged(rec.series)
    assert method == stationarity.METHOD
    assert {r[0] for r in rows} == {kept_trends.RUN_ROW, "tps", "wal_fpi_per_s"}
    assert any(r[-1] for r in rows[1:])  # the image storm drifted: not a trivial window
    with ResultsDB(results, create=False) as db:
        plain = db.record_run(rec)
        assert db.run_trends([plain], method) == {}
        kept_trends.windows_of(db, {"": [plain]}, fresh=True)
        assert db.run_trends([plain], method) == {plain: rows}
        with_trends = db.record_run(dataclasses.replace(rec, copy_index=1), (method, rows))
        assert db.run_trends([with_trends], method) == {with_trends: rows}


# The functions a kept trend comes from: a change to any of them changes what judging
# gives, so TEST_VERSION (and with it stationarity.METHOD) must change with it.
JUDGED_BY = (
    "_finite",
    "_Fit",
    "_fit",
    "change_pct",
    "_offset",
    "_logs",
    "p_values",
    "diff_scale",
    "shift_statistic",
    "_null_statistics",
    "runs_trends",
    "windows",
    "_points",
)
JUDGED_BY_DIGEST = "51f0fc2cdd72cead"


def test_a_change_to_the_test_changes_its_method() -> None:
    """Bump stationarity.TEST_VERSION, then pin the new digest here."""
    source = "".join(inspect.getsource(getattr(stationarity, f)) for f in JUDGED_BY)
    digest = hashlib.sha256(f"{stationarity.TEST_VERSION}\n{source}".encode()).hexdigest()
    assert digest[:16] == JUDGED_BY_DIGEST, (
        "the stationarity test's code changed: bump stationarity.TEST_VERSION and pin "
        f"JUDGED_BY_DIGEST = {digest[:16]!r}"
    )


@pytest.mark.parametrize("fresh", [False, True])
def test_windows_of_no_runs(tmp_path: Path, fresh: bool) -> None:
    results = write_synthetic_results(tmp_path / "results", rounds=1)
    with ResultsDB(results, create=False) as db:
        assert kept_trends.windows_of(db, {"a": []}, fresh=fresh) == {"a": []}


def test_known_windows_are_not_read_again_and_those_read_are_added(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """windows_of's `known` (a resident process's windows by run id, report.resident):
    the runs it holds are neither read nor judged, the others are read (or judged) and
    added to it; with `fresh` every run is judged again and `known` holds the new ones."""
    results = write_synthetic_results(tmp_path / "results", rounds=2, fpi_storm=STORM)
    with ResultsDB(results, create=False) as db:
        ids = _ids(db)
        whole = kept_trends.windows_of(db, ids)  # judged and kept
        first = next(iter(ids.values()))[0]
        marked = stationarity.Window(-1, {})  # no run's: seen only if taken from `known`
        known = {first: marked}
        reads: list[list[int]] = []
        read = db.run_trends
        monkeypatch.setattr(db, "run_trends", lambda i, m: reads.append(list(i)) or read(i, m))
        got = kept_trends.windows_of(db, ids, known=known)
        all_ids = [i for v in ids.values() for i in v]
        assert reads == [[i for i in all_ids if i != first]]  # the known run not read
        assert got == {
            k: [marked if i == first else w for i, w in zip(ids[k], v, strict=True)]
            for k, v in whole.items()
        }
        assert set(known) == set(all_ids) and known[first] is marked
        calls = _judged(monkeypatch)
        fresh = kept_trends.windows_of(db, ids, fresh=True, known=known)
        assert len(calls) == len(all_ids) and fresh == whole and known[first] != marked

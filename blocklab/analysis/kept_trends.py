"""Each run's stationarity trends, judged once and kept in the results store.

A run's series never change once stored, so its trends (blocklab.analysis.stationarity:
a p-value simulated per time axis, a log-scale fit per series) need judging once: the
store keeps them under stationarity.METHOD (schema version 5, run_trends), and the
summary, and so the report, read them back instead of reading and judging every run's
series again (at 10,000 runs, most of an update's time). Kept as the floats they were
computed as, they give the same lines as judging again; `fresh` judges every run again
and replaces what was kept (`blocklab report --full`). The experiment loop judges each
run before it stores it and keeps its trends with it (judged); a store filled otherwise
(copied, older) is judged by its first summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blocklab.analysis import stationarity
from blocklab.analysis.stationarity import Trend, Window
from blocklab.store import ResultsStore, series_packed
from blocklab.store.base import KeptTrends

RUN_ROW = ""  # the series name of a run's own row: its window's points


def windows_of(
    db: ResultsStore,
    run_ids_of: Mapping[str, Sequence[int]],
    *,
    fresh: bool = False,
    known: dict[int, Window] | None = None,
) -> dict[str, list[Window]]:
    """label -> the Window of each of its runs (ids of successful runs): kept ones read,
    the others (every one with `fresh`) judged from their series and kept. `known`: the
    windows by run id that the caller knows are of these runs (a resident process's,
    report.resident), not read again; those read or judged here are added to it."""
    ids = list(dict.fromkeys(i for run_ids in run_ids_of.values() for i in run_ids))
    method = stationarity.METHOD
    kept = {} if fresh or not known else {i: known[i] for i in ids if i in known}
    if not fresh and len(kept) < len(ids):
        kept.update(_kept(db.run_trends([i for i in ids if i not in kept], method)))
    missing = [i for i in ids if i not in kept]
    if missing:
        series = [s for _, s in db.series_of_runs(missing, names=list(stationarity.SERIES))]
        judged = dict(zip(missing, stationarity.windows(series), strict=True))
        db.keep_run_trends(method, [row for i, w in judged.items() for row in _rows(i, w)])
        kept.update(judged)
    if known is not None:
        known.update(kept)
    return {label: [kept[i] for i in run_ids] for label, run_ids in run_ids_of.items()}


def judged(series: Mapping[str, Sequence[tuple[float, float | None]]]) -> KeptTrends:
    """A run's trends judged before it is stored, from its series as the store will give
    them back (store.series_packed.as_stored), under stationarity.METHOD, for
    ResultsStore.record_run to keep in the run's own transaction (the experiment loop):
    the rows windows_of keeps when it judges the run stored, and no moment when a report
    reads the run without them (and judges it itself). Costs the null simulation of a
    time axis once a process (about 0.5 s), then about 1 ms a run."""
    stored = series_packed.as_stored(series, stationarity.SERIES)
    window = stationarity.windows([stored])[0]
    return stationarity.METHOD, [row[1:] for row in _rows(0, window)]


def _rows(run_id: int, w: Window) -> list[tuple[Any, ...]]:
    """A Window as store rows: (run_id, series, n, mean, start, end, change, p, drifted)."""
    own = (run_id, RUN_ROW, w.points, None, None, None, None, None, None)
    return [own] + [
        (run_id, name, t.n, t.mean, t.start, t.end, t.change_pct, t.p_value, int(t.drifted))
        for name, t in w.trends.items()
    ]


def _kept(rows_of: Mapping[int, Sequence[tuple[Any, ...]]]) -> dict[int, Window]:
    """The Window of each run whose rows were kept whole (its own row among them)."""
    got = {i: _window({r[0]: r for r in rows}) for i, rows in rows_of.items()}
    return {i: w for i, w in got.items() if w is not None}


def _window(by_name: Mapping[str, tuple[Any, ...]]) -> Window | None:
    """The Window of a run's kept rows by series (series, n, mean, start, end, change, p,
    drifted), its trends in stationarity.SERIES's order as judging gives them; None
    without the run's own row."""
    if RUN_ROW not in by_name:
        return None
    points = int(by_name[RUN_ROW][1])
    trends = {
        name: Trend(
            int(r[1]), float(r[2]), float(r[3]), float(r[4]), float(r[5]), float(r[6]), bool(r[7])
        )
        for name in stationarity.SERIES
        if (r := by_name.get(name)) is not None
    }
    return Window(points, trends)

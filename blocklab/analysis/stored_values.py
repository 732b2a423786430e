"""Stored runs' values of a metric as the summaries read them: per round and copy, and per
run with the reason of a run that has none (through the ResultsStore)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from blocklab.analysis.metrics import RUN_COLUMN_METRICS
from blocklab.analysis.rounds import RunValue
from blocklab.store import ResultsStore, Row


def round_copies(db: ResultsStore, runs: Sequence[Row], metric: str) -> dict[int, dict[int, float]]:
    """round -> copy_index -> value for the successful runs among `runs`."""
    out: dict[int, dict[int, float]] = {}
    for r in runs:
        if r["status"] != "ok":
            continue
        value = r[metric] if metric in RUN_COLUMN_METRICS else db.metrics(r["id"]).get(metric)
        if value is not None and math.isfinite(float(value)):
            out.setdefault(int(r["round"]), {})[int(r["copy_index"] or 0)] = float(value)
    return out


def run_values(
    db: ResultsStore,
    runs: Sequence[Row],
    metric: str,
    metrics_of: Callable[[int], Mapping[str, float | None]] | None = None,
) -> list[RunValue]:
    """`runs` as the per-round reduction sees them: failed runs and runs without the
    metric with no value (and their reason). `metrics_of`: a run's metrics (db.metrics)."""
    metrics_of = metrics_of or db.metrics
    out = []
    for r in runs:
        value = None
        if r["status"] == "ok":
            value = r[metric] if metric in RUN_COLUMN_METRICS else metrics_of(r["id"]).get(metric)
        reason = "" if r["status"] == "ok" else (r["reason"] or "no reason given")
        copy = int(r["copy_index"] or 0)
        out.append(RunValue(int(r["round"]), copy, None if value is None else float(value), reason))
    return out

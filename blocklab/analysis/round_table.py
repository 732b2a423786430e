"""rounds.csv: every variant's per-round value of every metric, and the rounds left out
with why, from the one reduction the summary and the report use
(blocklab.analysis.rounds). Reads through the ResultsStore."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

from blocklab.analysis.experiment_spec import design_of
from blocklab.analysis.rounds import RoundValues, per_round_values
from blocklab.analysis.stored_values import run_values
from blocklab.store import ResultsStore

ROUND_FIELDS = ("experiment", "variant_id", "label", "round", "metric", "value", "left_out")
BASE_METRICS = ("tps", "latency_avg_ms")


def round_rows(
    db: ResultsStore, experiment: str, *, host: str | None = None
) -> Iterator[dict[str, Any]]:
    """One row per (variant, metric, round): its value, or why the round has none."""
    exp = db.experiment(experiment)
    design = design_of(exp)
    variants = db.variants(experiment)
    refs = {v["reference_id"] or exp["reference"] for v in variants} - {None}
    runs = [r for r in db.runs(experiment) if host is None or r["host"] == host]
    metrics_of = functools.cache(db.metrics)
    for v in variants:
        vid = v["variant_id"]
        mine = [r for r in runs if r["variant_id"] == vid]
        for metric in metric_order(db.metric_names(experiment)):
            got = per_round_values(
                design, run_values(db, mine, metric, metrics_of), is_reference=vid in refs
            )
            yield from rows_of(experiment, vid, v["label"], metric, got)


def metric_order(stored: Iterable[str]) -> list[str]:
    """rounds.csv's metrics: BASE_METRICS, then the other stored ones sorted."""
    return list(BASE_METRICS) + sorted(set(stored) - set(BASE_METRICS))


def rows_of(
    experiment: str, variant_id: str, label: str, metric: str, got: RoundValues
) -> Iterator[dict[str, Any]]:
    """One variant's rows of one metric: each round's value, or why it has none."""
    for rnd in sorted(set(got.values) | set(got.dropped)):
        yield {
            "experiment": experiment,
            "variant_id": variant_id,
            "label": label,
            "round": rnd,
            "metric": metric,
            "value": got.values.get(rnd),
            "left_out": got.dropped.get(rnd, ""),
        }

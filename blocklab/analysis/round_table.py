"""rounds.csv: every variant's per-round value of every metric, and the rounds left out
with why, from the one reduction the summary and the report use
(blocklab.analysis.rounds). Reads through the ResultsStore."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from blocklab.analysis.rounds import per_round_values
from blocklab.analysis.summary import design_of, run_values
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
    metrics = list(BASE_METRICS) + sorted(set(db.metric_names(experiment)) - set(BASE_METRICS))
    metrics_of = functools.cache(db.metrics)
    for v in variants:
        vid = v["variant_id"]
        mine = [r for r in runs if r["variant_id"] == vid]
        for metric in metrics:
            got = per_round_values(
                design, run_values(db, mine, metric, metrics_of), is_reference=vid in refs
            )
            for rnd in sorted(set(got.values) | set(got.dropped)):
                yield {
                    "experiment": experiment,
                    "variant_id": vid,
                    "label": v["label"],
                    "round": rnd,
                    "metric": metric,
                    "value": got.values.get(rnd),
                    "left_out": got.dropped.get(rnd, ""),
                }

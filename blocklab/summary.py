"""The summary of an experiment: per-variant statistics and paired comparisons with the
reference, computed from stored runs. Reads through the ResultsStore; the arithmetic is in
blocklab.stats (pure)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab import stats
from blocklab.errors import UserError
from blocklab.metrics import RUN_COLUMN_METRICS, compare, metric_info, summarize, verdict_text
from blocklab.store import ResultsStore, Row


@dataclass
class VariantSummary:
    variant_id: str
    label: str
    dims: dict[str, Any]
    is_reference: bool
    reference_label: str
    n_failed: int
    failure_reasons: list[str]
    values: dict[int, float]  # round -> metric value, ok runs only
    summary: stats.Summary | None
    comparison: stats.Comparison | None
    verdict: str  # in the metric's words: faster/slower, better/worse, higher/lower
    latency_avg_ms: stats.Summary | None


@dataclass
class ExperimentSummary:
    name: str
    metric: str
    reference_id: str | None
    state: str
    end_reason: str
    rounds_done: int
    variants: list[VariantSummary] = field(default_factory=list)

    def max_ci_half_width_pct(self) -> float | None:
        """The widest comparison CI half-width, in percent; None if any cannot be computed."""
        widths = [
            v.comparison.ci_half_width_pct
            for v in self.variants
            if not v.is_reference and v.comparison is not None
        ]
        others = [v for v in self.variants if not v.is_reference]
        if not others or len(widths) < len(others) or any(w is None for w in widths):
            return None
        return max(w for w in widths if w is not None)


LATENCY = metric_info("latency_avg_ms")


def round_values(db: ResultsStore, runs: Sequence[Row], metric: str) -> dict[int, float]:
    """round -> value for the successful runs among `runs`."""
    out: dict[int, float] = {}
    for r in runs:
        if r["status"] != "ok":
            continue
        value = r[metric] if metric in RUN_COLUMN_METRICS else db.metrics(r["id"]).get(metric)
        if value is not None:
            out[int(r["round"])] = float(value)
    return out


def run_hosts(runs: Sequence[Row]) -> list[str]:
    """The fleet hosts that ran `runs`, sorted ("" for runs of one machine)."""
    return sorted({str(r["host"]) for r in runs})


def summarize_by_host(
    db: ResultsStore, name: str, metric: str = "tps"
) -> list[tuple[str, ExperimentSummary]]:
    """One summary per host that ran the experiment (rounds pair within a host only)."""
    hosts = run_hosts(db.runs(name)) or [""]
    return [(h, summarize_experiment(db, name, metric, host=h)) for h in hosts]


def summarize_experiment(
    db: ResultsStore, name: str, metric: str = "tps", *, host: str | None = None
) -> ExperimentSummary:
    """The summary of `host`'s runs (None: every run, which must come from one host: a
    round is paired only with the same round on the same host)."""
    exp = db.experiment(name)
    ref_id = exp["reference"]
    all_runs = db.runs(name)
    if host is not None:
        all_runs = [r for r in all_runs if r["host"] == host]
    elif len(hosts := run_hosts(all_runs)) > 1:
        raise UserError(
            f"experiment '{name}' ran on hosts {', '.join(hosts)}: its rounds pair within "
            "a host only; summarise one host at a time"
        )
    rounds_done = len({r["round"] for r in all_runs})
    result = ExperimentSummary(name, metric, ref_id, exp["state"], exp["end_reason"], rounds_done)
    info = metric_info(metric)
    variants = db.variants(name)
    labels = {v["variant_id"]: v["label"] for v in variants}
    runs_of: dict[str, list[Row]] = {vid: [] for vid in labels}
    for r in all_runs:
        runs_of.setdefault(r["variant_id"], []).append(r)
    values_of = {vid: round_values(db, runs, metric) for vid, runs in runs_of.items()}
    for v in variants:
        vid = v["variant_id"]
        my_ref = v["reference_id"] or ref_id
        failed = [r for r in runs_of[vid] if r["status"] != "ok"]
        values = values_of[vid]
        latencies = list(round_values(db, runs_of[vid], "latency_avg_ms").values())
        is_ref = my_ref is None or vid == my_ref
        comparison = None
        if not is_ref:
            comparison = compare(values_of.get(my_ref, {}), values, info)
        result.variants.append(
            VariantSummary(
                variant_id=vid,
                label=v["label"],
                dims=json.loads(v["dims_json"]),
                is_reference=is_ref,
                reference_label=labels.get(my_ref or "", ""),
                n_failed=len(failed),
                failure_reasons=[f"round {r['round']}: {r['reason']}" for r in failed],
                values=values,
                summary=summarize(list(values.values()), info) if values else None,
                comparison=comparison,
                verdict=verdict_text(comparison, info) if comparison else "",
                latency_avg_ms=summarize(latencies, metric_info("latency_avg_ms"))
                if latencies
                else None,
            )
        )
    return result


def restore_note(db: ResultsStore, experiment: str, dataset_init_s: Sequence[float]) -> str:
    """Restoring the snapshot against making the dataset again ("" without both)."""
    restores = [
        v for r in db.runs(experiment) if (v := db.metrics(r["id"]).get("restore_s")) is not None
    ]
    if not restores or not dataset_init_s:
        return ""
    return (
        "Every run started from the dataset's snapshot: restore "
        f"{statistics.median(restores):.2f} s per run (median of {len(restores)}), against "
        f"{statistics.median(dataset_init_s):.1f} s to initialise a dataset."
    )

"""What the experiment page adds to its tables: the answer in the CLI's words, what
changed, and the plots of the throughput (blocklab.report.answer and .plots shape them;
this module reads what they need from the results store)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from blocklab.analysis.summary import ExperimentSummary, summarize_experiment
from blocklab.analysis.summary_memo import SummaryMemo
from blocklab.report import answer, data, jsontext, plots
from blocklab.report.data import ExperimentView
from blocklab.store import ResultsStore

Point = tuple[float, float | None]


def summary_for(
    db: ResultsStore,
    name: str,
    host: str | None,
    *,
    fresh: bool = False,
    memo: SummaryMemo | None = None,
) -> ExperimentSummary:
    """The throughput summary `blocklab summary` prints for the stored experiment `name`
    (`host`'s runs, when a fleet ran it), with its side metrics and checks; `fresh`: every
    run's stationarity judged again, not read where kept (blocklab.analysis.kept_trends);
    `memo`: what a resident process keeps of the summaries (analysis.summary_memo)."""
    return summarize_experiment(db, name, "tps", host=host, fresh_trends=fresh, memo=memo)


def planned_rounds(db: ResultsStore, exp: ExperimentView) -> int | None:
    """The rounds the experiment file asked for (None when it does not say)."""
    spec = json.loads(db.experiment(exp.stored_name)["spec_json"] or "{}")
    rounds = spec.get("rounds")
    return rounds if isinstance(rounds, int) else None


def round_orders(exp: ExperimentView, labels: Mapping[str, str]) -> dict[int, list[str]]:
    """round -> the variants' labels in the order they ran (a variant twice in abba)."""
    by_round: dict[int, list[tuple[int, int, str]]] = {}
    for r in exp.runs:
        by_round.setdefault(r.round, []).append((r.position, r.id, r.variant_id))
    return {n: [labels.get(vid, vid) for _, _, vid in sorted(runs)] for n, runs in by_round.items()}


def changed_cells(exp: ExperimentView) -> list[tuple[str, str, str, Any, Any]]:
    """(metric, variant, reference, its CellStats, the reference's) of every comparison."""
    by_id = {v.variant_id: v for v in exp.variants}
    out = []
    for m in exp.metrics:
        for v in exp.variants:
            ref = by_id.get(v.reference_id or "")
            if v.is_reference or ref is None:
                continue
            out.append(
                (
                    m.key,
                    v.label or v.variant_id,
                    ref.label or ref.variant_id,
                    v.cells.get(m.key),
                    ref.cells.get(m.key),
                )
            )
    return out


def experiment_extras(
    db: ResultsStore,
    exp: ExperimentView,
    summary_of: Callable[[], ExperimentSummary],
    tps: Mapping[int, Sequence[Point]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The page's answer and what changed (embedded: their size grows with the variants
    only), and the plots' data (grows with the runs: in plots.js, `plots_script`).
    `summary_of`: the experiment's summary, asked for once the rest is made (it may be in
    the making in another process). `tps`: the runs' per-second throughput already read
    (others are read here, for the overlay's rounds only)."""
    labels = {v.variant_id: v.label or v.variant_id for v in exp.variants}
    found = answer.changed_from_cells(changed_cells(exp))
    rounds = set(plots.overlay_rounds(exp.runs, len(exp.variants)))
    drawn = [r for r in exp.runs if r.round in rounds and r.status == "ok"]
    series = {
        r.id: list(tps[r.id]) if r.id in tps else data.throughput_series(db.series(r.id))
        for r in drawn
    }
    rows = db.checkpoints_of_runs([r.id for r in drawn])
    cps = {r.id: data.run_detail(db, r.id, {}, rows[r.id]).checkpoints for r in drawn}
    orders, planned = round_orders(exp, labels), planned_rounds(db, exp)
    plot_data = {
        "runs": plots.runs_json(exp.runs, labels),
        "latency": plots.latency_json(exp.runs, labels),
        "overlay": plots.overlay_json(drawn, labels, series, cps),
        "colors": plots.colours(list(labels.values())),
        "overlay_limit": plots.MAX_OVERLAY_VARIANTS,
    }
    changed = answer.changed_rows(found)
    summary = summary_of()
    page = {"answer": answer.answer_json(summary, orders, planned), "changed": changed}
    return page, {"rounds": plots.rounds_json(summary), **plot_data}


def plots_script(plot_data: Mapping[str, Any]) -> str:
    """plots.js beside the experiment page: a script that sets window.blocklabPlots (a
    <script src> loads from file://, where fetch() may not), so the page stays the same
    size however many runs the experiment has."""
    body = jsontext.text(plot_data)
    return f"window.blocklabPlots = {body};\n"

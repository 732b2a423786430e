"""Copy stored experiments from one results store into another (blocklab export --to):
experiments, variants, rounds and every run not yet there, each run in one transaction.
A run is known by (experiment, host, variant, round, copy), which both back ends keep unique, so a
second copy finds everything there and copies nothing. Raw files stay where they are;
the destination records their absolute path."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

from blocklab.store import ResultsStore, Row, RunRecord
from blocklab.store.base import QueryRow

# RunRecord's fields that are columns of runs, stored as they are
RUN_SCALARS = tuple(
    f.name
    for f in fields(RunRecord)
    if f.name
    not in ("raw_dir", "settings", "provenance", "metrics", "series", "checkpoints", "queries")
)


@dataclass
class CopyCounts:
    experiments: int = 0
    copied: int = 0
    skipped: int = 0


def copy_results(src: ResultsStore, dest: ResultsStore, experiment: str | None) -> CopyCounts:
    names = [experiment] if experiment else [r["name"] for r in src.experiments()]
    counts = CopyCounts()
    for name in names:
        _copy_experiment(src, dest, src.experiment(name))
        done = {h: dest.run_keys(name, h) for h in {r["host"] for r in src.runs(name)}}
        for row in src.runs(name):
            if (row["variant_id"], row["round"], row["copy_index"]) in done[row["host"]]:
                counts.skipped += 1
            else:
                dest.record_run(_record(src, dest, row))
                counts.copied += 1
        counts.experiments += 1
    return counts


def _copy_experiment(src: ResultsStore, dest: ResultsStore, exp: Row) -> None:
    name = exp["name"]
    variants = src.variants(name)
    dest.upsert_experiment(
        name,
        description=exp["description"],
        spec=json.loads(exp["spec_json"]),
        seed=exp["seed"],
        reference=exp["reference"],
        created_at=exp["created_at"],
        host=json.loads(exp["host_json"]),
        variants=[
            (v["variant_id"], v["label"], v["variant_json"], json.loads(v["dims_json"]))
            for v in variants
        ],
        references={v["variant_id"]: v["reference_id"] for v in variants if v["reference_id"]},
    )
    dest.set_experiment_state(name, exp["state"], exp["end_reason"])
    for r in src.rounds(name):
        dest.record_round(name, r["round"], r["seed"], json.loads(r["order_json"]))


def _record(src: ResultsStore, dest: ResultsStore, row: Row) -> RunRecord:
    run_id = int(row["id"])
    raw = row["raw_dir"]
    query_rows = src.run_queries(row["experiment"], run_id)
    plan_of = src.query_plans([q["plan_fingerprint"] for q in query_rows if q["plan_fingerprint"]])
    return RunRecord(
        **{k: row[k] for k in RUN_SCALARS},
        raw_dir=dest.raw_ref(src.directory / raw) if raw else "",
        settings=json.loads(row["settings_json"]),
        provenance=json.loads(row["provenance_json"]),
        metrics=src.metrics(run_id),
        series=src.series(run_id),
        checkpoints=[
            dict(zip(c.keys(), [c[k] for k in c.keys()], strict=True))
            for c in src.checkpoints(run_id)
        ],
        queries=[
            QueryRow(
                q["query"],
                q["calls"],
                q["time_ms_mean"],
                q["time_ms_total"],
                q["plan_fingerprint"],
                plan_of.get(q["plan_fingerprint"] or ""),
            )
            for q in query_rows
        ],
    )

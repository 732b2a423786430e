"""Per-query results of an experiment (SQL workloads such as the TPC-H-like one): each
query's server-side time per variant with a CI over the rounds, the plan each variant
chose, and which variants chose a different plan than the reference.

Reads through the ResultsStore (run_queries, query_plans); statistics in blocklab.analysis.stats,
plan shapes and diffs in blocklab.workloads.plans (both pure).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab.analysis import query_overall, stats
from blocklab.analysis.experiment_spec import equivalence_of
from blocklab.analysis.metrics import metric_info, summarize
from blocklab.store import ResultsStore
from blocklab.workloads import plans

QUERY_TIME = metric_info("query_time_ms")


@dataclass
class QueryVariant:
    variant_id: str
    label: str
    values: dict[int, float]  # round -> mean server time of the query in that run, ms
    summary: stats.Summary | None
    fingerprints: list[str]  # distinct plans over the rounds, the most frequent first

    @property
    def plan(self) -> str | None:
        """The plan this variant chose (its most frequent over the rounds)."""
        return self.fingerprints[0] if self.fingerprints else None

    @property
    def plan_varies(self) -> bool:
        return len(self.fingerprints) > 1


@dataclass
class QueryResult:
    query: str
    variants: list[QueryVariant]
    reference: QueryVariant | None

    @property
    def differing(self) -> list[QueryVariant]:
        """The variants whose plan is not the reference's."""
        ref = self.reference
        if ref is None or ref.plan is None:
            return []
        return [v for v in self.variants if v.plan is not None and v.plan != ref.plan]


@dataclass
class QueriesSummary:
    experiment: str
    label: str  # e.g. "TPC-H-derived, not comparable with published TPC-H results"
    reference_label: str
    queries: list[QueryResult] = field(default_factory=list)
    plan_of: dict[str, plans.PlanNode] = field(default_factory=dict)  # fingerprint -> plan
    overall: query_overall.Overall | None = None  # the geometric mean over the statements

    @property
    def changed(self) -> list[QueryResult]:
        return [q for q in self.queries if q.differing]

    def diff(self, query: QueryResult, other: QueryVariant) -> plans.PlanDiff:
        """The reference's plan (left) against `other`'s (right)."""
        assert query.reference is not None and query.reference.plan and other.plan
        return plans.diff(self.plan_of[query.reference.plan], self.plan_of[other.plan])


def query_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def summarize_queries(db: ResultsStore, experiment: str) -> QueriesSummary | None:
    """None when the experiment's runs stored no per-query rows."""
    rows = [r for r in db.run_queries(experiment) if r["status"] == "ok"]
    if not rows:
        return None
    exp = db.experiment(experiment)
    variants = db.variants(experiment)
    labels = {v["variant_id"]: v["label"] for v in variants}
    ref_id = exp["reference"] or (variants[0]["variant_id"] if variants else None)
    by_key: dict[tuple[str, str], list[tuple[int, float, str | None]]] = {}
    for r in rows:
        key = (r["query"], r["variant_id"])
        by_key.setdefault(key, []).append(
            (int(r["round"]), r["time_ms_mean"], r["plan_fingerprint"])
        )
    names = sorted({q for q, _ in by_key}, key=query_order)
    out = QueriesSummary(experiment, _label(db, experiment), labels.get(ref_id or "", ""))
    fingerprints: set[str] = set()
    for q in names:
        qvs = []
        for v in variants:
            got = by_key.get((q, v["variant_id"]), [])
            if not got:
                continue
            values = {rnd: ms for rnd, ms, _ in got}
            prints = [fp for _, _, fp in sorted(got) if fp]
            fingerprints.update(prints)
            qvs.append(
                QueryVariant(
                    v["variant_id"],
                    v["label"],
                    values,
                    summarize(list(values.values()), QUERY_TIME),
                    [fp for fp, _ in Counter(prints).most_common()],
                )
            )
        ref = next((x for x in qvs if x.variant_id == ref_id), qvs[0] if qvs else None)
        out.queries.append(QueryResult(q, qvs, ref))
    out.overall = query_overall.overall(
        query_overall.times_of(rows), labels, ref_id or "", equivalence_of(exp)
    )
    out.plan_of = {
        fp: _plan_node(json.loads(text))
        for fp, text in db.query_plans(sorted(fingerprints)).items()
    }
    return out


def _plan_node(doc: Any) -> plans.PlanNode:
    """A stored normalised plan (PlanNode.to_json) back into a PlanNode."""
    return plans.normalise({"Plan": doc})


LABEL_CHUNK = 20  # runs whose provenance is read at once, until one names the label


def _label(db: ResultsStore, experiment: str) -> str:
    """The workload's label stored with its runs (tpch: TPC-H-derived ...)."""
    ids = [int(r["id"]) for r in db.runs(experiment)]  # read ahead: without provenance
    for at in range(0, len(ids), LABEL_CHUNK):
        texts = db.run_texts(ids[at : at + LABEL_CHUNK])
        for run_id in ids[at : at + LABEL_CHUNK]:
            prov = json.loads(texts.get(run_id, ("", ""))[1] or "{}")
            for key, value in prov.items():
                if key.endswith("_report") and isinstance(value, dict) and value.get("label"):
                    return str(value["label"])
    return ""


def plan_lines(diff: plans.PlanDiff) -> tuple[list[str], list[str]]:
    """The two plans as indented text, differing nodes marked with '*'."""
    return plans.render(diff.left), plans.render(diff.right)


def side_by_side(left: Sequence[str], right: Sequence[str], width: int = 60) -> list[str]:
    """Two columns of text, the left one padded (or cut with '…') to `width`."""
    lines = []
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        a = a if len(a) <= width else a[: width - 1] + "…"
        lines.append(f"{a:<{width}} | {b}")
    return lines

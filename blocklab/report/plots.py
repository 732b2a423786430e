"""The experiment page's plots of the throughput, as pgbench-tools, HammerDB and BenchBase
users read a comparison (pure: the JSON the page draws).

- `rounds_json`: each variant's value per round (the design's reduction, as compared), and
  each comparison's per-round change in % beside its 95 % CI: a round that disagrees
  with the others shows, and so does a pairing that the machine's drift moved together;
- `runs_json`: every successful run's throughput, for each variant's spread of runs (an
  outlier run shows as a point, not only as a row of the table) and for the run-order
  timeline (start time against throughput: drift over the experiment shows as a slope);
- `latency_json`: each run's latency statistics as its driver stores them (pgbench: the
  average; sysbench: also the 95th percentile and the maximum; go-tpc: average and 95th
  percentile per transaction type), each variant's runs side by side;
- `overlay_json`: the per-second throughput of the variants' runs of one round on one
  chart, with each run's checkpoints marked, for experiments of a few variants.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from blocklab.analysis.summary import ExperimentSummary
from blocklab.report.data import RunView
from blocklab.report.pagedata import PALETTE, whole_seconds

MAX_OVERLAY_VARIANTS = 4  # more lines than this on one chart read as a tangle (grid.html)
MAX_OVERLAY_ROUNDS = 30  # rounds offered on the overlay (the last ones)
Point = tuple[float, float | None]


def colours(labels: Sequence[str]) -> dict[str, str]:
    """One colour per variant label, in the order given (the grid's palette)."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def per_round_change(ref: Mapping[int, float], mine: Mapping[int, float]) -> list[list[float]]:
    """[round, change in %] for each round both have a value and the reference's is not 0:
    the per-round ratios the comparison's geometric mean and CI are computed from."""
    return [[r, (mine[r] / ref[r] - 1) * 100] for r in sorted(set(ref) & set(mine)) if ref[r] != 0]


def rounds_json(s: ExperimentSummary) -> dict[str, Any]:
    """Each variant's per-round values, and each comparison's per-round change (with the
    comparison's change and CI, in %, to draw beside them)."""
    by_id = {v.variant_id: v for v in s.variants}
    values = [
        {
            "label": v.label,
            "ref": v.is_reference,
            "points": [[r, v.values[r]] for r in sorted(v.values)],
        }
        for v in s.variants
    ]
    changes = []
    for v in s.variants:
        ref = by_id.get(v.reference_id or "")
        c = v.comparison
        if v.is_reference or ref is None or c is None or c.gain_pct is None:
            continue
        lo = None if c.ci95_low is None else (c.ci95_low - 1) * 100
        hi = None if c.ci95_high is None else (c.ci95_high - 1) * 100
        changes.append(
            {
                "label": f"{v.label} vs {ref.label}",
                "variant": v.label,
                "points": per_round_change(ref.values, v.values),
                "pct": c.gain_pct,
                "lo": lo,
                "hi": hi,
            }
        )
    return {"metric": s.info.label, "unit": s.info.unit, "values": values, "changes": changes}


def runs_json(runs: Sequence[RunView], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every successful run with a throughput: its variant's label, round, position in
    the round, start time and value, and its page (relative to the experiment page)."""
    ok = [r for r in runs if r.status == "ok" and r.tps is not None]
    ok.sort(key=lambda r: (r.started_at or "", r.id))
    return [
        {
            "id": r.id,
            "label": labels.get(r.variant_id, r.variant_id),
            "round": r.round,
            "position": r.position,
            "start": start_time(r.started_at),
            "value": r.tps,
            "href": f"runs/{r.id}.html",
        }
        for r in ok
    ]


def start_time(iso: str | None) -> str | None:
    """'2025-03-01T12:00:00.123+00:00' -> '2025-03-01 12:00:00.123': the stored UTC clock
    (blocklab.timestamps) as the chart library reads a date, without its offset."""
    if not iso:
        return None
    return iso.replace("T", " ").removesuffix("Z").split("+")[0]


def overlay_rounds(runs: Sequence[RunView], n_variants: int) -> list[int]:
    """The rounds whose runs the overlay draws: the last MAX_OVERLAY_ROUNDS rounds with a
    successful run; none when the experiment has more than MAX_OVERLAY_VARIANTS variants."""
    if n_variants > MAX_OVERLAY_VARIANTS:
        return []
    rounds = sorted({r.round for r in runs if r.status == "ok"})
    return rounds[-MAX_OVERLAY_ROUNDS:]


def overlay_json(
    runs: Sequence[RunView],
    labels: Mapping[str, str],
    series_of: Mapping[int, Sequence[Point]],
    checkpoints_of: Mapping[int, Sequence[Mapping[str, Any]]],
) -> dict[str, Any]:
    """Per round, each successful run's per-second throughput and its checkpoints'
    starts and ends (seconds into the run, as the run page's shading)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.status != "ok" or r.id not in series_of:
            continue
        pts = series_of[r.id]
        cps = [
            {"start": c.get("start_s"), "end": c.get("end_s"), "kind": c.get("kind", "other")}
            for c in checkpoints_of.get(r.id, [])
        ]
        out.setdefault(str(r.round), []).append(
            {
                "id": r.id,
                "label": labels.get(r.variant_id, r.variant_id),
                "t": [whole_seconds(t) for t, _ in pts],
                "v": [v for _, v in pts],
                "checkpoints": cps,
            }
        )
    return {"rounds": out, "order": sorted(out, key=int)}


# [operation_]latency_<statistic>_ms: the run metrics (and run column) of the drivers
_LATENCY = re.compile(r"^(?:(?P<op>\w+?)_)?latency_(?P<stat>avg|p50|p90|p95|p99|max)_ms$")
_STAT_WORDS = {"avg": "average", "max": "max"}
_STAT_ORDER = ("avg", "p50", "p90", "p95", "p99", "max")


def latency_key(key: str) -> tuple[str, str] | None:
    """'new_order_latency_p95_ms' -> ('new_order', 'p95'); None for another metric."""
    m = _LATENCY.match(key)
    return None if m is None else (m["op"] or "", m["stat"])


def latency_label(op: str, stat: str) -> str:
    """('new_order', 'p95') -> 'new_order p95'; ('', 'avg') -> 'average'."""
    words = _STAT_WORDS.get(stat, stat)
    return f"{op.replace('_', ' ')} {words}" if op else words


def latency_json(runs: Sequence[RunView], labels: Mapping[str, str]) -> dict[str, Any]:
    """Each variant's successful runs' latency statistics, per statistic the driver
    stored (x: 'average', 'p95', 'new order p95', ...), and whether any is a percentile."""
    stored = {"latency_avg_ms"}.union(*(r.metrics for r in runs))  # each name matched once
    keys = {k: named for k in stored if (named := latency_key(k)) is not None}
    order = sorted(keys, key=lambda k: (keys[k][0], _STAT_ORDER.index(keys[k][1]), k))
    words = {k: latency_label(*keys[k]) for k in order}
    by_variant: dict[str, dict[str, list[Any]]] = {x: {"x": [], "y": []} for x in labels.values()}
    for r in runs:
        if r.status != "ok":
            continue
        mine = by_variant.setdefault(labels.get(r.variant_id, r.variant_id), {"x": [], "y": []})
        for k in order:
            value = r.value(k)
            if value is not None:
                mine["x"].append(words[k])
                mine["y"].append(value)
    return {
        "stats": [words[k] for k in order],
        "variants": [{"label": label, **xy} for label, xy in by_variant.items() if xy["y"]],
        "percentiles": any(keys[k][1].startswith("p") for k in order),
    }

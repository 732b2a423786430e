"""The per-query page of an experiment (e/<slug>/queries.html) for SQL workloads: each
query's server time per variant as bars with the 95 % CI (inline SVG, no script), which
variants chose a different plan than the reference, and the two plans side by side with
the differing nodes marked. Built from blocklab.analysis.query_summary."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from blocklab.analysis.query_summary import QueriesSummary, QueryResult, summarize_queries
from blocklab.analysis.query_table import overall_lines
from blocklab.store import ResultsStore

BAR_H, GAP, LABEL_W, PLOT_W, TEXT_W = 16, 4, 160, 420, 260
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def bars_svg(q: QueryResult, colors: dict[str, str]) -> Markup:
    """Horizontal bars of each variant's mean time with its CI as a whisker. The axis
    spans 1.5 x the largest mean; a CI reaching past it is cut, its end drawn as an
    arrow head (the numbers beside the bar are whole)."""
    rows = [(v.label, v.summary, v.variant_id) for v in q.variants if v.summary is not None]
    top = max([s.mean for _, s, _ in rows if s is not None] + [1e-9]) * 1.5
    scale = PLOT_W / top
    height = len(rows) * (BAR_H + GAP) + GAP
    parts = [
        f'<svg class="qbars" width="{LABEL_W + PLOT_W + TEXT_W}" height="{height}" '
        f'role="img" aria-label="{escape(q.query)} time per variant">'
    ]
    for i, (label, s, vid) in enumerate(rows):
        assert s is not None
        y = GAP + i * (BAR_H + GAP)
        mid, x0 = y + BAR_H / 2, LABEL_W
        parts.append(
            f'<text x="{x0 - 6}" y="{y + BAR_H - 4}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{x0}" y="{y}" width="{s.mean * scale:.1f}" height="{BAR_H}" '
            f'fill="{colors.get(vid, COLORS[0])}">'
            f"<title>{escape(label)}: {s.mean:.2f} ms</title></rect>"
        )
        if s.ci95_low is not None and s.ci95_high is not None:
            lo = x0 + s.ci95_low * scale
            hi = x0 + min(s.ci95_high * scale, PLOT_W)
            cut = s.ci95_high * scale > PLOT_W
            end_mark = (
                f"M{hi - 5:.1f},{y + 3} L{hi:.1f},{mid} L{hi - 5:.1f},{y + BAR_H - 3}"
                if cut
                else f"M{hi:.1f},{y + 3} V{y + BAR_H - 3}"
            )
            parts.append(
                f'<path class="ci" d="M{lo:.1f},{mid} H{hi:.1f} M{lo:.1f},{y + 3} '
                f'V{y + BAR_H - 3} {end_mark}" stroke="#222" fill="none"/>'
            )
        text = f"{s.mean:.2f} ms" + (
            f" [{s.ci95_low:.2f}, {s.ci95_high:.2f}]" if s.ci95_low is not None else f" (n={s.n})"
        )
        parts.append(f'<text x="{x0 + PLOT_W + 6}" y="{y + BAR_H - 4}">{escape(text)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def page_context(qs: QueriesSummary) -> dict[str, Any]:
    variant_ids = list(dict.fromkeys(v.variant_id for q in qs.queries for v in q.variants))
    colors = {vid: COLORS[i % len(COLORS)] for i, vid in enumerate(variant_ids)}
    queries = []
    for q in qs.queries:
        diffs = []
        for other in q.differing:
            assert q.reference is not None
            d = qs.diff(q, other)
            diffs.append({"left": q.reference.label, "right": other.label,
                          "left_lines": d.left, "right_lines": d.right})  # fmt: skip
        queries.append(
            {
                "name": q.query,
                "svg": bars_svg(q, colors),
                "differing": [v.label for v in q.differing],
                "varies": [v.label for v in q.variants if v.plan_varies],
                "fingerprints": {v.label: v.plan or "" for v in q.variants},
                "diffs": diffs,
            }
        )
    overall = overall_lines(qs)  # its heading, then a line per variant
    return {"qs": qs, "queries": queries, "changed": [q.query for q in qs.changed],
            "overall": overall}  # fmt: skip


def write_queries(w: Any, db: ResultsStore, name: str, slug: str) -> bool:
    """e/<slug>/queries.html when the experiment stored per-query rows (True then)."""
    qs = summarize_queries(db, name)
    if qs is None:
        return False
    w.page(f"e/{slug}/queries.html", "queries.html", page="queries", charts=False,
           name=name, **page_context(qs))  # fmt: skip
    return True

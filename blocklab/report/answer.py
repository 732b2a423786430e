"""The experiment page's answer, in the CLI's own words (pure).

The page's first section is what `blocklab summary` prints first: the heading with the
design and its equivalence margin, one verdict per comparison, the key side metrics, the
checks, and the design's caveats (interleaved, carry-over, the A/A floor). The lines come
from the same functions the CLI prints (blocklab.analysis.first_screen, summary_table) on
the same ExperimentSummary (blocklab.analysis.summary.summarize_experiment), so the page
and the terminal cannot disagree; this module only shapes them for the template.

Also here: the forest plot's rows (each comparison's change with its 95 % CI, drawn
against no change with the ±X % band of "equal"), and "what changed" as a table in words
(blocklab.analysis.changed_metrics' selection, over the statistics the page holds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blocklab.analysis import changed_metrics, first_screen, stats, summary_table
from blocklab.analysis.changed_metrics import Change, ChangedMetrics
from blocklab.analysis.metrics import RUN_COLUMN_METRICS, metric_info
from blocklab.analysis.summary import ExperimentSummary, VariantSummary
from blocklab.analysis.summary_table import gain_text
from blocklab.units import fmt_value

# a verdict's css class: the word's colour on the page
VERDICT_CSS = {
    stats.FASTER: "v-faster",
    stats.SLOWER: "v-slower",
    stats.EQUAL: "v-equal",
    stats.UNDECIDED: "v-undecided",
}
MAX_ORDERS = 10  # rounds whose order is listed on the page (runs.csv has them all)


def answer_json(
    s: ExperimentSummary, orders: Mapping[int, Sequence[str]], planned_rounds: int | None
) -> dict[str, Any]:
    """The first screen as the page shows it: heading, design, verdicts, side lines,
    checks and the design's caveats, each a CLI line."""
    return {
        "heading": first_screen.first_screen(s)[0],
        "setting": s.setting,  # host, PostgreSQL version, workload, scale, clients
        "design": design_json(s, orders, planned_rounds),
        "verdicts": verdicts(s),
        "side": first_screen.key_side_lines(s),
        "checks": first_screen.check_lines(s),
        "caveats": summary_table.design_lines(s, everything=False),
        "forest": forest_rows(s),
    }


def design_json(
    s: ExperimentSummary, orders: Mapping[int, Sequence[str]], planned_rounds: int | None
) -> dict[str, Any]:
    """The design: its kind and analysis, the rounds done (of planned), the equivalence
    margin and each round's order of variants (the first MAX_ORDERS rounds)."""
    rounds = sorted(orders)
    return {
        "kind": s.design,
        "analysis": summary_table.design_analysis(s),
        "rounds": s.rounds_done,
        "planned": planned_rounds,
        "equivalence_pct": s.equivalence_pct,
        "orders": [{"round": r, "order": list(orders[r])} for r in rounds[:MAX_ORDERS]],
        "more_orders": max(0, len(rounds) - MAX_ORDERS),
    }


def compared(s: ExperimentSummary) -> list[VariantSummary]:
    """The variants compared with a reference, as the first screen lists them (the
    layout control's arms are one check line there, and left out here too)."""
    return [v for v in s.variants if not v.is_reference and v.label not in s.layout_arms]


def verdicts(s: ExperimentSummary) -> list[dict[str, Any]]:
    """One item per comparison: who against whom, the verdict's word and the CLI's
    sentence (first_screen.verdict_sentence), the layout control's line if any, and
    whether the variant or its reference pooled more than one build or dataset."""
    out = []
    for v in compared(s):
        c = v.comparison
        item = {"label": v.label, "reference": v.reference_label, "word": v.verdict}
        if c is None or v.summary is None:
            none = {"css": "v-none", "text": "no successful run", "layout": "", "mixed": ""}
            out.append(item | none)
            continue
        layout = " · ".join(first_screen.across_lines(s, v))  # counted by sessions
        if s.layout is not None and c.scale == stats.RATIO:
            layout = " · ".join(x for x in (layout, first_screen.layout_line(c, s.layout)) if x)
        text = first_screen.verdict_sentence(c, s.info)
        mixed = " ".join(line.removeprefix("! ") for line in first_screen.mixed_lines(s, v))
        css = VERDICT_CSS.get(c.verdict, "v-none")
        out.append(item | {"css": css, "text": text, "layout": layout, "mixed": mixed})
    return out


def forest_rows(s: ExperimentSummary) -> dict[str, Any]:
    """The forest plot: per comparison on the ratio scale, the change in % with its 95 %
    CI (the numbers of gain_text), its verdict word; the ±X % band of "equal"."""
    rows = []
    for v in compared(s):
        c = v.comparison
        if c is None or c.gain_pct is None or c.scale != stats.RATIO:
            continue
        lo = None if c.ci95_low is None else (c.ci95_low - 1) * 100
        hi = None if c.ci95_high is None else (c.ci95_high - 1) * 100
        rows.append(
            {
                "label": v.label,
                "reference": v.reference_label,
                "pct": c.gain_pct,
                "lo": lo,
                "hi": hi,
                "text": gain_text(c, s.info.unit),
                "word": v.verdict,
                "css": VERDICT_CSS.get(c.verdict, "v-none"),
                "rounds": c.n_pairs,
            }
        )
    return {"metric": s.info.label, "equivalence_pct": s.equivalence_pct, "rows": rows}


def changed_from_cells(
    cells: Sequence[tuple[str, str, str, Any, Any]],
) -> ChangedMetrics:
    """'What changed' from the page's statistics: `cells` are (metric key, variant label,
    reference label, the variant's CellStats, the reference's CellStats). The candidates
    and their selection (Benjamini-Hochberg over every comparison with a p-value) are
    blocklab.analysis.changed_metrics', as `blocklab summary` prints them."""
    out = ChangedMetrics()
    found: dict[str, list[Change]] = {}
    stored = [k for k in dict.fromkeys(k for k, *_ in cells) if k not in RUN_COLUMN_METRICS]
    keys = set(changed_metrics.candidates(stored))  # run columns: not among the CLI's
    values: dict[str, list[float]] = {}
    per_variant: dict[str, list[Mapping[int, float]]] = {}
    for key, label, ref_label, mine, ref in cells:
        if key not in keys or mine is None or ref is None or mine.comparison is None:
            continue
        values.setdefault(key, []).extend(
            [mine.summary.min, mine.summary.max, ref.summary.min, ref.summary.max]
        )
        per_variant.setdefault(key, []).extend([ref.values, mine.values])
        if mine.comparison.p_value is not None:
            info = metric_info(key)
            found.setdefault(key, []).append(
                Change(info, label, ref_label, ref.summary.mean, mine.summary.mean, mine.comparison)
            )
    for key, vals in values.items():
        if changed_metrics.fold(out, metric_info(key).label, vals, per_variant[key]):
            found.pop(key, None)  # fixed by each build, as the CLI: left out before BH
    return changed_metrics.select(out, [c for changes in found.values() for c in changes])


def changed_rows(found: ChangedMetrics) -> dict[str, Any]:
    """The table of what changed, in words: the metric's label, the variant against its
    reference with both means in the metric's unit, the change as the CLI writes it."""
    rows = [
        {
            "metric": c.info.label,
            "key": c.info.key,
            "variant": c.label,
            "reference": c.reference_label,
            "mean": fmt_value(c.mean, c.info.unit),
            "reference_mean": fmt_value(c.reference_mean, c.info.unit),
            "change": gain_text(c.comparison, c.info.unit),
        }
        for c in found.changes
    ]
    return {
        "rows": rows,
        "tested": found.tested,
        "rate_pct": changed_metrics.FALSE_DISCOVERY_RATE * 100,
        "folded": sorted([*found.zero_in_both, *found.constant]),
    }

"""The experiments index's answer: each experiment's headline comparison.

The numbers are the summary's (blocklab.analysis.summary.summarize_experiment on the
throughput, the one the experiment page opens with: blocklab.report.explain): each
variant against its reference, the gain with its 95 % CI and the verdict. The words are
made here, from the summary (pure: `headline_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from blocklab.analysis import stats
from blocklab.analysis.summary import ExperimentSummary
from blocklab.analysis.summary_table import gain_text

MAX_LINES = 4  # comparisons listed per experiment; the rest are counted


@dataclass(frozen=True)
class Headline:
    text: str  # "16k vs 8k: +7.3 % (+6.3 to +8.4)"
    verdict: str  # the summary's words: faster, slower, no difference detected, ...
    css: str  # v-faster, v-slower, v-none


@dataclass(frozen=True)
class Answer:
    lines: list[Headline]
    more: str = ""  # "and 12 more with no difference detected"
    empty: str = ""  # why there is no comparison


def headline_lines(s: ExperimentSummary, limit: int = MAX_LINES) -> Answer:
    """The comparisons with a detected difference first (largest gain first, either
    way), then the others; at most `limit` lines, the rest counted."""
    compared = [
        (v.label or v.variant_id, v.reference_label, v.comparison, v.verdict)
        for v in s.variants
        if not v.is_reference and v.comparison is not None
    ]
    if not compared:
        return Answer([], empty=_why_none(s))
    detected = [c for c in compared if c[2].verdict in (stats.FASTER, stats.SLOWER)]
    detected.sort(key=lambda c: -abs(c[2].gain_pct or 0.0))
    rest = [c for c in compared if c not in detected]
    if not detected:
        n = len(rest)
        verdicts = sorted({c[2].verdict for c in rest})
        text = ", ".join(verdicts) + (f" ({n} comparisons)" if n > 1 else "")
        lines = [_line(*c) for c in rest] if n <= limit else []
        return Answer(lines, more="" if n <= limit else text)
    ordered = detected + rest
    shown = ordered[:limit]
    left = ordered[limit:]
    more = ""
    if left:
        undetected = sum(c[2].verdict not in (stats.FASTER, stats.SLOWER) for c in left)
        more = f"and {len(left)} more ({undetected} with no difference detected)"
    return Answer([_line(*c) for c in shown], more=more)


def _line(label: str, ref: str, c: stats.Comparison, verdict: str) -> Headline:
    css = {stats.FASTER: "v-faster", stats.SLOWER: "v-slower"}.get(c.verdict, "v-none")
    against = f" vs {ref}" if ref else ""
    return Headline(f"{label}{against}: {gain_text(c, '')}", verdict, css)


def _why_none(s: ExperimentSummary) -> str:
    if not s.variants:
        return "no variant"
    if all(v.is_reference for v in s.variants):
        return "no comparison (every variant is a reference)"
    return "no comparison yet (no paired round)"

"""The first screen of a summary: the answer in at most 15 lines.

Three parts, each a function of the ExperimentSummary that returns lines:
- `verdict_lines`: one sentence per comparison, in four words (faster, slower, equal
  within ±X %, undecided with what would decide it; blocklab.analysis.stats);
- `key_side_lines`: latency, WAL bytes and full-page images per transaction, the side
  metrics that explain a speed difference between page sizes;
- `check_lines`: the design's self-checks (A/A, carry-over, stationarity, a variant's
  runs on more than one build or dataset, disturbed runs). A new check adds its lines
  here, one short line each.
Everything else (the table, every side metric, notes) follows it as the detail.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from blocklab.analysis import equivalence, layout, stats, summary_table
from blocklab.analysis.metrics import (
    MetricInfo,
    compare,
    direction_word,
    metric_info,
    verdict_text,
)
from blocklab.analysis.summary import ExperimentSummary, VariantSummary
from blocklab.analysis.summary_table import gain_text
from blocklab.units import fmt_difference

KEY_SIDE_METRICS = ("latency_avg_ms", "wal_bytes_per_xact", "wal_fpi_per_xact")
MAX_LINES = 15


def first_screen(s: ExperimentSummary) -> list[str]:
    """The heading, what ran (host, PostgreSQL, workload), the verdicts, the key side
    metrics and the checks."""
    refs = {v.reference_label for v in s.variants if not v.is_reference}
    one_ref = len(refs) == 1
    head = (
        f"{s.name}: {s.info.label}, {s.rounds_done} rounds, design {s.design}"
        + (f", against {next(iter(refs))}" if one_ref and next(iter(refs)) else "")
        + f"; equal means within ±{s.equivalence_pct:g} %"
    )
    lines = [head, *([f"  {s.setting}"] if s.setting else [])]
    lines += [f"  {line}" for line in verdict_lines(s, name_reference=not one_ref)]
    side = key_side_lines(s)
    if side:
        lines += ["key side metrics:", *(f"  {line}" for line in side)]
    checks = check_lines(s)
    if checks:
        lines += ["checks:", *(f"  {line}" for line in checks)]
    return lines


def print_first_screen(console: Console, s: ExperimentSummary) -> None:
    """The first screen's lines, the heading in bold."""
    for i, line in enumerate(first_screen(s)):
        console.print(Text(line), style="bold" if i == 0 else "")


def verdict_lines(s: ExperimentSummary, *, name_reference: bool = True) -> list[str]:
    """One line per comparison with its reference."""
    out = []
    for v in s.variants:
        if v.is_reference or v.label in s.layout_arms:
            continue  # the layout control's arms are one check line (check_lines)
        against = f" vs {v.reference_label}" if name_reference and v.reference_label else ""
        if v.comparison is None or v.summary is None:
            out.append(f"{v.label}{against}: no successful run")
            continue
        out.append(f"{v.label}{against}: {verdict_sentence(v.comparison, s.info)}")
        out += [f"  {line}" for line in across_lines(s, v)]
        out += [f"  {line}" for line in mixed_lines(s, v)]
        if s.layout is not None and v.comparison.scale == stats.RATIO:
            out.append(f"  {layout_line(v.comparison, s.layout)}")
    return out


def across_lines(s: ExperimentSummary, v: VariantSummary) -> list[str]:
    """'across its 4 sessions: undecided, +0.4 % (-3.8 to +4.7)' under a verdict whose
    rounds came from two sessions or more: the sessions' levels compared as rounds are,
    each session one observation (analysis.sessions), so a reader sees whether the verdict
    holds when sessions, not rounds, are counted."""
    out = []
    for c in s.sessions.checks:
        if c.variant_id == v.variant_id:
            levels = {i: 1 + x.level_pct / 100 for i, x in enumerate(c.sessions)}
            ones = {i: 1.0 for i in levels}
            across = compare(ones, levels, s.info, s.equivalence_pct)
            words = verdict_sentence(across, s.info)
            if across.verdict == stats.UNDECIDED:  # its reason counts rounds; these are sessions
                words = f"undecided, {gain_text(across, s.info.unit)}"
            out.append(f"across its {len(c.sessions)} sessions: {words}")
    return out


def mixed_lines(s: ExperimentSummary, v: VariantSummary) -> list[str]:
    """'! not one comparison: bs=4k's runs came from 2 builds (checks)' when the variant
    or its reference pooled runs of more than one build or dataset (mixed_inputs); '! the
    sessions disagree: ...' when its answer moved between sessions (analysis.sessions)."""
    return [
        f"! not one comparison: {m.label}'s runs came from {len(m.runs)} {m.what} (checks)"
        for m in s.mixed
        if m.variant_id in (v.variant_id, v.reference_id)
    ] + [
        f"! the sessions disagree: {len(c.sessions)} sessions gave other answers; the "
        "interval holds within one (checks)"
        for c in s.sessions.checks
        if c.variant_id == v.variant_id and c.disagree
    ]


def layout_line(c: stats.Comparison, spread: layout.LayoutSpread) -> str:
    """A comparison judged against code layout alone ([design] layout_control)."""
    if c.gain_pct is None or c.ci95_low is None or c.ci95_high is None:
        return "layout control: no interval to judge"
    ci = ((c.ci95_low - 1) * 100, (c.ci95_high - 1) * 100)
    return layout.judged(c.gain_pct, ci, spread)


def verdict_sentence(c: stats.Comparison, info: MetricInfo) -> str:
    """'faster by 4.5 % (+1.2 to +8.0)', 'equal within ±2 %: +0.3 % (-0.8 to +1.4)', or
    'undecided: +4.5 % (-3.4 to +13.0); cannot rule out a difference of up to +13.0 %;
    about 40 rounds would decide it'."""
    if c.verdict == stats.TOO_FEW:
        return f"cannot tell with fewer than {stats.MIN_PAIRS} rounds"
    if c.verdict == stats.UNDETERMINED:
        return f"undetermined: {c.note}"
    gain = gain_text(c, info.unit)
    if c.verdict in (stats.FASTER, stats.SLOWER):
        size = f"{abs(c.gain_pct):.1f} %" if c.gain_pct is not None else ""
        rest = gain[gain.find("(") :] if size and "(" in gain else gain
        within = f", within ±{c.equivalence_pct:g} {c.equivalence_unit}" if c.equivalent else ""
        return f"{direction_word(c, info)} by {size} {rest}{within}".replace("  ", " ")
    if c.verdict == stats.EQUAL:
        return f"{verdict_text(c, info)}: {gain}{tost_text(c, info)}"
    return f"undecided, {gain}: {undecided_reason(c, info)}"


def tost_text(c: stats.Comparison, info: MetricInfo) -> str:
    """'; 90 % CI -2.8 to +2.4, inside ±3 %': the interval the equivalence test judges
    (the 95 % one before it may reach past ±X while the verdict is equal)."""
    interval = stats.tost_interval(c)
    if interval is None:
        return ""
    if c.scale == stats.RATIO:
        low, high = (f"{(r - 1) * 100:+.1f}" for r in interval)
    else:
        low, high = (fmt_difference(d, info.unit) for d in interval)
    return f"; 90 % CI {low} to {high}, inside ±{c.equivalence_pct:g} {c.equivalence_unit}"


def undecided_reason(c: stats.Comparison, info: MetricInfo) -> str:
    """The largest difference the interval cannot rule out, and the rounds that would
    decide (blocklab.analysis.equivalence.rounds_to_decide, from the observed noise)."""
    if c.ci95_low is None or c.ci95_high is None:
        return f"cannot tell with fewer than {stats.MIN_PAIRS} rounds"
    if c.scale == stats.RATIO:
        far = max(c.ci95_low, c.ci95_high, key=lambda r: abs(r - 1))
        largest = f"{(far - 1) * 100:+.1f} %"
    else:
        largest = fmt_difference(max(c.ci95_low, c.ci95_high, key=abs), info.unit)
    text = f"cannot rule out a difference of up to {largest}"
    if c.scale != stats.RATIO or c.sd is None:
        return text
    rounds = equivalence.rounds_to_decide(c.sd, c.equivalence_pct)
    if rounds is None:
        return text + "; no number of rounds would decide it at this noise"
    return text + f"; about {rounds} rounds would decide it ({c.n_pairs} so far)"


def key_side_lines(s: ExperimentSummary) -> list[str]:
    """One line per key side metric that was compared: each comparison's word and change."""
    out = []
    for metric in KEY_SIDE_METRICS:
        rows = s.side.get(metric, [])
        info = metric_info(metric)
        parts = []
        for label, c, zero_in_both in rows:
            if zero_in_both:
                parts.append(f"{label} 0 in both")
            elif c.estimate is not None:
                change = gain_text(c, info.unit).split(" (")[0]
                parts.append(f"{label} {change} ({verdict_text(c, info)})")
        if parts:
            out.append(f"{info.label}: " + "; ".join(parts))
    return out


def check_lines(s: ExperimentSummary) -> list[str]:
    """The design's self-checks, one short line each (nothing to say: no line)."""
    lines = summary_table.verdict_lines(s)  # A/A and carry-over
    lines += [line for line in s.stationarity if not line.startswith("!")]  # judged, counts
    findings = len(summary_table.stationarity_findings(s))
    if findings:
        lines.append(f"! stationarity: {findings} finding{'s' if findings > 1 else ''} (below)")
    if s.layout is not None:
        lines.append(layout.sentence(s.layout))
    elif layout.builds_differ(  # docs/PRECISION.md, "Code layout alone"
        [layout.Armed(v.label, v.dims, v.reference_label, v.is_reference, {}) for v in s.variants]
    ):
        lines.append(layout.UNCONTROLLED)
    lines += [m.line() for m in s.mixed]  # more than one build or dataset (mixed_inputs)
    lines += s.sessions.lines()  # how many sessions, and whether they agree (analysis.sessions)
    lines += s.disturbance  # other processes' use of the CPUs (blocklab.analysis.disturbance)
    lines += failed_lines(s.variants)
    return lines


def failed_lines(variants: list[VariantSummary]) -> list[str]:
    """Failed or left-out runs, counted in one line."""
    failed = sum(v.n_failed for v in variants)
    dropped = sum(len(v.dropped) for v in variants)
    if not failed and not dropped:
        return []
    return [f"failed runs: {failed} failed, {dropped} round values left out (listed below)"]

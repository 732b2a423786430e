"""The summary as the terminal shows it: every number in its metric's unit, never cut.

The widest layout that fits the console is chosen: every column in one table, then the
same columns in two tables (the comparison, then the spread: min, median, max and
latency), then one block of lines per variant naming every column. No column is ever left
out. A table that fits is never shrunk by rich, so no cell is truncated ("…"); a block
wraps between words, never inside a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from blocklab.analysis import carryover, stats
from blocklab.analysis.aa import aa_sentence
from blocklab.analysis.interleaved_checks import AA_LABEL_SUFFIX
from blocklab.analysis.metrics import SPEED_METRICS, MetricInfo, metric_info
from blocklab.analysis.summary import ExperimentSummary, VariantSummary
from blocklab.console import control_escaped
from blocklab.experiment_file.design import INTERLEAVED
from blocklab.units import NO_VALUE, fmt_difference, fmt_value

VARIANT, N, MEAN, MIN, MEDIAN, MAX, CI, GAIN, VERDICT, LATENCY, FAILED = (
    "variant",
    "n",
    "mean ± stdev",
    "min",
    "median",
    "max",
    "95 % CI",
    "vs reference (95 % CI)",
    "verdict",
    "latency",
    "failed",
)
FULL = (VARIANT, N, MEAN, MIN, MEDIAN, MAX, CI, GAIN, VERDICT, LATENCY, FAILED)
COMPACT = (VARIANT, N, MEAN, CI, GAIN, VERDICT, FAILED)
SPREAD = (VARIANT, MIN, MEDIAN, MAX, LATENCY)  # the columns COMPACT leaves to a second table
LAYOUTS = ((FULL,), (COMPACT, SPREAD))
LEFT = (VARIANT, VERDICT)
UNBOUNDED = 10_000  # columns: wider than any table


@dataclass
class Row:
    label: str
    cells: dict[str, str]
    notes: list[str] = field(default_factory=list)  # warnings, failures, comparison notes


def variant_row(v: VariantSummary, info: MetricInfo, *, several_refs: bool) -> Row:
    """The texts of one variant's cells."""
    st = v.summary
    failures = [f"failed run, {reason}" for reason in v.failure_reasons]
    failures += [f"round {r}: {why}" for r, why in v.dropped.items() if _not_a_failure(why)]
    if st is None:
        cells = dict.fromkeys(FULL, NO_VALUE) | {
            VARIANT: v.label,
            N: "0",
            VERDICT: "no successful run",
            FAILED: str(v.n_failed),
        }
        return Row(v.label, cells, failures)
    u = info.unit
    mean = fmt_value(st.mean, u)
    cells = {
        VARIANT: v.label,
        N: str(st.n),
        MEAN: mean if st.stdev is None else f"{mean} ± {fmt_value(st.stdev, u)}",
        MIN: fmt_value(st.min, u),
        MEDIAN: fmt_value(st.median, u),
        MAX: fmt_value(st.max, u),
        CI: _interval(st.ci95_low, st.ci95_high, u),
        LATENCY: fmt_value(v.latency_avg_ms.mean if v.latency_avg_ms else None, "ms"),
        FAILED: str(v.n_failed),
    }
    cells[GAIN], cells[VERDICT] = _against_reference(v, u, several_refs)
    notes = [f"noisy (CV {(st.cv or 0) * 100:.1f} %): {st.advice}"] if st.noisy else []
    if v.comparison is not None and v.comparison.note:
        notes.append(v.comparison.note)
    return Row(v.label, cells, notes + failures)


def _not_a_failure(why: str) -> bool:
    """A round left out for a reason the failed-run lines do not already give."""
    return why.startswith("half a palindrome") or "not a finite number" in why


def _interval(low: float | None, high: float | None, unit: str) -> str:
    if low is None or high is None:
        return NO_VALUE
    return f"{fmt_value(low, unit)} – {fmt_value(high, unit)}"


def _against_reference(v: VariantSummary, unit: str, several_refs: bool) -> tuple[str, str]:
    """(the gain or difference with its CI, the verdict)."""
    if v.is_reference:
        return "reference", ""
    c = v.comparison
    if c is None or c.estimate is None:
        return NO_VALUE, stats.TOO_FEW
    verdict = v.verdict + (f" vs {v.reference_label}" if several_refs and v.reference_label else "")
    return gain_text(c, unit), verdict


def gain_text(c: stats.Comparison, unit: str) -> str:
    """'-2.0 % (-8.7 to +5.2)' for a ratio; '+1.00 kB (+0.20 kB to +1.80 kB)' without one."""
    if c.estimate is None:  # one round, or no pair: nothing to say
        return NO_VALUE
    if c.scale == stats.RATIO:
        assert c.gain_pct is not None
        text = f"{c.gain_pct:+.1f} %"
        if c.ci95_low is not None and c.ci95_high is not None:
            text += f" ({(c.ci95_low - 1) * 100:+.1f} to {(c.ci95_high - 1) * 100:+.1f})"
        return text
    text = fmt_difference(c.difference, unit)
    if c.ci95_low is not None and c.ci95_high is not None:
        text += f" ({fmt_difference(c.ci95_low, unit)} to {fmt_difference(c.ci95_high, unit)})"
    return text


def print_summary(
    console: Console, s: ExperimentSummary, *, everything: bool = False, answer: bool = True
) -> None:
    """The first screen (blocklab.analysis.first_screen: the answer in at most 15 lines;
    left out with `answer=False`, for a caller that prints it last), then the detail:
    the table, its notes and, with `everything`, every side metric and the A/A floor."""
    from blocklab.analysis.first_screen import print_first_screen

    if answer:
        print_first_screen(console, s)
        console.print()
    print_details(console, s, everything=everything)


def stationarity_findings(s: ExperimentSummary) -> list[str]:
    """The stationarity sentences that name a drift above noise (the first screen counts
    them, the details print them)."""
    return [line for line in s.stationarity if line.startswith("!")]


def print_details(console: Console, s: ExperimentSummary, *, everything: bool = False) -> None:
    info = s.info
    several_refs = len({v.reference_label for v in s.variants if not v.is_reference}) > 1
    rows = [variant_row(v, info, several_refs=several_refs) for v in s.variants]
    console.print(
        Text(f"{s.name}: {info.label} ({info.unit}) per variant, {s.rounds_done} rounds"),
        style="italic",
    )
    for layout in LAYOUTS:
        tables = [_table(rows, columns) for columns in layout]
        if all(_natural_width(console, t) <= console.width for t in tables):
            for table in tables:
                console.print(table)
            break
    else:
        for row, v in zip(rows, s.variants, strict=True):
            _print_block(console, row, v.is_reference)
    for row in rows:
        for note in row.notes:
            console.print(Text(control_escaped(f"  ! {row.label}: {note}")))
    for line in [*design_lines(s, everything=everything), *stationarity_findings(s)]:
        console.print(Text(f"  {line}"))
    console.print(Text(f"  {_explanation(s)}"), style="dim")
    if s.end_reason:
        console.print(Text(f"  ended: {s.end_reason}"))


def design_lines(s: ExperimentSummary, *, everything: bool = True) -> list[str]:
    """The design and its matching analysis, the A/A noise floor beside the result, and
    the comparisons of the metrics less sensitive to the host's noise. Without
    `everything`, the A/A and carry-over verdicts (on the first screen already) are left
    out and the side metrics that are 0 in both variants are counted in one line."""
    lines = [f"design {s.design}: " + design_analysis(s)]
    if s.aa is not None:
        width = s.aa.ci_half_width_pct
        copies = " copy 1 vs copy 0"
        if s.design == INTERLEAVED:  # the storage slots' A/A names itself in its label
            copies = " half 1 vs half 0" if s.aa_label.endswith(AA_LABEL_SUFFIX) else ""
        lines.append(
            f"A/A noise floor ({s.aa_label}{copies}, {s.aa.n_pairs} rounds): "
            f"{gain_text(s.aa, '')}"
            + (f", CI half-width {width:.2f} %" if width is not None else "")
            + "; a comparison inside this is not a difference the machine can show"
        )
    if everything:
        lines += verdict_lines(s)
    zero = 0
    for metric, rows in s.side.items():
        info = metric_info(metric)
        for label, c, zero_in_both in rows:
            if zero_in_both:
                zero += 1
                if everything:
                    lines.append(f"{info.label}: {label} 0 in both (nothing counted)")
                continue
            width = c.ci_half_width_pct
            lines.append(
                f"{info.label}: {label} {gain_text(c, info.unit)}"
                + (f", CI half-width {width:.2f} %" if width is not None else "")
            )
    if zero and not everything:
        what = f"{zero} side comparison{'s' * (zero != 1)}"
        lines.append(f"0 in both variants, not shown: {what} (summary --all lists them)")
    if s.side_fixed:
        lines.append(f"{FIXED_BY_BUILD}, not compared: " + ", ".join(s.side_fixed))
    return lines


FIXED_BY_BUILD = "fixed by each build (one value per variant in every round)"


def verdict_lines(s: ExperimentSummary) -> list[str]:
    """The A/A verdict and the carry-over estimate, in words (nothing to say: no line)."""
    lines = [aa_sentence(s.aa)] if s.aa is not None else []
    if s.carryover is not None and (s.carryover.comparison is not None or s.carryover.confounded):
        lines.append(carryover.sentence(s.carryover, ratio_words(s.info)))
    return lines


def ratio_words(info: MetricInfo) -> tuple[str, str]:
    """What a ratio above 1 and below 1 mean for the metric, as words."""
    if info.key in SPEED_METRICS:
        return ("faster", "slower") if info.higher_is_better is not False else ("slower", "faster")
    return ("higher", "lower")


DESIGN_ANALYSIS = {
    "paired": "each variant once per round; per-round ratios",
    "short-runs": "shorter runs in more rounds; per-round ratios",
    "abba": "A B B A per round; per-round ratio of each variant's geometric mean of 2 runs",
    "aa-control": "paired plus the reference twice per round; the reference's value is the "
    "geometric mean of its 2 runs",
    "interleaved": "both servers up, slices in turns; per-round ratios of each variant's "
    "slices (total transactions / total seconds); storage slots swapped every two rounds "
    "and fitted beside the effect (n - 2 df)",
}
# What an interleaved experiment's [design] checkpoint means for its per-transaction WAL
# and full-page images: only the experiment's own mode is printed.
INTERLEAVED_CHECKPOINT = {
    "free": 'checkpoint "free": each server\'s checkpoint timer ran while the other was '
    "driven (per-transaction WAL and full-page images are not a lone run's)",
    "aligned": 'checkpoint "aligned": both windows start at a CHECKPOINT and span the same '
    "driven seconds",
}


def design_analysis(s: ExperimentSummary) -> str:
    """The design's matching analysis in words, with an interleaved experiment's own
    checkpoint mode (not every mode's)."""
    text = DESIGN_ANALYSIS.get(s.design, "")
    if s.design == INTERLEAVED:
        text += "; " + INTERLEAVED_CHECKPOINT.get(s.checkpoint, INTERLEAVED_CHECKPOINT["free"])
    return text


def _table(rows: list[Row], columns: tuple[str, ...]) -> Table:
    table = Table()
    for col in columns:
        table.add_column(col, justify="left" if col in LEFT else "right")
    for row in rows:
        table.add_row(*(Text(control_escaped(row.cells[col])) for col in columns))
    return table


def _natural_width(console: Console, table: Table) -> int:
    """The width the table takes when nothing has to wrap (rich clamps to the console's)."""
    unclamped = console.options.update_width(UNBOUNDED)
    return Measurement.get(console, unclamped, table).maximum


def _print_block(console: Console, row: Row, is_reference: bool) -> None:
    """One variant as lines of `name  value`, one per column of the table (the reference
    has no gain or verdict): fits any width without cutting a number."""
    c = row.cells
    label = control_escaped(row.label) + (" (reference)" if is_reference else "")
    console.print(Text(label, style="bold"))
    for name in FULL[1:]:
        if is_reference and name in (GAIN, VERDICT):
            continue
        console.print(Text(f"  {name + ':':<24}{c[name]}"))


def _explanation(s: ExperimentSummary) -> str:
    geometric = any(v.summary and v.summary.ci_of == stats.GEOMETRIC_MEAN for v in s.variants)
    of = "the geometric mean of the rounds (log scale)" if geometric else "the mean"
    return (
        f"95 % CI: of {of}. vs reference: the geometric mean of the per-round ratios with "
        "its 95 % CI (a difference in the metric's unit where a round has a 0)."
    )

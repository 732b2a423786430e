"""The per-query part of `blocklab summary` (SQL workloads): the workload's label, each
query's server time per variant with its 95 % CI, which variants chose a different plan
than the reference, and the two plans side by side with the differing nodes marked."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from blocklab.analysis import query_overall
from blocklab.analysis.query_summary import QueriesSummary, QueryVariant, plan_lines, side_by_side
from blocklab.units import NO_VALUE


def time_text(v: QueryVariant) -> str:
    s = v.summary
    if s is None:
        return NO_VALUE
    if s.ci95_low is None or s.ci95_high is None:
        return f"{s.mean:.2f} ms (n={s.n})"
    return f"{s.mean:.2f} ms [{s.ci95_low:.2f}, {s.ci95_high:.2f}]"


def print_queries(console: Console, qs: QueriesSummary, *, diffs: bool = True) -> None:
    """The table, the queries whose plan changed and (`diffs`) their plans side by side."""
    if qs.label:
        console.print(Text(f"Workload: {qs.label}.", style="bold"))
    labels = [v.label for v in qs.queries[0].variants] if qs.queries else []
    table = Table(title=f"{qs.experiment}: per-query server time, mean [95 % CI] over rounds")
    table.add_column("query")
    for label in labels:
        table.add_column(label, justify="right", overflow="fold")
    table.add_column(f"plan differs from {qs.reference_label or 'the reference'}")
    for q in qs.queries:
        cells = {v.label: time_text(v) for v in q.variants}
        differs = ", ".join(v.label for v in q.differing) or "no"
        varies = [v.label for v in q.variants if v.plan_varies]
        if varies:
            differs += f" (plan varied over rounds: {', '.join(varies)})"
        table.add_row(q.query, *[cells.get(label, NO_VALUE) for label in labels], differs)
    console.print(table, crop=False)
    for line in overall_lines(qs):
        console.print(line, markup=False, highlight=False, crop=False)
    changed = qs.changed
    console.print(
        f"{len(changed)} of {len(qs.queries)} queries chose a different plan than "
        f"{qs.reference_label or 'the reference'}"
        + (f": {', '.join(q.query for q in changed)}" if changed else ".")
        + ("" if diffs or not changed else " (plans side by side: blocklab summary)")
    )
    for q in changed if diffs else []:
        assert q.reference is not None
        for other in q.differing:
            left, right = plan_lines(qs.diff(q, other))
            console.print(
                Text(f"\n{q.query}: {q.reference.label} (left) vs {other.label} (right), "
                     "* marks a differing node", style="bold")
            )  # fmt: skip
            width = max((len(x) for x in left), default=0) + 2
            for line in side_by_side(left, right, width=width):
                console.print(line, markup=False, highlight=False, crop=False, overflow="ignore")


def overall_lines(qs: QueriesSummary) -> list[str]:
    """Under the table: each variant's geometric mean of the statements' server times
    with its 95 % CI, and its ratio to the reference with the verdict."""
    o = qs.overall
    if o is None:
        return []
    ref = o.reference
    covers, left_out = query_overall.covered(o)
    out = [f"Overall: geometric mean of the statements' server times {covers}, [95 % CI]:"]
    out += [f"  {left_out}"] if left_out else []
    for v in o.variants:
        s = v.summary
        mean = NO_VALUE if s is None or s.geo_mean is None else f"{s.geo_mean:.3f} ms"
        ci = "" if s is None or s.ci95_low is None else f" [{s.ci95_low:.3f}, {s.ci95_high:.3f}]"
        if v.comparison is None:
            vs = "reference" if v is ref else "no reference to compare with"
        else:
            against = ref.label if ref else "the reference"
            vs = f"vs {against}: {query_overall.describe(v.comparison)}"
        out.append(f"  {v.label}: {mean}{ci}, {vs}")
    return out

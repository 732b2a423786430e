"""What changed besides throughput: the metrics whose change survives one error rate over
the whole family, largest relative change first; the metrics that are 0 in both variants
or the same in every round are counted in one line (summary --all names them).

Every (metric x comparison) with a paired t-test is a candidate; its p-value is the
test's on the per-round log ratios (stats.compare_paired). Benjamini-Hochberg at 5 % over
all of them (`discoveries`) keeps the expected share of false lines
among the lines shown at 5 %; when nothing changed at all, a line shows up in at most
about 5 % of experiments, where the former rule (each 95 % CI alone) showed one in most
experiments of 30 to 80 metrics.

The candidates are the metrics of the catalogue (blocklab.analysis.metrics) and every
per-transaction metric the probes store (a device's bytes per transaction, for one),
compared as the summary compares throughput (summarize_experiment: the design's per-round
values, paired with the reference's). Each metric is named as everywhere else, by its
catalogue label (one name per metric).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from blocklab.analysis import stats
from blocklab.analysis.metrics import KNOWN_METRICS, MetricInfo, metric_info
from blocklab.analysis.summary import fixed_by_build, summarize_experiment
from blocklab.analysis.summary_table import FIXED_BY_BUILD, gain_text
from blocklab.store import ResultsStore
from blocklab.units import fmt_value

NOT_LISTED = ("tps",)  # the table above is the throughput
FALSE_DISCOVERY_RATE = 0.05
_CATALOGUE = {m.key for m in KNOWN_METRICS}


@dataclass(frozen=True)
class Change:
    """One variant against its reference, in one metric, with its paired t-test."""

    info: MetricInfo
    label: str  # the variant
    reference_label: str
    reference_mean: float
    mean: float
    comparison: stats.Comparison

    @property
    def relative_pct(self) -> float:
        """The size of the change in percent of the reference (inf: from 0)."""
        c = self.comparison
        if c.gain_pct is not None:
            return abs(c.gain_pct)
        if self.reference_mean == 0:
            return math.inf
        return abs((c.difference or 0.0) / self.reference_mean * 100)


@dataclass
class ChangedMetrics:
    changes: list[Change] = field(default_factory=list)  # largest relative change first
    zero_in_both: list[str] = field(default_factory=list)  # labels: 0 in every comparison
    constant: list[str] = field(default_factory=list)  # labels: one value in every round
    fixed: list[str] = field(default_factory=list)  # labels: fixed by each build, not tested
    tested: int = 0  # the (metric x comparison) candidates the error rate is over


def discoveries(p_values: Sequence[float], rate: float = FALSE_DISCOVERY_RATE) -> list[bool]:
    """Which of the p-values Benjamini-Hochberg rejects at false discovery rate `rate`:
    those ranked at or below the largest rank k whose p-value is at most k / m x rate.
    Written here rather than imported (scipy.stats.false_discovery_control): importing
    scipy.stats took 0.7 s of every `summary` and `report`. tests/analysis/
    test_false_discovery.py checks it against statsmodels' fdr_bh."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    k_max = max((k for k, i in enumerate(order, 1) if p_values[i] <= k / m * rate), default=0)
    rejected = set(order[:k_max])
    return [i in rejected for i in range(m)]


def candidates(stored: list[str]) -> list[str]:
    """The stored metrics worth comparing: the catalogue's and every per-transaction one."""
    return [
        m for m in stored if m not in NOT_LISTED and (m in _CATALOGUE or m.endswith("_per_xact"))
    ]


def find(db: ResultsStore, name: str, host: str | None = None) -> ChangedMetrics:
    """The metrics that changed (Benjamini-Hochberg over every candidate), those 0 in
    both and those with one value in every round."""
    out = ChangedMetrics()
    candidates_found: list[Change] = []
    for key in candidates(db.metric_names(name)):
        info = metric_info(key)
        # its variants' rows alone: each metric's own checks (carry-over, latency, the
        # setting line) are not used here, and were half the summary at 10,000 runs
        s = summarize_experiment(db, name, key, side=False, host=host, checks=False)
        by_id = {v.variant_id: v for v in s.variants}
        values: list[float] = []
        changes, per_variant = [], []
        for v in s.variants:
            ref = by_id.get(v.reference_id or "")
            if v.is_reference or v.comparison is None or ref is None or not v.values:
                continue
            values += [*ref.values.values(), *v.values.values()]
            per_variant += [ref.values, v.values]
            if v.comparison.p_value is not None:
                ref_mean, mean = _mean(ref.values), _mean(v.values)
                changes.append(Change(info, v.label, ref.label, ref_mean, mean, v.comparison))
        if not fold(out, info.label, values, per_variant):
            candidates_found += changes
    return select(out, candidates_found)


def fold(
    out: ChangedMetrics,
    label: str,
    values: Sequence[float],
    per_variant: Sequence[Mapping[int, float]],
) -> bool:
    """Files a metric 0 in both, with one value throughout, or fixed by each build under
    `out`'s folded lists; True for the last (a tautology: left out before the BH selection)."""
    if values and all(x == 0 for x in values):
        out.zero_in_both.append(label)
    elif values and len(set(values)) == 1:
        out.constant.append(label)
    elif per_variant and fixed_by_build(per_variant):
        out.fixed.append(label)
        return True
    return False


def select(out: ChangedMetrics, found: list[Change]) -> ChangedMetrics:
    """`out` with the candidates Benjamini-Hochberg keeps, largest change first."""
    keep = discoveries([c.comparison.p_value or 1.0 for c in found])
    out.tested = len(found)
    out.changes = [c for c, k in zip(found, keep, strict=True) if k]
    out.changes.sort(key=lambda c: (-c.relative_pct, c.info.label, c.label))
    return out


def _mean(values: dict[int, float]) -> float:
    return statistics.fmean(values.values()) if values else 0.0


def lines(found: ChangedMetrics, *, everything: bool = False) -> list[str]:
    """The section's lines: a heading, one line per change, the folded metrics."""
    if not found.tested and not found.zero_in_both and not found.constant and not found.fixed:
        return []
    rate = f"{FALSE_DISCOVERY_RATE * 100:g} %"
    out = [
        f"What changed (Benjamini-Hochberg, false discovery rate {rate} over "
        f"{found.tested} metric comparisons), largest first:"
    ]
    for c in found.changes:
        u = c.info.unit
        out.append(
            f"  {c.info.label}: {c.label} {fmt_value(c.mean, u)} vs {c.reference_label} "
            f"{fmt_value(c.reference_mean, u)}, {gain_text(c.comparison, u)}"
        )
    if not found.changes:
        out.append("  none")
    return out + _folded(found, everything)


def _folded(found: ChangedMetrics, everything: bool) -> list[str]:
    """The metrics with nothing to compare: one line, or their names with `everything`."""
    if everything:
        out = ["  0 in both: " + ", ".join(found.zero_in_both)] if found.zero_in_both else []
        if found.constant:
            out.append("  the same value in every round: " + ", ".join(found.constant))
        if found.fixed:
            out.append(f"  {FIXED_BY_BUILD}, not tested: " + ", ".join(found.fixed))
        return out
    n = len(found.zero_in_both) + len(found.constant)
    out = []
    if n:
        out.append(
            f"  {n} metric{'s are' if n != 1 else ' is'} 0 in both variants or the same in "
            "every round; summary --all lists them"
        )
    if found.fixed:
        k = len(found.fixed)
        out.append(f"  {k} metric{'s' * (k != 1)} {FIXED_BY_BUILD}, not tested; --all names them")
    return out


def print_changed(
    console: Console, db: ResultsStore, name: str, host: str | None, *, everything: bool = False
) -> None:
    """The section under the throughput summary (nothing when there is nothing to say)."""
    for line in lines(find(db, name, host), everything=everything):
        console.print(Text(f"  {line}"))

"""What changed besides throughput: every measured metric whose paired 95 % CI excludes
no change, largest relative change first, and the metrics that are 0 in both variants
of a comparison (said so, rather than as "+0.0 %").

The candidates are the metrics of the catalogue (blocklab.analysis.metrics) and every
per-transaction metric the probes store (a device's bytes per transaction, for one),
compared as the summary compares throughput (summarize_experiment: the design's per-round
values, paired with the reference's). Byte counters are named for what they count.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from blocklab.analysis import stats
from blocklab.analysis.metrics import KNOWN_METRICS, MetricInfo, metric_info
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import gain_text
from blocklab.store import ResultsStore
from blocklab.units import fmt_value

NOT_LISTED = ("tps",)  # the table above is the throughput
_CATALOGUE = {m.key for m in KNOWN_METRICS}
# What a byte counter counts, where the catalogue's label leaves it open.
WHAT_IT_COUNTS = {
    "wal_bytes_per_xact": "WAL records (pg_stat_wal) per transaction",
    "device_wal_write_bytes_per_xact": "device writes on the WAL volume per transaction",
    "device_wal_read_bytes_per_xact": "device reads on the WAL volume per transaction",
    "device_data_write_bytes_per_xact": "device writes on the data volume per transaction",
    "device_data_read_bytes_per_xact": "device reads on the data volume per transaction",
    "relation_write_bytes_per_xact": (
        "relation pages written by the server (checkpointer + bgwriter + backends) per transaction"
    ),
}


@dataclass(frozen=True)
class Change:
    """One variant against its reference, in one metric, with a CI that excludes 0."""

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


def label_of(key: str) -> MetricInfo:
    """The metric's catalogue entry, its label naming what a byte counter counts."""
    info = metric_info(key)
    what = WHAT_IT_COUNTS.get(key)
    return info if what is None else MetricInfo(key, what, info.unit, info.higher_is_better)


def candidates(stored: list[str]) -> list[str]:
    """The stored metrics worth comparing: the catalogue's and every per-transaction one."""
    return [
        m for m in stored if m not in NOT_LISTED and (m in _CATALOGUE or m.endswith("_per_xact"))
    ]


def find(db: ResultsStore, name: str, host: str | None = None) -> ChangedMetrics:
    """The metrics that changed (CI excluding no change) and those 0 in both."""
    out = ChangedMetrics()
    for key in candidates(db.metric_names(name)):
        info = label_of(key)
        s = summarize_experiment(db, name, key, side=False, host=host)
        by_id = {v.variant_id: v for v in s.variants}
        zero, compared = True, False
        for v in s.variants:
            ref = by_id.get(v.reference_id or "")
            if v.is_reference or v.comparison is None or ref is None or not v.values:
                continue
            compared = True
            both = [*ref.values.values(), *v.values.values()]
            zero = zero and all(x == 0 for x in both)
            if v.comparison.verdict in (stats.FASTER, stats.SLOWER):
                ref_mean, mean = _mean(ref.values), _mean(v.values)
                out.changes.append(Change(info, v.label, ref.label, ref_mean, mean, v.comparison))
        if compared and zero:
            out.zero_in_both.append(info.label)
    out.changes.sort(key=lambda c: (-c.relative_pct, c.info.label, c.label))
    return out


def _mean(values: dict[int, float]) -> float:
    return statistics.fmean(values.values()) if values else 0.0


def lines(found: ChangedMetrics) -> list[str]:
    """The section's lines: a heading, one line per change, the metrics 0 in both."""
    if not found.changes and not found.zero_in_both:
        return []
    out = ["other metrics that changed (95 % CI excludes no change), largest first:"]
    for c in found.changes:
        u = c.info.unit
        out.append(
            f"  {c.info.label}: {c.label} {fmt_value(c.mean, u)} vs {c.reference_label} "
            f"{fmt_value(c.reference_mean, u)}, {gain_text(c.comparison, u)}"
        )
    if not found.changes:
        out.append("  none")
    if found.zero_in_both:
        out.append("  0 in both: " + ", ".join(found.zero_in_both))
    return out


def print_changed(console: Console, db: ResultsStore, name: str, host: str | None) -> None:
    """The section under the throughput summary (nothing when there is nothing to say)."""
    for line in lines(find(db, name, host)):
        console.print(Text(f"  {line}"))

"""Pure helpers of the report: metric names, axis choice, moving averages, cell statistics.

No I/O: everything takes plain values and returns plain values, so it is tested directly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab.analysis import stats
from blocklab.analysis.metrics import (
    KNOWN_METRICS,
    MetricInfo,
    compare,
    metric_info,
    summarize,
    verdict_text,
)
from blocklab.analysis.summary_table import gain_text
from blocklab.units import fmt_size

Point = tuple[float, float | None]
Scalar = str | int | float | bool


def order_metrics(present: Iterable[str]) -> list[MetricInfo]:
    """Known metrics in their fixed order, then the others alphabetically."""
    names = set(present)
    known = [m for m in KNOWN_METRICS if m.key in names]
    rest = sorted(names - {m.key for m in known})
    return known + [metric_info(k) for k in rest]


def value_key(v: Any) -> tuple[int, float, str]:
    """Sort numbers numerically, then strings alphabetically."""
    if isinstance(v, bool):
        return (1, 0.0, str(v))
    if isinstance(v, int | float):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def dimension_values(variant_dims: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Every dimension (in first-seen order) with its sorted distinct values."""
    out: dict[str, list[Any]] = {}
    for dims in variant_dims:
        for k, v in dims.items():
            vals = out.setdefault(k, [])
            if v not in vals:
                vals.append(v)
    return {k: sorted(vs, key=value_key) for k, vs in out.items()}


def dim_label(dim: str, value: Any) -> str:
    """A dimension's value in its unit, alike for every size: block_size_kb 4 and
    fs_block_size 4096 both read '4 kB'; anything without a unit reads as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if dim == "fs_block_size" or dim.endswith("_bytes"):
        return fmt_size(int(value))
    for suffix, size in (("_kb", 1024), ("_mb", 1024**2)):
        if dim.endswith(suffix):
            return fmt_size(int(value * size))
    if dim.endswith("_s"):
        return f"{value:g} s"
    return str(value)


def dim_labels(dims: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, str]]:
    """dimension -> str(value) -> label, for the pages' scripts."""
    return {k: {str(v): dim_label(k, v) for v in vals} for k, vals in dims.items()}


def default_axes(dims: Sequence[str]) -> tuple[str | None, str | None]:
    """(x, y) of the default chart: y data block size, x fs block size, else WAL block size,
    else the first two varying dimensions. One dimension: (x, None); none: (None, None)."""
    d = list(dims)
    if "block_size_kb" in d:
        for other in ("fs_block_size", "wal_block_size_kb"):
            if other in d:
                return other, "block_size_kb"
        rest = [k for k in d if k != "block_size_kb"]
        return (rest[0], "block_size_kb") if rest else ("block_size_kb", None)
    if len(d) >= 2:
        return d[1], d[0]
    return (d[0], None) if d else (None, None)


def _determined(variant_dims: Sequence[Mapping[str, Any]], dim: str, by: Sequence[str]) -> bool:
    """True when the values of `by` fix the value of `dim` in every variant."""
    seen: dict[tuple[str, ...], str] = {}
    for dims in variant_dims:
        key = tuple(str(dims.get(b)) for b in by)
        val = str(dims.get(dim))
        if seen.setdefault(key, val) != val:
            return False
    return True


def free_dims(variant_dims: Sequence[Mapping[str, Any]], axes: Sequence[str | None]) -> list[str]:
    """The dimensions besides the axes that must be fixed to pick one variant per cell.

    A dimension fixed by the others (a storage label by fs and fs block size) is dropped;
    labels are dropped before the dimensions they summarise."""
    used = [a for a in axes if a]
    rest = [k for k in dimension_values(variant_dims) if k not in used]
    for dim in sorted(rest, key=lambda k: k != "storage"):
        others = used + [k for k in rest if k != dim]
        if _determined(variant_dims, dim, others):
            rest.remove(dim)
    return rest


def slices(variant_dims: Sequence[Mapping[str, Any]], dims: Sequence[str]) -> list[dict[str, Any]]:
    """The combinations of `dims` that occur, sorted."""
    values = dimension_values([{k: d.get(k) for k in dims} for d in variant_dims])
    present = {tuple(str(d.get(k)) for k in dims) for d in variant_dims}
    out = []
    for combo in itertools.product(*(values.get(k, []) for k in dims)):
        if tuple(str(c) for c in combo) in present:
            out.append(dict(zip(dims, combo, strict=True)))
    return out


def moving_average(points: Sequence[Point], window_s: float = 10.0) -> list[Point]:
    """Trailing moving average over (t - window_s, t]; None values are skipped.

    `points` must be sorted by time (the store returns them so)."""
    out: list[Point] = []
    lo, total, count = 0, 0.0, 0
    for t, v in points:
        if v is not None:
            total, count = total + v, count + 1
        while points[lo][0] <= t - window_s:
            old = points[lo][1]
            if old is not None:
                total, count = total - old, count - 1
            lo += 1
        out.append((t, round(total / count, 3) if count else None))
    return out


def checkpoint_kind(trigger: str) -> str:
    """'time' for checkpoint_timeout, 'wal' for max_wal_size or a request, else 'other'."""
    if trigger == "time":
        return "time"
    if trigger in ("wal", "xlog", "requested", "immediate", "force"):
        return "wal"
    return "other"


@dataclass(frozen=True)
class CellStats:
    summary: stats.Summary
    comparison: stats.Comparison | None
    verdict: str
    values: Mapping[int, float] = field(default_factory=dict)  # round -> value


def cell_stats(
    values: Mapping[int, float],
    ref_values: Mapping[int, float] | None,
    info: MetricInfo,
    *,
    is_reference: bool = False,
    equivalence_pct: float = stats.EQUIVALENCE_PCT,
) -> CellStats | None:
    """Summary of one variant's round -> value, and its paired comparison with the reference
    (None for the reference itself)."""
    clean = finite_values(values)
    if not clean:
        return None
    summary = summarize(list(clean.values()), info)
    if ref_values is None:
        return CellStats(summary, None, "reference" if is_reference else "", clean)
    comp = compare(dict(ref_values), clean, info, equivalence_pct)
    return CellStats(summary, comp, verdict_text(comp, info), clean)


def finite_values(values: Mapping[int, float | None]) -> dict[int, float]:
    """round -> value, the rounds without a finite value left out."""
    return {r: v for r, v in values.items() if v is not None and math.isfinite(v)}


def vs_reference(c: stats.Comparison, unit: str) -> str:
    """The change against the reference as `blocklab summary` prints it (one function:
    blocklab.analysis.summary_table.gain_text): '+4.5 % (-3.4 to +13.0)' for a ratio, a
    signed difference in the unit with its CI without one."""
    return gain_text(c, unit)


def fmt_num(x: float | None) -> str:
    """Four significant digits, thousands separated; '–' for no value."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    if a == 0:
        return "0"
    return f"{x:.3g}"


def fmt_when(iso: str | None) -> str:
    """'2025-03-08T12:00:00+00:00' -> '2025-03-08 12:00:00 UTC'."""
    if not iso:
        return "–"
    s = iso.replace("T", " ")
    for utc in ("+00:00", "Z"):
        if s.endswith(utc):
            return s.removesuffix(utc) + " UTC"
    return s

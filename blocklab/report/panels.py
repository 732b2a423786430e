"""The run page's panels: per-second series grouped as a database engineer reads them,
with human labels and units (pure: one table and the functions that apply it).

Each series the probes and drivers store (blocklab.probes.derived, the workload drivers)
has a row in SERIES: its label and the chart it is drawn in; CHARTS says which panel a
chart is in, its title and what its values are (bytes/s are scaled to KiB/s, MiB/s or
GiB/s by the chart's largest value). Block-device series are matched by name (one per
device scope); a series not listed goes to "Other" under its own name. A series that is
zero in every second is not drawn: its panel names it on one line, "zero throughout".
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blocklab.analysis.metrics import metric_info

Point = tuple[float, float | None]

PANELS = (
    ("throughput", "Throughput and latency"),
    ("wal", "WAL"),
    ("io", "Device I/O"),
    ("buffers", "Buffers, background writer and checkpoints"),
    ("tuples", "Tuples and HOT"),
    ("host", "CPU and memory"),
    ("other", "Other"),
)

# what a chart's values are: bytes/s and bytes are scaled, the others drawn as they are
BYTES_PER_S = "bytes/s"
BYTES = "bytes"


@dataclass(frozen=True)
class Chart:
    id: str  # the page's element is chart-<id>
    panel: str
    title: str
    unit: str  # BYTES_PER_S, BYTES, or the unit shown as it is ("records/s", "%")
    log_copy: bool = False  # drawn a second time on a log scale (chart-<id>-log)


CHARTS = (
    Chart("tps", "throughput", "Throughput, each second, and its 10-second moving average", ""),
    Chart("latency", "throughput", "Latency", "ms", log_copy=True),
    Chart("rates", "throughput", "Server commits and driver rates", "/s"),
    Chart("tpm", "throughput", "All transactions (go-tpc)", "per minute"),
    Chart("wal-bytes", "wal", "WAL volume", BYTES_PER_S),
    Chart("wal-records", "wal", "WAL records and full-page images", "/s"),
    Chart("wal-io", "wal", "WAL writes and syncs", "/s"),
    Chart("device-write", "io", "Device writes", BYTES_PER_S),
    Chart("device-read", "io", "Device reads", BYTES_PER_S),
    Chart("device-iops", "io", "Device IOPS", "requests/s"),
    Chart("writers", "buffers", "Buffers written, by writer", BYTES_PER_S),
    Chart("relation-io", "buffers", "Relation reads and extensions", BYTES_PER_S),
    Chart("blocks", "buffers", "Shared buffer hits and reads", "blocks/s"),
    Chart("checkpoints", "buffers", "Checkpoints completed since the run started", "count"),
    Chart("updates", "tuples", "Tuple updates", "tuples/s"),
    Chart("cpu", "host", "CPU", "%"),
    Chart("mem", "host", "Host memory used", BYTES),
)
_CHART = {c.id: c for c in CHARTS}
_RANK = {c.id: i for i, c in enumerate(CHARTS)}

# series name -> (label, chart id); in this order within a chart
SERIES: dict[str, tuple[str, str]] = {
    "tps": ("throughput", "tps"),
    "tpmc": ("throughput (tpmC)", "tps"),
    "latency_ms": ("latency (average)", "latency"),
    "latency_p95_ms": ("latency (95th percentile)", "latency"),
    "latency_max_ms": ("latency (max)", "latency"),
    "xact_commit_per_s": ("commits (server)", "rates"),
    "qps": ("queries (sysbench)", "rates"),
    "errors_per_s": ("errors (sysbench)", "rates"),
    "tpm_total": ("all transactions (go-tpc)", "tpm"),
    "wal_bytes_per_s": ("WAL generated (pg_stat_wal)", "wal-bytes"),
    "wal_write_bytes_per_s": ("WAL written to files (pg_stat_io)", "wal-bytes"),
    "wal_records_per_s": ("WAL records", "wal-records"),
    "wal_fpi_per_s": ("full-page images", "wal-records"),
    "wal_write_per_s": ("WAL writes", "wal-io"),
    "wal_sync_per_s": ("WAL syncs", "wal-io"),
    "checkpointer_write_bytes_per_s": ("checkpointer", "writers"),
    "bgwriter_write_bytes_per_s": ("background writer", "writers"),
    "backend_write_bytes_per_s": ("backends", "writers"),
    "relation_read_bytes_per_s": ("relations read", "relation-io"),
    "relation_extend_bytes_per_s": ("relations extended", "relation-io"),
    "blks_hit_per_s": ("buffer hits", "blocks"),
    "blks_read_per_s": ("buffer misses (read in)", "blocks"),
    "checkpoints_done": ("checkpoints completed", "checkpoints"),
    "n_tup_upd_per_s": ("tuples updated", "updates"),
    "n_tup_hot_upd_per_s": ("HOT updates", "updates"),
    "n_tup_newpage_upd_per_s": ("updates onto a new page", "updates"),
    "cpu_user_pct": ("user", "cpu"),
    "cpu_system_pct": ("system", "cpu"),
    "cpu_iowait_pct": ("I/O wait", "cpu"),
    "mem_used_bytes": ("memory used", "mem"),
}
_ORDER = {k: i for i, k in enumerate(SERIES)}

# <scope>_<read|write>_<bytes|ios>_per_s, scopes as blocklab.probes.derived.device_scopes
_DEVICE = re.compile(r"^((?:host_device|device)(?:_\w+?)?)_(read|write)_(bytes|ios)_per_s$")
FINAL_FLUSH_SUFFIX = "_final_flush"  # blocklab.probes.derived: an amount, not a rate
_BINARY = (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0))


@dataclass(frozen=True)
class Placed:
    key: str
    label: str
    chart: Chart
    order: tuple[int, str]


@functools.cache  # a few dozen names, asked for again by every run page
def place(key: str) -> Placed:
    """Where series `key` is drawn and under which label."""
    if key in SERIES:
        label, chart = SERIES[key]
        return Placed(key, label, _CHART[chart], (_ORDER[key], key))
    m = _DEVICE.match(key)
    if m is not None:
        scope, op, what = m.groups()
        who = device_label(scope)
        if what == "ios":
            return Placed(key, f"{who} {op}s", _CHART["device-iops"], (0, key))
        return Placed(key, who, _CHART[f"device-{op}"], (0, key))
    unit = metric_info(key).unit
    if key.endswith("_per_s"):
        unit = BYTES_PER_S if key.endswith("_bytes_per_s") else "/s"
    other = Chart(f"other-{key}", "other", key.replace("_", " "), unit)
    return Placed(key, key.replace("_", " "), other, (0, key))


def device_label(scope: str) -> str:
    """'data device', 'WAL device', 'host device (shared)': the catalogue's words
    (blocklab.analysis.metrics) for the device's byte counters, without the operation."""
    label = metric_info(f"{scope}_write_bytes").label
    return label.removesuffix(" bytes written")


def byte_scale(largest: float, per_s: bool) -> tuple[str, float]:
    """(unit, divisor) for byte values up to `largest`: KiB, MiB or GiB (per second)."""
    unit, div = _BINARY[-1]
    for name, size in _BINARY:
        if largest >= size:
            unit, div = name, size
            break
    return (f"{unit}/s" if per_s else unit), div


_isfinite = math.isfinite  # a global name: a third of -math.inf < v < math.inf's time


def values_of(points: Sequence[Point]) -> list[float]:
    """The finite values."""
    return [v for _, v in points if v is not None and _isfinite(v)]


def _all_zero(vals: list[float]) -> bool:
    """Zero throughout: values, and every one 0."""
    return bool(vals) and not any(vals)


def run_panels(
    series: Mapping[str, Sequence[Point]], throughput_name: str = "tps"
) -> list[dict[str, Any]]:
    """The run page's panels, in PANELS order: each with its charts (title, unit, the
    divisor of the values, the series drawn, a note on the final flush), the series zero
    throughout and those without a value; panels with nothing are left out."""
    drawn: dict[str, list[Placed]] = {}
    zero: dict[str, list[Placed]] = {}
    empty: dict[str, list[Placed]] = {}
    finite: dict[str, list[float]] = {}  # each series' finite values, found once
    for key in series:
        if key.endswith(FINAL_FLUSH_SUFFIX):
            continue
        p = place(key)
        vals = finite[key] = values_of(series[key])
        into = zero if _all_zero(vals) else drawn if vals else empty
        into.setdefault(p.chart.id, []).append(p)
    out = []
    for panel, title in PANELS:
        charts = [_chart(ps, series, finite, throughput_name) for ps in _of_panel(drawn, panel)]
        z = [_named(p) for ps in _of_panel(zero, panel) for p in ps]
        e = [_named(p) for ps in _of_panel(empty, panel) for p in ps]
        if charts or z or e:
            out.append({"id": panel, "title": title, "charts": charts, "zero": z, "empty": e})
    return out


def _of_panel(by_chart: dict[str, list[Placed]], panel: str) -> list[list[Placed]]:
    """The charts of `panel` (CHARTS order, then the others by name), series in order."""
    ids = [c for c, ps in by_chart.items() if ps[0].chart.panel == panel]
    ids.sort(key=lambda c: (_RANK.get(c, len(_RANK)), c))
    return [sorted(by_chart[c], key=lambda p: p.order) for c in ids]


def _named(p: Placed) -> dict[str, str]:
    return {"key": p.key, "label": p.label}


def _chart(
    placed: list[Placed],
    series: Mapping[str, Sequence[Point]],
    finite: Mapping[str, list[float]],
    throughput_name: str,
) -> dict[str, Any]:
    c = placed[0].chart
    unit, scale = c.unit, 1.0
    if c.unit in (BYTES_PER_S, BYTES):
        largest = max((abs(v) for p in placed for v in finite[p.key]), default=0.0)
        unit, scale = byte_scale(largest, per_s=c.unit == BYTES_PER_S)
    if c.id == "tps":
        unit = throughput_name
    return {
        "id": c.id,
        "title": c.title,
        "unit": unit,
        "scale": scale,
        "log_copy": c.log_copy,
        "series": [_named(p) for p in placed],
        "note": flush_note(placed, series, unit.removesuffix("/s"), scale),
    }


def flush_note(
    placed: list[Placed], series: Mapping[str, Sequence[Point]], unit: str, scale: float
) -> str:
    """What the backends flushed as they exited (after the last 1 Hz sample): an amount
    kept apart from the per-second line, stated on the chart; '' without one."""
    parts = []
    for p in placed:
        pts = series.get(p.key.removesuffix("_per_s") + FINAL_FLUSH_SUFFIX) or []
        vals = values_of(pts)
        if not vals:
            continue
        amount = vals[0] / scale
        if scale == 1.0:
            parts.append(f"{p.label} {amount:,.0f}")
        else:
            parts.append(f"{p.label} {amount:,.2f} {unit}")
    if not parts:
        return ""
    return "not drawn, flushed as the backends exited (final flush): " + ", ".join(parts)

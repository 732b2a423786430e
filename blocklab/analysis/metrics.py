"""The catalogue of per-run metrics: label, unit and which direction is better.

One list for the summary table and the report, named as the runner and the probes
store them (blocklab.probes.derived). A metric not listed still shows, under its own
name, with a unit guessed from its suffix and no direction.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from blocklab.analysis import stats
from blocklab.errors import UserError


@dataclass(frozen=True)
class MetricInfo:
    key: str
    label: str
    unit: str
    higher_is_better: bool | None  # None: no direction (a share, a size)


# In this order in menus and tables; any other stored metric follows alphabetically.
KNOWN_METRICS = (
    MetricInfo("tps", "throughput", "transactions/s", True),
    MetricInfo("latency_avg_ms", "latency (average)", "ms", False),
    MetricInfo("wal_bytes_per_xact", "WAL bytes per transaction", "bytes", False),
    MetricInfo(
        "device_data_write_bytes_per_xact",
        "data device bytes written per transaction",
        "bytes",
        False,
    ),
    MetricInfo(
        "device_wal_write_bytes_per_xact",
        "WAL device bytes written per transaction",
        "bytes",
        False,
    ),
    MetricInfo(
        "device_data_read_bytes_per_xact", "data device bytes read per transaction", "bytes", False
    ),
    # kind 'dir': the block device under the directory, whatever else uses it is counted
    MetricInfo(
        "host_device_write_bytes_per_xact",
        "host device (shared) bytes written per transaction",
        "bytes",
        False,
    ),
    MetricInfo(
        "host_device_read_bytes_per_xact",
        "host device (shared) bytes read per transaction",
        "bytes",
        False,
    ),
    MetricInfo(
        "fpi_bytes_share_of_wal_max",
        "full-page images, share of WAL bytes (upper bound)",
        "fraction",
        None,
    ),
    MetricInfo("wal_fpi_per_xact", "full-page images per transaction", "count", False),
    # pg_stat_wal.wal_fpi_bytes: PostgreSQL 19+ (not in 18)
    MetricInfo("wal_fpi_bytes_per_xact", "full-page image bytes per transaction", "bytes", False),
    MetricInfo("fpi_bytes_share_of_wal", "full-page images, share of WAL bytes", "fraction", None),
    MetricInfo(
        "checkpointer_write_bytes_per_xact", "checkpointer bytes per transaction", "bytes", False
    ),
    MetricInfo(
        "bgwriter_write_bytes_per_xact", "background writer bytes per transaction", "bytes", False
    ),
    MetricInfo("backend_write_bytes_per_xact", "backend bytes per transaction", "bytes", False),
    MetricInfo(
        "relation_write_bytes_per_xact",
        "relation bytes written per transaction (checkpointer + bgwriter + backends)",
        "bytes",
        False,
    ),
    MetricInfo("hot_update_ratio", "HOT update ratio", "fraction", True),
    MetricInfo("newpage_update_ratio", "new-page update ratio", "fraction", False),
    MetricInfo("cache_hit_ratio", "buffer cache hit ratio", "fraction", True),
    MetricInfo("server_cpu_s_per_xact", "server CPU seconds per transaction", "s", False),
    # request sizes (blocklab.probes.stat_io, PostgreSQL 18+; /sys/block/<dev>/stat)
    MetricInfo(
        "io_read_bytes_per_read_relation",
        "relation bytes per read request (pg_stat_io)",
        "bytes",
        None,
    ),
    MetricInfo(
        "device_data_read_bytes_per_request", "data device bytes per read request", "bytes", None
    ),
    MetricInfo("host_cpu_busy_s_per_xact", "host CPU seconds per transaction", "s", False),
    # blocklab.probes.disturbance: other processes than the server, driver and blocklab
    MetricInfo(
        "disturbance_cpu_share", "other processes' CPU, share of the machine", "fraction", None
    ),
    MetricInfo("disturbance_cpu_s", "other processes' CPU seconds", "s", None),
    MetricInfo(
        "disturbance_device_bytes",
        "other processes' bytes on the disk under the loop devices",
        "bytes",
        None,
    ),
    MetricInfo(
        "disturbance_device_share",
        "other processes' share of the bytes on the disk under the loop devices",
        "fraction",
        None,
    ),
    MetricInfo(
        "disturbance_kernel_cpu_s",
        "kernel threads' and interrupts' CPU seconds (not counted as disturbance)",
        "s",
        None,
    ),
    MetricInfo("table_bytes", "table bytes after the run", "bytes", None),
    MetricInfo("table_free_bytes", "table free bytes after the run", "bytes", None),
    MetricInfo("index_bytes", "index bytes after the run", "bytes", None),
    MetricInfo("latency_stddev_ms", "latency (stddev)", "ms", False),
    # percentiles: pgbench's from its sampled per-transaction log (workloads.pgbench_latency),
    # sysbench's and go-tpc's their own
    MetricInfo("latency_p50_ms", "latency (50th percentile)", "ms", False),
    MetricInfo("latency_p95_ms", "latency (95th percentile)", "ms", False),
    MetricInfo("latency_p99_ms", "latency (99th percentile)", "ms", False),
    # SQL query workloads (tpch): the server's own statement durations
    MetricInfo("queries_per_hour", "queries per hour (server time)", "queries/h", True),
    MetricInfo("query_time_total_ms", "all queries' server time", "ms", False),
    MetricInfo("query_time_ms", "query time (server, mean per call)", "ms", False),
    # blocklab.probes.footprint: the data volume after the run, trimmed, per 4 KiB block
    MetricInfo("footprint_logical_bytes", "relations (table + index) bytes", "bytes", None),
    MetricInfo("footprint_allocated_bytes", "data volume allocated bytes", "bytes", None),
    MetricInfo("footprint_lz4_bytes", "data volume bytes, lz4 per 4 KiB block", "bytes", None),
    MetricInfo("footprint_zstd_bytes", "data volume bytes, zstd per 4 KiB block", "bytes", None),
)
_KNOWN = {m.key: m for m in KNOWN_METRICS}
RUN_COLUMN_METRICS = ("tps", "latency_avg_ms", "latency_stddev_ms")  # in the runs table
SPEED_METRICS = ("tps", "latency_avg_ms")  # compared as faster/slower
SHARE_UNITS = ("fraction", "%")  # compared in percentage points


_QUERY_KEY = re.compile(r"^(q\d+)_mean_ms$")  # blocklab.workloads.tpch.metrics_of
# <scope>_<read|write>_bytes[_per_xact], scopes as blocklab.probes.derived.device_scopes
_DEVICE_KEY = re.compile(
    r"^(host_device|device)(?:_(\w+?))?_(read|write)_bytes(_per_xact|_per_request)?$"
)
# blocklab.probes.stat_io: io_<op>_bytes_<object>_<context>[_per_xact], and request sizes
# io_<op>_bytes_per_<op>_<object>
_IO_OPS = "read|write|extend"
_IO_OBJECTS = "temp_relation|relation|wal"
_IO_KEY = re.compile(
    rf"^io_({_IO_OPS})_bytes_({_IO_OBJECTS})_(normal|vacuum|bulkread|bulkwrite|init)(_per_xact)?$"
)
_IO_REQUEST_KEY = re.compile(rf"^io_({_IO_OPS})_bytes_per_({_IO_OPS})_({_IO_OBJECTS})$")
_IO_WORDS = {"read": "read", "write": "written", "extend": "extended"}


def throughput_info(driver_names: Iterable[str]) -> MetricInfo:
    """The `tps` column's meaning for an experiment's drivers: each driver stores its own
    throughput there (pgbench and sysbench transactions/s, tpcc tpmC in NEW_ORDER/min)."""
    from blocklab.workloads import drivers

    names = sorted(set(driver_names)) or [drivers.DEFAULT]
    if len(names) > 1:
        return MetricInfo("tps", "throughput (each driver's own)", "", True)
    d = drivers.get(names[0])
    if d.name == drivers.DEFAULT:
        return _KNOWN["tps"]
    return MetricInfo("tps", f"throughput {d.throughput_metric}", d.throughput_unit, True)


def drivers_of(variant_jsons: Iterable[str | None]) -> list[str]:
    """The workload drivers of stored variants (their JSON leaves pgbench's out)."""
    from blocklab.model import DEFAULT_DRIVER

    out = set()
    for text in variant_jsons:
        workload = json.loads(text or "{}").get("workload", {})
        out.add(workload.get("driver", DEFAULT_DRIVER))
    return sorted(out)


ALLOWED_SHOWN = 8  # stored metrics an unknown --metric's message names


def resolve_metric(name: str, stored: Sequence[str], flag: str = "--metric") -> str:
    """The key of the stored metric `name` names: its key, or the label the summary prints
    for it ("WAL bytes per transaction", case and spacing aside, with or without its
    "(unit)"). Else a UserError with the closest keys and labels ("did you mean")."""
    keys = list(dict.fromkeys([*RUN_COLUMN_METRICS, *stored]))
    if name in keys:
        return name
    by_words: dict[str, str] = {}
    for key in keys:
        info = metric_info(key)
        for words in (info.label, f"{info.label} ({info.unit})"):
            by_words.setdefault(_words(words), key)
    by_words.setdefault("throughput", "tps")
    found = by_words.get(_words(name))
    if found is not None:
        return found
    close = difflib.get_close_matches(_words(name), [*by_words, *keys], n=3, cutoff=0.6)
    guesses = list(dict.fromkeys(by_words.get(c, c) for c in close))
    hint = " Did you mean " + " or ".join(_named(k) for k in guesses) + "?" if guesses else ""
    shown = [m.key for m in KNOWN_METRICS if m.key in keys][:ALLOWED_SHOWN]
    more = len(keys) - len(shown)
    rest = f" and {more} more (blocklab export --csv lists them all in rounds.csv)"
    raise UserError(
        f"{flag}: '{name}' names no stored metric.{hint} Allowed: a stored metric's key or "
        f"label, such as {', '.join(_named(k) for k in shown)}" + (rest if more else "")
    )


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def _named(key: str) -> str:
    """'WAL bytes per transaction' (wal_bytes_per_xact)."""
    label = metric_info(key).label
    return f"'{label}' ({key})" if _words(label) != _words(key.replace("_", " ")) else key


def metric_info(key: str) -> MetricInfo:
    if key in _KNOWN:
        return _KNOWN[key]
    found = _device_metric(key) or _io_metric(key)
    if found is not None:
        return found
    query = _QUERY_KEY.match(key)
    if query is not None:
        return MetricInfo(key, f"{query.group(1)} time (server, mean per call)", "ms", False)
    return MetricInfo(key, key.replace("_", " "), _unit_from_name(key), None)


def _device_metric(key: str) -> MetricInfo | None:
    """Block-device bytes, labelled for what the counters cover: a device of blocklab's
    own ("data device") or the host's device under a plain directory, shared with
    everything else on the host ("host device (shared)")."""
    m = _DEVICE_KEY.match(key)
    if m is None:
        return None
    scope, roles, op, per_xact = m.groups()
    roles_text = " + ".join("WAL" if r == "wal" else r for r in (roles or "").split("_") if r)
    if scope == "host_device":
        who = "host device (shared" + (f", {roles_text})" if roles_text else ")")
    else:
        who = f"{roles_text} device"
    what = "bytes written" if op == "write" else "bytes read"
    if per_xact == "_per_request":
        return MetricInfo(key, f"{who} bytes per {op} request", "bytes", None)
    if per_xact:
        return MetricInfo(key, f"{who} {what} per transaction", "bytes", False)
    return MetricInfo(key, f"{who} {what}", "bytes", None)


def _io_metric(key: str) -> MetricInfo | None:
    """pg_stat_io's bytes per object and context (summed over backend types), and the
    average request size per object (PostgreSQL 18+)."""
    m = _IO_KEY.match(key)
    if m is not None:
        op, obj, context, per_xact = m.groups()
        what = f"{_io_object(obj)} bytes {_IO_WORDS[op]}, {context}"
        if per_xact:
            return MetricInfo(key, f"{what}, per transaction (pg_stat_io)", "bytes", False)
        return MetricInfo(key, f"{what} (pg_stat_io)", "bytes", None)
    r = _IO_REQUEST_KEY.match(key)
    if r is not None and r.group(1) == r.group(2):
        label = f"{_io_object(r.group(3))} bytes per {r.group(1)} request (pg_stat_io)"
        return MetricInfo(key, label, "bytes", None)
    return None


def _io_object(obj: str) -> str:
    return "WAL" if obj == "wal" else obj.replace("_", " ")


def _unit_from_name(key: str) -> str:
    for suffix, unit in (("_bytes", "bytes"), ("_ms", "ms"), ("_s", "s"), ("_pct", "%")):
        if key.endswith(suffix) or f"{suffix}_per_" in key:
            return unit
    return ""


def summarize(values: Sequence[float], info: MetricInfo) -> stats.Summary:
    """A variant's statistics; a fraction's interval stays within 0 .. 1."""
    return stats.summarize(values, at_most=1.0 if info.unit == "fraction" else None)


def compare(
    ref_values: dict[int, float],
    values: dict[int, float],
    info: MetricInfo,
    equivalence_pct: float = stats.EQUIVALENCE_PCT,
    nuisance: Mapping[int, float] | None = None,
) -> stats.Comparison:
    """The paired comparison in the metric's own direction (with a per-round -1/+1
    `nuisance` fitted beside the effect: stats.paired_fit); a share (a fraction or a
    percentage) as its difference in percentage points, a t interval on the per-round
    differences (a change of a hit ratio from 98 % to 99 % is +1 pp, not +1.0 %), and
    "equal within ±X" for a share is ±X percentage points, not X % of its mean."""
    share = info.unit in SHARE_UNITS
    return stats.compare_paired(
        ref_values,
        values,
        higher_is_better=info.higher_is_better is not False,
        equivalence_pct=equivalence_pct,
        difference=share,
        margin=(equivalence_pct / 100 if info.unit == "fraction" else equivalence_pct)
        if share
        else None,
        nuisance=nuisance,
    )


def verdict_text(c: stats.Comparison, info: MetricInfo) -> str:
    """Words for a comparison: faster/slower for speed, better/worse or higher/lower else;
    "equal within ±X %" and "undecided" alike for every metric. A significant change
    inside ±X keeps its direction and says so: "faster, within ±2 %"."""
    if c.verdict == stats.EQUAL:
        return f"equal within ±{c.equivalence_pct:g} {c.equivalence_unit}"
    if c.verdict not in (stats.FASTER, stats.SLOWER):
        return c.verdict
    within = f", within ±{c.equivalence_pct:g} {c.equivalence_unit}" if c.equivalent else ""
    return direction_word(c, info) + within


def direction_word(c: stats.Comparison, info: MetricInfo) -> str:
    """faster/slower (speed), better/worse (a direction), higher/lower (none)."""
    if info.key in SPEED_METRICS:
        return c.verdict
    if info.higher_is_better is None:
        return "higher" if c.up else "lower"
    return "better" if (c.up == info.higher_is_better) else "worse"

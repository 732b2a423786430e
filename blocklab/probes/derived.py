"""Per-second series and per-run metrics from snapshots (pure: no I/O).

Every volume is bytes (never pages). Where a counter is missing on this server, the
metric is None and the counter is in `missing`; never zero.

FPI share: up to PostgreSQL 18 pg_stat_wal counts full-page images (wal_fpi) but not
their bytes (19 adds wal_fpi_bytes: then `wal_fpi_bytes_per_xact` and the exact
`fpi_bytes_share_of_wal`, None before 19; reading the run's WAL with pg_waldump --stats
instead would cost more than the run's own I/O is worth). The
metric `fpi_bytes_share_of_wal_max` = wal_fpi x block_size_bytes / wal_bytes (capped at
1) is an upper bound of the share of WAL bytes that are page images: an image is at
most one block (the hole in the middle of a page and wal_compression make it smaller).
`wal_fpi_per_record` is the count ratio (a record can carry several images).

Device request sizes: `<scope>_read_bytes_per_request` and `_write_bytes_per_request`
are bytes / completed requests of /sys/block/<dev>/stat over the run (requests the
block layer merged count once): what io_combine_limit and io_method change. The series
`<scope>_read_ios_per_s` and `<scope>_write_ios_per_s` are the request rates (IOPS).

pg_stat_io per object and context: blocklab.probes.stat_io.run_metrics.

Devices are named for what their counters cover (see `device_scopes`): a file system of
blocklab's own (a loop device, or a whole device given to blocklab) is `device_<role>`;
the block device under a plain directory (kind 'dir') is `host_device`, its counters
shared with everything else on the host that uses that device.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from blocklab.probes import stat_io, views
from blocklab.probes.sampler import CLK_TCK, DeviceCounters, Snapshot

if TYPE_CHECKING:
    from blocklab.probes import DeviceLike

# counter -> series name (per-second rate). Counters ending in _bytes give bytes_per_s.
RATE_SERIES = {
    "wal_bytes": "wal_bytes_per_s",
    "wal_records": "wal_records_per_s",
    "wal_fpi": "wal_fpi_per_s",
    "wal_write": "wal_write_per_s",
    "wal_sync": "wal_sync_per_s",
    "wal_write_bytes": "wal_write_bytes_per_s",
    "checkpointer_write_bytes": "checkpointer_write_bytes_per_s",
    "bgwriter_write_bytes": "bgwriter_write_bytes_per_s",
    "backend_write_bytes": "backend_write_bytes_per_s",
    "relation_read_bytes": "relation_read_bytes_per_s",
    "relation_extend_bytes": "relation_extend_bytes_per_s",
    "xact_commit": "xact_commit_per_s",
    "blks_read": "blks_read_per_s",
    "blks_hit": "blks_hit_per_s",
    "n_tup_upd": "n_tup_upd_per_s",
    "n_tup_hot_upd": "n_tup_hot_upd_per_s",
    "n_tup_newpage_upd": "n_tup_newpage_upd_per_s",
}

# Counters that client backends add to: a backend flushes them at most once a second
# while it runs and once more as it exits (see `build_series`). The checkpointer's and
# the background writer's counters are flushed by those processes, not at the
# workload's exit.
EXIT_FLUSHED = tuple(
    c for c in RATE_SERIES if c not in ("checkpointer_write_bytes", "bgwriter_write_bytes")
)
FINAL_FLUSH_SUFFIX = "_final_flush"

DeviceScopes = Mapping[str, str]  # device name -> its counters' prefix, see device_scopes()
HOST_DEVICE = "host_device"


def device_scopes(devices: Iterable[DeviceLike]) -> dict[str, str]:
    """Device name -> the prefix its counters are stored under.

    A device of blocklab's own (not shared) is named for the roles on it: `device_data`,
    `device_wal` (or `device_data_wal`). A shared device (the one under a kind 'dir'
    directory) counts everything on the host that uses it, the other role's volume and
    loop images included, so it is `host_device` whatever roles sit on it, or
    `host_device_<roles>` when several shared devices must be told apart. Two roles on
    one device are one device: their bytes are counted once, under one name.
    """
    roles: dict[str, list[str]] = {}
    shared: dict[str, bool] = {}
    for d in devices:
        roles.setdefault(d.name, [])
        if d.role not in roles[d.name]:
            roles[d.name].append(d.role)
        shared[d.name] = shared.get(d.name, False) or d.shared
    n_shared = sum(shared.values())
    out = {}
    for name, rs in roles.items():
        joined = "_".join(sorted(rs))  # "data" < "wal"
        if not shared[name]:
            out[name] = f"device_{joined}"
        else:
            out[name] = HOST_DEVICE if n_shared == 1 else f"{HOST_DEVICE}_{joined}"
    return out


def delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


# -- series -------------------------------------------------------------------------------


def build_series(
    snaps: Sequence[Snapshot], scopes: DeviceScopes, checkpoint_counter: str | None
) -> dict[str, list[tuple[float, float | None]]]:
    """Rates between consecutive snapshots, stamped at the later one (t_s from snaps[0]).

    `snaps` is the snapshot at begin(), the 1 Hz samples, then the end-of-run snapshot,
    taken after the workload's client backends have exited.

    The final flush. A client backend adds its counts to the pg_stat views at most once
    a second while it runs, and once more as it exits with whatever it had not flushed
    yet: up to a second of its work, each backend on its own phase. So the interval
    from the last 1 Hz sample to the end-of-run snapshot holds the run's tail plus that
    backlog, on average half a second of every backend's work arriving at once; drawn
    as a rate it is a spike at the end of every run (about 1.5-2x), an artefact of how
    statistics are flushed, not of the workload. The work in it was done during the
    last second or so, but when exactly is not known: spreading it over a guessed
    interval would invent a shape, and spreading it over the run would change every
    honest point. So for the counters client backends flush (EXIT_FLUSHED) the series
    ends at the last 1 Hz sample, and the final interval is kept apart as an amount,
    not a rate: `<counter>_final_flush` (e.g. `blks_hit_final_flush`,
    `wal_bytes_final_flush`), one point stamped at the end-of-run snapshot. The suffix is
    the flag: it is stored, exported and charted as such (the run page leaves it out of
    the lines and states it). Totals stay exact: rate x dt over the series plus the
    final flush is the counter's difference over the whole window.

    Counters read at the instant (devices, CPU, memory) and those of the checkpointer
    and background writer have no such backlog: a final interval of a few milliseconds
    is folded into the second before it (`without_short_tail`), the rest is a rate.
    """
    if len(snaps) < 2:
        return {}
    snaps = while_clients(snaps)
    series = _counter_series(snaps[:-1], snaps[0].epoch, EXIT_FLUSHED)
    series |= _final_flush(snaps[-2], snaps[-1], snaps[0].epoch)
    folded = without_short_tail(snaps)
    others = [c for c in RATE_SERIES if c not in EXIT_FLUSHED]
    series |= _counter_series(folded, snaps[0].epoch, others)
    return series | _host_series(folded, scopes, checkpoint_counter)


def while_clients(snaps: Sequence[Snapshot]) -> list[Snapshot]:
    """The snapshots without the 1 Hz samples taken while the workload's client backends
    were leaving (each sample counts them: views.CLIENTS): a backend flushes its backlog
    of statistics (up to a second of its work) as it exits, so a tick that fell after
    some or all of them had gone would draw their exit flush as its last second. The
    series ends at the last sample before the count's final fall: after the last sample
    that saw a client, samples that saw fewer than the one before are dropped too (4
    clients, then 1: three had flushed on their way out). The final interval, to the
    end-of-run snapshot, holds what they flushed. A run with none seen, or with a count
    missing (None) where the fall would be judged, keeps those samples."""
    counts = [s.pg.get(views.CLIENTS) for s in snaps[1:-1]]
    seen = [i for i, n in enumerate(counts) if n is None or n > 0]
    if not seen:
        return list(snaps)
    last = seen[-1]
    while last > 0 and _fell(counts[last - 1], counts[last]):
        last -= 1
    if last == len(counts) - 1:
        return list(snaps)
    return [*snaps[: last + 2], snaps[-1]]


def _fell(before: float | None, now: float | None) -> bool:
    return before is not None and now is not None and now < before


def _stamps(prev: Snapshot, cur: Snapshot, t0: float) -> tuple[float, float]:
    """(t, dt): rates use the same rounded stamps as the series, so rate x dt adds up."""
    t, t_prev = round(cur.epoch - t0, 3), round(prev.epoch - t0, 3)
    return t, t - t_prev


def _counter_series(
    snaps: Sequence[Snapshot], t0: float, counters: Iterable[str]
) -> dict[str, list[tuple[float, float | None]]]:
    series: dict[str, list[tuple[float, float | None]]] = {}
    names = [c for c in counters if c in snaps[0].pg]
    for prev, cur in zip(snaps, snaps[1:], strict=False):
        t, dt = _stamps(prev, cur, t0)
        for name, value in _rates(prev, cur, dt, names).items():
            series.setdefault(name, []).append((t, value))
    return series


def _final_flush(
    last_sample: Snapshot, end: Snapshot, t0: float
) -> dict[str, list[tuple[float, float | None]]]:
    """What the exit-flushed counters gained from the last 1 Hz sample to the end."""
    t = round(end.epoch - t0, 3)
    return {
        c + FINAL_FLUSH_SUFFIX: [(t, delta(last_sample.pg.get(c), end.pg.get(c)))]
        for c in EXIT_FLUSHED
        if c in last_sample.pg
    }


def _host_series(
    snaps: Sequence[Snapshot], scopes: DeviceScopes, checkpoint_counter: str | None
) -> dict[str, list[tuple[float, float | None]]]:
    series: dict[str, list[tuple[float, float | None]]] = {}
    for prev, cur in zip(snaps, snaps[1:], strict=False):
        t, dt = _stamps(prev, cur, snaps[0].epoch)
        point = _device_rates(prev, cur, dt, scopes)
        point |= _cpu_pcts(prev.cpu_ticks, cur.cpu_ticks) | _mem(cur.mem)
        if checkpoint_counter is not None:
            point["checkpoints_done"] = _checkpoints_since(snaps[0], cur, checkpoint_counter)
        for name, value in point.items():
            series.setdefault(name, []).append((t, value))
    return series


# A final interval shorter than this share of the usual one (the end-of-run snapshot taken
# just after the last 1 Hz sample) is folded into the interval before it: a rate over a few
# milliseconds is noise, and folding keeps rate x dt summing to the run's totals. Only for
# counters without an exit flush (see build_series).
SHORT_TAIL_SHARE = 0.25


def without_short_tail(snaps: Sequence[Snapshot]) -> list[Snapshot]:
    out = list(snaps)
    if len(out) < 3:
        return out
    gaps = [b.epoch - a.epoch for a, b in zip(out, out[1:], strict=False)]
    if gaps[-1] < SHORT_TAIL_SHARE * statistics.median(gaps[:-1]):
        del out[-2]
    return out


def _rates(
    prev: Snapshot, cur: Snapshot, dt: float, names: Iterable[str]
) -> dict[str, float | None]:
    return {RATE_SERIES[n]: ratio(delta(prev.pg.get(n), cur.pg.get(n)), dt) for n in names}


Counts = tuple[int, int, int, int]  # read_bytes, write_bytes, read_ios, write_ios
Deltas = tuple[float | None, float | None, float | None, float | None]


def _device_totals(snap: Snapshot, scopes: DeviceScopes) -> dict[str, Counts | None]:
    """scope -> its counters summed over its devices; None if one is unreadable."""
    out: dict[str, Counts | None] = {}
    for name, scope in scopes.items():
        c: DeviceCounters | None = snap.devices.get(name)
        have = out.get(scope, (0, 0, 0, 0))
        if c is None or have is None:
            out[scope] = None
            continue
        mine = (c.read_bytes, c.write_bytes, c.read_ios, c.write_ios)
        out[scope] = (have[0] + mine[0], have[1] + mine[1], have[2] + mine[2], have[3] + mine[3])
    return out


def _device_rates(
    prev: Snapshot, cur: Snapshot, dt: float, scopes: DeviceScopes
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for scope, (rd, wr, rio, wio) in _device_deltas(prev, cur, scopes).items():
        out[f"{scope}_read_bytes_per_s"] = ratio(rd, dt)
        out[f"{scope}_write_bytes_per_s"] = ratio(wr, dt)
        out[f"{scope}_read_ios_per_s"] = ratio(rio, dt)
        out[f"{scope}_write_ios_per_s"] = ratio(wio, dt)
    return out


def _device_deltas(a: Snapshot, b: Snapshot, scopes: DeviceScopes) -> dict[str, Deltas]:
    """scope -> (read_bytes, write_bytes, read_ios, write_ios) between two snapshots;
    all None if a device is unreadable."""
    ta, tb = _device_totals(a, scopes), _device_totals(b, scopes)
    out: dict[str, Deltas] = {}
    for scope, pa in ta.items():
        pb = tb.get(scope)
        if pa is None or pb is None:
            out[scope] = (None, None, None, None)
        else:
            out[scope] = (
                float(pb[0] - pa[0]),
                float(pb[1] - pa[1]),
                float(pb[2] - pa[2]),
                float(pb[3] - pa[3]),
            )
    return out


def _cpu_pcts(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> dict[str, float | None]:
    keys = ("user", "system", "iowait")
    if a is None or b is None:
        return {f"cpu_{k}_pct": None for k in keys}
    total = sum(b.values()) - sum(a.values())
    out = {}
    for k in keys:
        d = b.get(k, 0) - a.get(k, 0) + (b.get("nice", 0) - a.get("nice", 0) if k == "user" else 0)
        out[f"cpu_{k}_pct"] = None if total <= 0 else 100.0 * d / total
    return out


def _mem(m: Mapping[str, int] | None) -> dict[str, float | None]:
    if m is None or "MemTotal" not in m or "MemAvailable" not in m:
        return {"mem_used_bytes": None}
    return {"mem_used_bytes": float(m["MemTotal"] - m["MemAvailable"])}


def checkpoint_counter_delta(a: Snapshot, b: Snapshot, counter: str) -> float | None:
    if counter == "checkpoints_done":
        return delta(a.pg.get("checkpoints_done"), b.pg.get("checkpoints_done"))
    timed = delta(a.pg.get("checkpoints_timed"), b.pg.get("checkpoints_timed"))
    req = delta(a.pg.get("checkpoints_requested"), b.pg.get("checkpoints_requested"))
    return None if timed is None or req is None else timed + req


def _checkpoints_since(first: Snapshot, cur: Snapshot, counter: str) -> float | None:
    return checkpoint_counter_delta(first, cur, counter)


# -- per-run metrics ----------------------------------------------------------------------


def derive_metrics(
    before: Snapshot,
    after: Snapshot,
    *,
    transactions: int,
    duration_s: float,
    block_size_bytes: int,
    scopes: DeviceScopes,
) -> dict[str, float | None]:
    d = {k: delta(before.pg.get(k), after.pg.get(k)) for k in after.pg}
    xacts = transactions if transactions > 0 else None
    m: dict[str, float | None] = {}
    m |= _wal_metrics(d, xacts, block_size_bytes)
    m |= _write_metrics(d, xacts)
    m |= _table_metrics(d)
    m |= _device_metrics(before, after, scopes, xacts)
    m |= _cpu_metrics(before, after, xacts)
    m |= stat_io.run_metrics(before.io, after.io, transactions)
    m["cache_hit_ratio"] = ratio(d.get("blks_hit"), _sum(d.get("blks_hit"), d.get("blks_read")))
    m["xact_commit"] = d.get("xact_commit")
    m["xact_rollback"] = d.get("xact_rollback")
    m["temp_bytes"] = d.get("temp_bytes")
    m["probe_window_s"] = after.epoch - before.epoch
    m["workload_duration_s"] = duration_s
    return m


def _sum(*vals: float | None) -> float | None:
    return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)


def _per(value: float | None, xacts: int | None) -> float | None:
    return ratio(value, xacts)


def _wal_metrics(
    d: Mapping[str, float | None], xacts: int | None, block_size_bytes: int
) -> dict[str, float | None]:
    wal, fpi = d.get("wal_bytes"), d.get("wal_fpi")
    share = ratio(None if fpi is None else fpi * block_size_bytes, wal)
    fpi_bytes = d.get("wal_fpi_bytes")  # 19+: the images' bytes as written in the records
    return {
        "wal_fpi_bytes": fpi_bytes,
        "wal_fpi_bytes_per_xact": _per(fpi_bytes, xacts),
        "fpi_bytes_share_of_wal": ratio(fpi_bytes, wal),
        "wal_bytes": wal,
        "wal_records": d.get("wal_records"),
        "wal_fpi": fpi,
        "wal_bytes_per_xact": _per(wal, xacts),
        "wal_fpi_per_xact": _per(fpi, xacts),
        "wal_fpi_per_record": ratio(fpi, d.get("wal_records")),
        "fpi_bytes_share_of_wal_max": None if share is None else min(1.0, share),
        "wal_buffers_full": d.get("wal_buffers_full"),
        "wal_write": d.get("wal_write"),
        "wal_sync": d.get("wal_sync"),
        "wal_write_bytes": d.get("wal_write_bytes"),
    }


def _write_metrics(d: Mapping[str, float | None], xacts: int | None) -> dict[str, float | None]:
    m: dict[str, float | None] = {}
    for who in ("checkpointer", "bgwriter", "backend"):
        v = d.get(f"{who}_write_bytes")
        m[f"{who}_write_bytes"] = v
        m[f"{who}_write_bytes_per_xact"] = _per(v, xacts)
    for k in ("relation_read_bytes", "relation_extend_bytes"):
        m[k] = d.get(k)
    parts = [d.get(f"{who}_write_bytes") for who in ("checkpointer", "bgwriter", "backend")]
    data = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    m["relation_write_bytes"] = data  # relation pages written, by whoever wrote them
    m["relation_write_bytes_per_xact"] = _per(data, xacts)
    return m


def _table_metrics(d: Mapping[str, float | None]) -> dict[str, float | None]:
    upd = d.get("n_tup_upd")
    return {
        "n_tup_upd": upd,
        "n_tup_hot_upd": d.get("n_tup_hot_upd"),
        "n_tup_newpage_upd": d.get("n_tup_newpage_upd"),
        "hot_update_ratio": ratio(d.get("n_tup_hot_upd"), upd),
        "newpage_update_ratio": ratio(d.get("n_tup_newpage_upd"), upd),
    }


def _device_metrics(
    before: Snapshot, after: Snapshot, scopes: DeviceScopes, xacts: int | None
) -> dict[str, float | None]:
    m: dict[str, float | None] = {}
    for scope, (rd, wr, rio, wio) in _device_deltas(before, after, scopes).items():
        m[f"{scope}_read_bytes"] = rd
        m[f"{scope}_write_bytes"] = wr
        m[f"{scope}_read_bytes_per_xact"] = _per(rd, xacts)
        m[f"{scope}_write_bytes_per_xact"] = _per(wr, xacts)
        # the average request size the kernel completed (merged requests count once)
        m[f"{scope}_read_bytes_per_request"] = ratio(rd, rio)
        m[f"{scope}_write_bytes_per_request"] = ratio(wr, wio)
    return m


def _cpu_metrics(before: Snapshot, after: Snapshot, xacts: int | None) -> dict[str, float | None]:
    server = delta(before.server_cpu_s, after.server_cpu_s)
    host = _host_busy_s(before.cpu_ticks, after.cpu_ticks)
    return {
        "server_cpu_s": server,
        "server_cpu_s_per_xact": _per(server, xacts),
        "host_cpu_busy_s": host,
        "host_cpu_busy_s_per_xact": _per(host, xacts),
    }


def _host_busy_s(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> float | None:
    """CPU seconds (all CPUs) not idle and not waiting for I/O."""
    if a is None or b is None:
        return None
    busy = [k for k in b if k not in ("idle", "iowait")]
    return sum(b[k] - a.get(k, 0) for k in busy) / CLK_TCK


def space_metrics(rows: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """Per relation and total table/index bytes and free bytes (rows from pgstattuple)."""
    m: dict[str, float | None] = {}
    totals: dict[str, float | None] = {}
    for r in rows:
        for key in (
            "table_bytes",
            "table_free_bytes",
            "table_dead_tuple_bytes",
            "index_bytes",
            "index_free_bytes",
        ):
            v = r.get(key)
            m[f"{r['relation']}.{key}"] = v
            totals[key] = (
                None if v is None or totals.get(key, 0.0) is None else (totals.get(key) or 0.0) + v
            )
    return m | totals

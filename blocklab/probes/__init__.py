"""Instrumentation: what PostgreSQL, the devices and the host did during one run.

The runner calls only this module's public API:

    inst = Instrumentation(ProbeContext(...))
    inst.begin()                       # right before pgbench starts
    ...                                # the workload runs; a 1 Hz sampler thread watches
    result = inst.end(transactions, duration_s)   # right after pgbench ends, server up

`ProbeResult.series` holds per-second rates (name -> [(t_s, value)], t_s from begin),
`metrics` the derived per-run numbers (always bytes, never pages), `checkpoints` the
checkpoint timeline parsed from the server log, `facts` what was measured how, and
`missing` the views/columns this server version does not have (reported, never zero).

Series (rates between consecutive ~1 s samples, stamped at the later one):
wal_bytes_per_s, wal_records_per_s, wal_fpi_per_s, wal_write_per_s and wal_sync_per_s
(15-17), checkpointer/bgwriter/backend_write_bytes_per_s, relation_read_bytes_per_s and
relation_extend_bytes_per_s (16+), xact_commit_per_s, blks_read/blks_hit_per_s,
n_tup_upd/n_tup_hot_upd/n_tup_newpage_upd_per_s, <scope>_read_bytes_per_s and
<scope>_write_bytes_per_s, <scope>_read_ios_per_s and <scope>_write_ios_per_s (scope =
device_data | device_wal for blocklab's own file systems, host_device for the shared
device under a kind 'dir' directory: see derived.device_scopes),
cpu_user/system/iowait_pct (host), mem_used_bytes (host, MemTotal - MemAvailable),
checkpoints_done (count since begin). The counters client backends flush end at the last
1 Hz sample; what arrived after it (their exit flush) is `<counter>_final_flush`, one
amount, not a rate (derived.build_series says why).
Metrics: see blocklab.probes.derived (wal_bytes_per_xact, fpi_bytes_share_of_wal_max,
<scope>_write_bytes_per_xact, <who>_write_bytes, hot/newpage_update_ratio,
cache_hit_ratio, server_cpu_s_per_xact, <relation>.table_free_bytes, checkpoints_*,
<scope>_read_bytes_per_request, wal_fpi_bytes_per_xact (19+)) and
blocklab.probes.stat_io (pg_stat_io, 16+: io_<op>_bytes_<object>_<context>[_per_xact],
io_<op>_bytes_per_<op>_<object> (18+)) and blocklab.probes.disturbance (other processes'
CPU over the window: disturbance_cpu_s, disturbance_cpu_share; their bytes on the disk
under the loop devices: disturbance_device_bytes, disturbance_device_share).

`ctx.conninfo` must name the database the workload runs in: pg_stat_database and
pg_stat_user_tables are per database. begin() waits (up to 2 s) for other client
sessions to end, because a session flushes its statistics as it exits: the runner's
own VACUUM/CHECKPOINT must not leak into the window, nor pgbench's last second out of it.

Layer: beside workloads; may import postgres, storage and the shared nouns; never workloads,
execution or anything above.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

DEFAULT_RELATIONS = (
    "pgbench_accounts",
    "pgbench_branches",
    "pgbench_tellers",
    "pgbench_history",
)

Series = dict[str, list[tuple[float, float | None]]]


class DeviceLike(Protocol):
    """What the probes need of a storage device (blocklab.storage's DeviceRef fits)."""

    @property
    def name(self) -> str: ...  # e.g. "loop3" or "sda1" (a name under /sys/class/block)

    @property
    def role(self) -> str: ...  # "data" or "wal"

    @property
    def shared(self) -> bool: ...  # True when other things also write to it (a plain dir)


@dataclass(frozen=True)
class Device:
    """A plain DeviceLike, for callers that have no storage object (tests, selftest)."""

    name: str
    role: str = "data"
    shared: bool = True


@dataclass
class ProbeContext:
    conninfo: str  # psycopg conninfo of the workload's database
    data_dir: Path
    server_log: Path  # the server's log (log_line_prefix '%n [%p] ', log_checkpoints=on)
    devices: list[DeviceLike]
    block_size_bytes: int  # the build's BLCKSZ
    wal_block_size_bytes: int  # the build's XLOG_BLCKSZ
    server_pid: int  # the postmaster
    server_version_num: int  # SHOW server_version_num, e.g. 180001
    interval_s: float = 1.0
    wal_dir: Path | None = None  # informational; WAL devices come in `devices`
    relations: tuple[str, ...] = DEFAULT_RELATIONS
    measure_space: bool = True  # pgstattuple on `relations` and their indexes after the run


@dataclass
class ProbeResult:
    series: Series
    metrics: dict[str, float | None]
    checkpoints: list[dict[str, Any]]
    facts: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


if TYPE_CHECKING:
    from blocklab.probes.instrumentation import Bystander, Instrumentation
    from blocklab.probes.provenance import collect_provenance

# imported when first used: a light module of this package (footprint, derived) does not
# load the samplers and psycopg (every `blocklab report` paid them on start)
_LAZY = {
    "Bystander": "instrumentation",
    "Instrumentation": "instrumentation",
    "collect_provenance": "provenance",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "DEFAULT_RELATIONS",
    "Device",
    "DeviceLike",
    "Bystander",
    "Instrumentation",
    "ProbeContext",
    "ProbeResult",
    "Series",
    "collect_provenance",
]

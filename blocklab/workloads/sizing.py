"""How many bytes a variant's storage must hold (pure: no I/O).

The estimate is made at plan time, before anything is built, so that a storage too
small for its dataset is refused with the key to change (exit 2), not after the builds.

  data volume = cluster + 2 x pgbench tables and indexes (+ pg_wal, unless on its own volume)
  WAL volume  = max_wal_size x 1.5 + wal_keep_size + 3 WAL segments

Where the constants come from:

- pgbench's tables (pgbench.c, `pgbench -i`): 100,000 pgbench_accounts rows, 10 tellers
  and 1 branch per scale unit; pgbench_history starts empty. `-F` sets the three tables'
  fillfactor, the primary keys keep the B-tree default of 90.
- An accounts row is 121 bytes on the page (23-byte tuple header aligned to 24, three
  int4, char(84) stored as 85 bytes with its 1-byte varlena header), padded to 8-byte
  alignment (128) plus a 4-byte line pointer: 132 bytes. A teller or branch row has a
  NULL filler: 24-byte header (with the null bitmap) + two int4 = 32, + 4 = 36 bytes.
- A page has a 24-byte header; a B-tree page also a 16-byte special area; an int4 index
  entry is 8 + 4 bytes aligned to 16, + 4 for its line pointer: 20 bytes.
- The free space map and visibility map forks: at most 3 FSM pages plus one per B/4 heap
  pages (a FSM leaf covers about B/2) and one VM page per 4 x B heap pages, plus one.
- CLUSTER_BYTES: what initdb and the three databases take before pgbench, measured at
  about 23 MB of base/ + 0.5 MB of global/ with 8 kB pages (PG 15 and 18); 48 MiB leaves
  room for smaller pages, whose catalogs fill more pages.
- RUN_GROWTH_FACTOR: during a run pgbench updates rows (fillfactor 100 leaves no room for
  a same-page update, so each updated row takes new space until vacuum reclaims the old
  one) and inserts history rows; every run restarts from the snapshot, so growth never
  outlives a run. Twice the tables covers runs of minutes, not of hours.
- WAL: PostgreSQL spaces checkpoints so that pg_wal stays near max_wal_size (default 1GB
  since 9.5, unchanged through 18), but it is a soft limit: a checkpoint that falls
  behind (slow storage) lets WAL grow past it, so allow half as much again
  (WAL_OVERSHOOT), plus wal_keep_size and 3 segments (the one being written, the next
  preallocated one and the one being recycled).

A loop image gets file-system headroom on top (blocklab.storage.kinds.image_size_bytes).
tests/workloads/test_sizing.py checks the dataset estimate against real `pgbench -i` data
directories at scale 1 and 10.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from blocklab.errors import UserError
from blocklab.model import DatasetRequest, StorageRequest, Variant
from blocklab.postgres.settings_policy import value_bytes
from blocklab.storage.needs import Need, StorageNeeds
from blocklab.workloads import drivers

MIB = 1024 * 1024
GIB = 1024 * MIB

CLUSTER_BYTES = 48 * MIB
RUN_GROWTH_FACTOR = 2
DEFAULT_MAX_WAL_SIZE_BYTES = 1 * GIB  # PostgreSQL 9.5 to 18
WAL_OVERSHOOT = 0.5
WAL_SPARE_SEGMENTS = 3


def wal_need(max_wal_size_bytes: int, wal_segment_bytes: int, wal_keep_size_bytes: int = 0) -> Need:
    """Room for pg_wal: max_wal_size with overshoot, wal_keep_size and spare segments."""
    total = (
        int(max_wal_size_bytes * (1 + WAL_OVERSHOOT))
        + wal_keep_size_bytes
        + WAL_SPARE_SEGMENTS * wal_segment_bytes
    )
    keep = f" + wal_keep_size {mb(wal_keep_size_bytes)}" if wal_keep_size_bytes else ""
    how = (
        f"pg_wal {mb(total)} (max_wal_size {mb(max_wal_size_bytes)} x {1 + WAL_OVERSHOOT:g}"
        f"{keep} + {WAL_SPARE_SEGMENTS} segments of {mb(wal_segment_bytes)})"
    )
    return Need(total, how)


def data_need(
    scale: int,
    fillfactor: int,
    block_size_bytes: int,
    wal: Need | None,
    dataset: DatasetRequest | None = None,
) -> Need:
    """Room for the data directory; `wal` is pg_wal's need when it stays inside. The
    tables' size is the dataset's driver's estimate (pgbench scale `scale` when None)."""
    dataset = dataset or DatasetRequest(scale=scale, fillfactor=fillfactor)
    tables, what = drivers.for_dataset(dataset).dataset_bytes(dataset, block_size_bytes)
    total = CLUSTER_BYTES + RUN_GROWTH_FACTOR * tables
    how = (
        f"{what} at fillfactor {dataset.fillfactor} on {block_size_bytes // 1024} kB "
        f"pages: tables and indexes {mb(tables)} x {RUN_GROWTH_FACTOR} for growth during a "
        f"run + {mb(CLUSTER_BYTES)} for the cluster"
    )
    if wal is not None:
        total += wal.bytes
        how += f" + {wal.how}"
    return Need(total, how)


def variant_needs(variant: Variant) -> StorageNeeds:
    """What the variant's data (and WAL) volumes must hold."""
    settings = dict(variant.settings)
    wal = wal_need(
        _size_setting(settings, "max_wal_size", DEFAULT_MAX_WAL_SIZE_BYTES),
        variant.wal_segsize_mb * MIB,
        _size_setting(settings, "wal_keep_size", 0),
    )
    separate = variant.storage.wal is not None
    data = data_need(
        variant.dataset.scale,
        variant.dataset.fillfactor,
        variant.build.block_size_kb * 1024,
        None if separate else wal,
        variant.dataset,
    )
    return StorageNeeds(data, wal if separate else None)


def needs_by_storage(variants: Iterable[Variant]) -> dict[StorageRequest, StorageNeeds]:
    """The largest need of the variants sharing each storage (one storage holds one
    variant's data at a time: every run restores its snapshot into it)."""
    out: dict[StorageRequest, StorageNeeds] = {}
    for v in variants:
        need = variant_needs(v)
        old = out.get(v.storage)
        if old is not None:
            need = StorageNeeds(_larger(old.data, need.data), _larger_wal(old.wal, need.wal))
        out[v.storage] = need
    return out


def _larger(a: Need, b: Need) -> Need:
    return a if a.bytes >= b.bytes else b


def _larger_wal(a: Need | None, b: Need | None) -> Need | None:
    if a is None or b is None:
        return a or b
    return _larger(a, b)


def _size_setting(settings: dict[str, str], name: str, default: int) -> int:
    """A MB-counted size GUC ("1GB", "512MB", "1024") in bytes."""
    if name not in settings:
        return default
    nbytes = value_bytes(settings[name], MIB)
    if nbytes is None or nbytes < 0:
        raise UserError(
            f"matrix.settings.{name}: {settings[name]!r} is not a size "
            '(a number of MB, or with a unit: "512MB", "2GB")'
        )
    return nbytes


def mb(nbytes: int) -> str:
    """Bytes as MB (1024-based, as PostgreSQL counts), e.g. '1536 MB'."""
    return f"{math.ceil(nbytes / MIB)} MB"

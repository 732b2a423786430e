"""Which cumulative counters this server has, and the one query that reads them all.

Columns are detected from the catalog (pg_attribute of the pg_catalog views), not from
version numbers, so a master tree works as long as the columns keep their names. What
the server lacks is listed as missing; it is never reported as zero. Facts per version
(checked against the PostgreSQL docs and source):

- pg_stat_wal: wal_records, wal_fpi, wal_bytes, wal_buffers_full (14+); wal_fpi_bytes
  (the full-page images' bytes) 19+ only, not in 18; wal_write and wal_sync in 14-17
  only (18 moved WAL I/O to pg_stat_io, object 'wal': there the counters wal_write,
  wal_sync and wal_write_bytes come from writes, fsyncs, write_bytes of those rows, and
  `basis` says so).
- pg_stat_io (16+): reads/writes/extends counted in blocks of `op_bytes` in 16-17;
  18 dropped op_bytes and added read_bytes, write_bytes, extend_bytes.
- pg_stat_checkpointer (17+): num_timed, num_requested, buffers_written; num_done (18+,
  completed checkpoints, skipped ones excluded). <= 16: pg_stat_bgwriter has
  checkpoints_timed/checkpoints_req (they count checkpoints as they start, skipped
  timed ones included), buffers_checkpoint, buffers_clean and buffers_backend.
- pg_stat_user_tables.n_tup_newpage_upd: 16+.

Every counter is cumulative; `wal_bytes`-like names are bytes, the others are counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

VIEWS = (
    "pg_stat_wal",
    "pg_stat_io",
    "pg_stat_checkpointer",
    "pg_stat_bgwriter",
    "pg_stat_database",
    "pg_stat_user_tables",
)

COLUMNS_SQL = """
SELECT c.relname, a.attname
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pg_catalog' AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
"""

Columns = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Source:
    """One FROM item of the sampling query and the counters it yields (name -> SQL)."""

    alias: str
    from_sql: str
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class CounterPlan:
    sources: tuple[Source, ...]
    missing: tuple[str, ...]
    basis: Mapping[str, str] = field(default_factory=dict)  # counter -> where it comes from

    @property
    def names(self) -> list[str]:
        return [name for s in self.sources for name, _ in s.items]

    def sql(self) -> str:
        """One SELECT that reads every counter (parameter %(relations)s: table names)."""
        if not self.sources:
            return "SELECT 1 AS nothing"
        select = ", ".join(f"{s.alias}.{name}" for s in self.sources for name, _ in s.items)
        froms = " CROSS JOIN ".join(
            "(SELECT "
            + ", ".join(f"({expr})::float8 AS {name}" for name, expr in s.items)
            + f" FROM {s.from_sql}) {s.alias}"
            for s in self.sources
        )
        return f"SELECT {select} FROM {froms}"


def has(columns: Columns, view: str, *cols: str) -> bool:
    return all(c in columns.get(view, frozenset()) for c in cols)


def columns_from_rows(rows: Sequence[tuple[str, str]]) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for view, col in rows:
        out.setdefault(view, set()).add(col)
    return {k: frozenset(v) for k, v in out.items()}


def plan_counters(columns: Columns, *, block_size_bytes: int) -> CounterPlan:
    """Pure: decide, from the columns that exist, which counters to read and how."""
    missing: list[str] = []
    basis: dict[str, str] = {}
    sources = [
        _wal_source(columns, missing, basis),
        _io_source(columns, missing, basis),
        _checkpoint_source(columns, missing, basis),
        _bgwriter_writes_source(columns, block_size_bytes, missing, basis),
        _database_source(columns, missing, basis),
        _tables_source(columns, missing, basis),
        _clients_source(basis),
    ]
    kept = tuple(s for s in sources if s is not None and s.items)
    return CounterPlan(kept, tuple(missing), basis)


def _pick(
    columns: Columns,
    view: str,
    wanted: Sequence[tuple[str, str]],
    missing: list[str],
    basis: dict[str, str],
) -> list[tuple[str, str]]:
    """(counter name, column) pairs that exist; absent ones are recorded as missing."""
    items = []
    for name, col in wanted:
        if has(columns, view, col):
            items.append((name, col))
            basis[name] = f"{view}.{col}"
        else:
            missing.append(f"{view}.{col}")
    return items


def _wal_source(columns: Columns, missing: list[str], basis: dict[str, str]) -> Source | None:
    if "pg_stat_wal" not in columns:
        missing.append("pg_stat_wal")
        return None
    wanted = [("wal_records", "wal_records"), ("wal_fpi", "wal_fpi"), ("wal_bytes", "wal_bytes")]
    wanted += [("wal_buffers_full", "wal_buffers_full")]
    items = _pick(columns, "pg_stat_wal", wanted, missing, basis)
    # wal_fpi_bytes: 19+ (not in 18); wal_write, wal_sync: 14-17 (18 counts WAL I/O in
    # pg_stat_io). Where they do not exist they are not asked for, nor listed as missing.
    for name in ("wal_fpi_bytes", "wal_write", "wal_sync"):
        if has(columns, "pg_stat_wal", name):
            items.append((name, name))
            basis[name] = f"pg_stat_wal.{name}"
    return Source("w", "pg_catalog.pg_stat_wal", tuple(items))


def _io_bytes(columns: Columns, op: str) -> str | None:
    """SQL for bytes of one I/O operation (read, write, extend) in pg_stat_io."""
    if has(columns, "pg_stat_io", f"{op}_bytes"):
        return f"{op}_bytes"
    if has(columns, "pg_stat_io", f"{op}s", "op_bytes"):
        return f"{op}s * op_bytes"
    return None


BACKGROUND = "('checkpointer', 'background writer')"


def _io_source(columns: Columns, missing: list[str], basis: dict[str, str]) -> Source | None:
    if "pg_stat_io" not in columns:
        missing.append("pg_stat_io")
        return None
    write, read, extend = (_io_bytes(columns, op) for op in ("write", "read", "extend"))
    items: list[tuple[str, str]] = []
    rel = "object = 'relation'"
    if write is not None:
        items += [
            (
                "checkpointer_write_bytes",
                f"sum({write}) FILTER (WHERE backend_type = 'checkpointer' AND {rel})",
            ),
            (
                "bgwriter_write_bytes",
                f"sum({write}) FILTER (WHERE backend_type = 'background writer' AND {rel})",
            ),
            (
                "backend_write_bytes",
                f"sum({write}) FILTER (WHERE backend_type NOT IN {BACKGROUND} AND {rel})",
            ),
        ]
        for name in ("checkpointer_write_bytes", "bgwriter_write_bytes", "backend_write_bytes"):
            basis[name] = f"pg_stat_io ({write})"
    else:
        missing.append("pg_stat_io.write_bytes|op_bytes")
    if read is not None:
        items.append(("relation_read_bytes", f"sum({read}) FILTER (WHERE {rel})"))
        basis["relation_read_bytes"] = f"pg_stat_io ({read})"
    if extend is not None:
        items.append(("relation_extend_bytes", f"sum({extend}) FILTER (WHERE {rel})"))
        basis["relation_extend_bytes"] = f"pg_stat_io ({extend})"
    if not has(columns, "pg_stat_wal", "wal_write") and has(
        columns, "pg_stat_io", "writes", "fsyncs", "write_bytes"
    ):
        # 18+: WAL I/O moved from pg_stat_wal to pg_stat_io rows with object 'wal'
        for name, expr in (
            ("wal_write", "sum(writes) FILTER (WHERE object = 'wal')"),
            ("wal_sync", "sum(fsyncs) FILTER (WHERE object = 'wal')"),
            ("wal_write_bytes", "sum(write_bytes) FILTER (WHERE object = 'wal')"),
        ):
            items.append((name, expr))
            basis[name] = f"pg_stat_io ({expr})"
    # Every counter is wrapped in coalesce: a NULL cell means "never happens", an empty sum 0.
    items = [(n, f"coalesce({e}, 0)") for n, e in items]
    return Source("io", "pg_catalog.pg_stat_io", tuple(items))


def _checkpoint_source(
    columns: Columns, missing: list[str], basis: dict[str, str]
) -> Source | None:
    if "pg_stat_checkpointer" in columns:
        wanted = [
            ("checkpoints_timed", "num_timed"),
            ("checkpoints_requested", "num_requested"),
        ]
        items = _pick(columns, "pg_stat_checkpointer", wanted, missing, basis)
        if has(columns, "pg_stat_checkpointer", "num_done"):
            items.append(("checkpoints_done", "num_done"))
            basis["checkpoints_done"] = "pg_stat_checkpointer.num_done"
        else:
            missing.append("pg_stat_checkpointer.num_done")
        return Source("ck", "pg_catalog.pg_stat_checkpointer", tuple(items))
    if has(columns, "pg_stat_bgwriter", "checkpoints_timed"):
        wanted = [
            ("checkpoints_timed", "checkpoints_timed"),
            ("checkpoints_requested", "checkpoints_req"),
        ]
        items = _pick(columns, "pg_stat_bgwriter", wanted, missing, basis)
        missing.append("pg_stat_checkpointer.num_done")
        return Source("ck", "pg_catalog.pg_stat_bgwriter", tuple(items))
    missing.append("pg_stat_checkpointer")
    return None


def _bgwriter_writes_source(
    columns: Columns, block_size_bytes: int, missing: list[str], basis: dict[str, str]
) -> Source | None:
    """Data bytes written by role from buffer counts, only where pg_stat_io has no bytes."""
    if "checkpointer_write_bytes" in basis:
        return None
    wanted = [
        ("checkpointer_write_bytes", "buffers_checkpoint"),
        ("bgwriter_write_bytes", "buffers_clean"),
        ("backend_write_bytes", "buffers_backend"),
    ]
    items = []
    for name, col in wanted:
        if has(columns, "pg_stat_bgwriter", col):
            items.append((name, f"{col} * {int(block_size_bytes)}"))
            basis[name] = f"pg_stat_bgwriter.{col} x block_size_bytes ({block_size_bytes})"
        else:
            missing.append(f"pg_stat_bgwriter.{col}")
    return Source("bw", "pg_catalog.pg_stat_bgwriter", tuple(items))


def _database_source(columns: Columns, missing: list[str], basis: dict[str, str]) -> Source:
    wanted = [
        ("xact_commit", "xact_commit"),
        ("xact_rollback", "xact_rollback"),
        ("blks_read", "blks_read"),
        ("blks_hit", "blks_hit"),
        ("temp_bytes", "temp_bytes"),
    ]
    items = _pick(columns, "pg_stat_database", wanted, missing, basis)
    return Source(
        "db", "pg_catalog.pg_stat_database WHERE datname = current_database()", tuple(items)
    )


def _tables_source(columns: Columns, missing: list[str], basis: dict[str, str]) -> Source:
    wanted = [
        ("n_tup_ins", "n_tup_ins"),
        ("n_tup_upd", "n_tup_upd"),
        ("n_tup_hot_upd", "n_tup_hot_upd"),
        ("n_tup_newpage_upd", "n_tup_newpage_upd"),
        ("n_tup_del", "n_tup_del"),
    ]
    items = _pick(columns, "pg_stat_user_tables", wanted, missing, basis)
    summed = tuple((name, f"coalesce(sum({col}), 0)") for name, col in items)
    return Source("tb", "pg_catalog.pg_stat_user_tables WHERE relname = ANY(%(relations)s)", summed)


CLIENTS = "client_backends"  # not a counter: how many the sample saw (derived.while_clients)


def _clients_source(basis: dict[str, str]) -> Source:
    """The client backends at the sample's instant, the probes' own session left out."""
    basis[CLIENTS] = "pg_stat_activity: client backends, the probes' own left out"
    return Source(
        "ac",
        "pg_catalog.pg_stat_activity WHERE backend_type = 'client backend'"
        " AND pid <> pg_catalog.pg_backend_pid()",
        ((CLIENTS, "count(*)"),),
    )


def row_to_counters(names: Sequence[str], row: Sequence[Any] | None) -> dict[str, float | None]:
    if row is None:
        return dict.fromkeys(names)
    return {n: (None if v is None else float(v)) for n, v in zip(names, row, strict=True)}

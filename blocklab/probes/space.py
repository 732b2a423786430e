"""Table and index size and free space after a run (pgstattuple when it is available).

pgstattuple must come from the same build as the server: one built for another page
size loads and lies. Builds install it; Debian's postgresql-15 ships it in contrib.
Without it, sizes come from pg_relation_size and free space is reported missing.
It runs after the final snapshot: its reads prune pages on access and so write WAL and
dirty buffers, which belongs to no run (every run restores its dataset anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

AVAILABLE_SQL = "SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'pgstattuple'"

TABLE_SQL = """
SELECT c.oid, s.table_len, s.free_space, s.dead_tuple_len
FROM pg_catalog.pg_class c, LATERAL pgstattuple(c.oid) s
WHERE c.oid = to_regclass(%s)
"""

TABLE_SIZE_SQL = (
    "SELECT c.oid, pg_relation_size(c.oid) FROM pg_catalog.pg_class c WHERE c.oid = to_regclass(%s)"
)

INDEXES_SQL = """
SELECT i.indexrelid, am.amname, pg_relation_size(i.indexrelid)
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE i.indrelid = %s
"""

INDEX_FREE_SQL = "SELECT free_space FROM pgstattuple(%s::oid)"
PGSTATTUPLE_AMS = ("btree", "hash", "gist")


def prepare(conn: psycopg.Connection[Any]) -> bool:
    """Create pgstattuple (before the measured window: its WAL is not the run's) and
    flush this session's statistics so they land before the first snapshot."""
    exact = _ensure_pgstattuple(conn)
    try:
        conn.execute("SELECT pg_catalog.pg_stat_force_next_flush()")  # 15+
    except psycopg.Error:
        pass
    return exact


def measure(
    conn: psycopg.Connection[Any], relations: Sequence[str], *, exact: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per existing relation: table_bytes, table_free_bytes, table_dead_tuple_bytes,
    index_bytes, index_free_bytes (None where not measurable); and what was missing."""
    conn.execute("SET statement_timeout = 0")
    missing = [] if exact else ["pgstattuple"]
    rows = []
    for rel in relations:
        row = _measure_table(conn, rel, exact)
        if row is not None:
            rows.append(row)
    return rows, missing


def _ensure_pgstattuple(conn: psycopg.Connection[Any]) -> bool:
    if conn.execute(AVAILABLE_SQL).fetchone() is None:
        return False
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    except psycopg.Error:
        return False
    return True


def _measure_table(conn: psycopg.Connection[Any], rel: str, exact: bool) -> dict[str, Any] | None:
    if exact:
        r = conn.execute(TABLE_SQL, [rel]).fetchone()
        if r is None:
            return None
        oid, table, free, dead = r
    else:
        r = conn.execute(TABLE_SIZE_SQL, [rel]).fetchone()
        if r is None:
            return None
        (oid, table), free, dead = r, None, None
    index_bytes, index_free = 0, 0 if exact else None
    for idx, am, size in conn.execute(INDEXES_SQL, [oid]).fetchall():
        index_bytes += int(size)
        if index_free is not None and am in PGSTATTUPLE_AMS:
            got = conn.execute(INDEX_FREE_SQL, [idx]).fetchone()
            index_free = None if got is None else index_free + int(got[0])
        else:
            index_free = None
    return {
        "relation": rel,
        "table_bytes": float(table),
        "table_free_bytes": None if free is None else float(free),
        "table_dead_tuple_bytes": None if dead is None else float(dead),
        "index_bytes": float(index_bytes),
        "index_free_bytes": None if index_free is None else float(index_free),
    }

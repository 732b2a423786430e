"""pg_stat_io's bytes per object and context (PostgreSQL 18: read_bytes, write_bytes,
extend_bytes; 16-17 count operations in blocks of op_bytes).

    SQL                       the query (psql --csv prints what parse reads)
    parse(text)               psql --csv output -> rows (pure)
    bytes_by_object_context(rows)
                              {"io_read_bytes.relation.bulkread": ..., ...} summed over
                              backend types (pure); NULL cells (not tracked) are left out,
                              never counted as 0
    delta(before, after)      per-run change of those totals (pure)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

SQL = "SELECT * FROM pg_catalog.pg_stat_io"
OPS = ("read", "write", "extend")


def parse(text: str) -> list[dict[str, str]]:
    """The rows of `psql --csv` output (header first); an empty cell is NULL ("")."""
    return list(csv.DictReader(io.StringIO(text)))


def _op_bytes(row: Mapping[str, str], op: str) -> float | None:
    cell = row.get(f"{op}_bytes")
    if cell is None and row.get("op_bytes"):  # 16-17: operations x op_bytes
        count = row.get(f"{op}s") or ""
        return float(count) * float(row["op_bytes"]) if count else None
    return float(cell) if cell else None


def bytes_by_object_context(rows: Sequence[Mapping[str, str]]) -> dict[str, float]:
    """Bytes read, written and extended per (object, context), summed over backend
    types: keys "io_{op}_bytes.{object}.{context}" (object "temp relation" as
    "temp_relation"). A combination whose cells are all NULL is not a key."""
    out: dict[str, float] = {}
    for row in rows:
        where = f"{row['object'].replace(' ', '_')}.{row['context']}"
        for op in OPS:
            value = _op_bytes(row, op)
            if value is not None:
                key = f"io_{op}_bytes.{where}"
                out[key] = out.get(key, 0.0) + value
    return out


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """after - before for every key in after (a key new since before counts from 0)."""
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())}

"""pg_stat_io's bytes per object and context (PostgreSQL 18: read_bytes, write_bytes,
extend_bytes; 16-17 count operations in blocks of op_bytes).

    SQL                       the query (psql --csv prints what parse reads)
    parse(text)               psql --csv output -> rows (pure)
    bytes_by_object_context(rows)
                              {"io_read_bytes.relation.bulkread": ..., ...} summed over
                              backend types (pure); NULL cells (not tracked) are left out,
                              never counted as 0
    requests_by_object_context(rows)
                              {"io_reads.relation.bulkread": ..., ...}: read, write and
                              extend operations, 18+ only (pure). 18 counts one operation
                              per I/O request (a read combined up to io_combine_limit is
                              one); 16-17 count blocks, so their counts are left out
    rows_of(names, tuples)    rows as a database driver returns them -> parse's rows
    delta(before, after)      per-run change of those totals (pure)
    run_metrics(before, after, transactions)
                              the per-run metrics below (pure)

Per-run metrics (summed over backend types; a combination the server does not track
is absent, never 0):

    io_{op}_bytes_{object}_{context}           bytes read, written, extended in the run,
                                               op read|write|extend, object relation |
                                               temp_relation | wal (18+), context normal
                                               | vacuum | bulkread | bulkwrite | init
    io_{op}_bytes_{object}_{context}_per_xact  the same per transaction
    io_{op}_bytes_per_{op}_{object}            average request size over the object's
                                               contexts: bytes / operations, 18+ only
                                               (16-17 count blocks: it would always be
                                               the block size, so it is left out)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

Metrics = dict[str, float | None]

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


def per_xact_metric(op: str, obj: str, context: str) -> str:
    """The per-run metric of bytes per transaction for one operation, object ("temp
    relation" as "temp_relation") and context: io_{op}_bytes_{object}_{context}_per_xact."""
    return f"io_{op}_bytes_{obj}_{context}_per_xact"


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


def requests_by_object_context(rows: Sequence[Mapping[str, str]]) -> dict[str, float]:
    """Operations per (object, context), summed over backend types: keys
    "io_{op}s.{object}.{context}", only where the row has the op's byte column (18+)
    and its count is not NULL."""
    out: dict[str, float] = {}
    for row in rows:
        where = f"{row['object'].replace(' ', '_')}.{row['context']}"
        for op in OPS:
            count = row.get(f"{op}s")
            if f"{op}_bytes" in row and count:
                key = f"io_{op}s.{where}"
                out[key] = out.get(key, 0.0) + float(count)
    return out


def rows_of(names: Sequence[str], tuples: Sequence[Sequence[object]]) -> list[dict[str, str]]:
    """Driver rows (None for NULL, numbers as numbers) as `parse` returns them: text
    cells, NULL as ""."""
    return [{n: "" if v is None else str(v) for n, v in zip(names, t, strict=True)} for t in tuples]


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """after - before for every key in after (a key new since before counts from 0)."""
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())}


def run_metrics(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None, transactions: int
) -> Metrics:
    """The per-run metrics (module docstring) from two snapshots' totals (bytes and
    requests, as bytes_by_object_context | requests_by_object_context); {} when either
    is None (no pg_stat_io, or it could not be read)."""
    if before is None or after is None:
        return {}
    d = delta(before, after)
    out: Metrics = {}
    for key, value in d.items():
        head, _, where = key.partition(".")
        if not head.endswith("_bytes"):
            continue
        obj, _, context = where.partition(".")
        per_xact = per_xact_metric(head.removeprefix("io_").removesuffix("_bytes"), obj, context)
        out[per_xact.removesuffix("_per_xact")] = value
        out[per_xact] = value / transactions if transactions > 0 else None
    return out | _request_sizes(d)


def _request_sizes(d: Mapping[str, float]) -> Metrics:
    """io_{op}_bytes_per_{op}_{object}: bytes / operations over the contexts that count
    both (18+)."""
    sums: dict[tuple[str, str], list[float]] = {}
    for key, count in d.items():
        head, _, where = key.partition(".")
        op = head.removeprefix("io_").removesuffix("s")
        if op not in OPS or head != f"io_{op}s":
            continue
        obj = where.partition(".")[0]
        acc = sums.setdefault((op, obj), [0.0, 0.0])
        acc[0] += d.get(f"io_{op}_bytes.{where}", 0.0)
        acc[1] += count
    return {
        f"io_{op}_bytes_per_{op}_{obj}": (total / n if n > 0 else None)
        for (op, obj), (total, n) in sorted(sums.items())
    }

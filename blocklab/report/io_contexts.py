"""The experiment page's table "PostgreSQL I/O by context (pg_stat_io)" (pure).

blocklab.probes.stat_io stores per run io_{op}_bytes_{object}_{context}_per_xact: bytes
read, written and extended per transaction, summed over backend types. This module turns
each variant's statistics of those metrics (the mean over rounds, as in the Summary) into
rows: one per object, context and operation that moved bytes in at least one variant, one
column per variant. A combination a variant's server does not track (NULL in pg_stat_io,
or no pg_stat_io at all: PostgreSQL 15) has no value there ("–"), never 0.

    io_table(variants)   -> IoTable | None (None: no variant has pg_stat_io data)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from blocklab.probes import stat_io
from blocklab.report.data import VariantView
from blocklab.report.shape import CellStats

OPS = (("read", "read"), ("write", "written"), ("extend", "extended"))
OBJECTS = (("relation", "relation"), ("temp_relation", "temp relation"), ("wal", "WAL"))
CONTEXTS = ("normal", "bulkread", "bulkwrite", "vacuum", "init")


@dataclass(frozen=True)
class IoRow:
    object: str  # "relation", "temp relation", "WAL"
    context: str  # pg_stat_io's context: normal, bulkread, bulkwrite, vacuum, init
    op: str  # "read", "written", "extended"
    metric: str  # io_<op>_bytes_<object>_<context>_per_xact
    bytes_per_xact: tuple[float | None, ...]  # one per variant; None: not tracked


@dataclass(frozen=True)
class IoTable:
    variants: tuple[str, ...]  # labels, in the page's variant order
    rows: tuple[IoRow, ...]


def io_table(variants: Sequence[VariantView]) -> IoTable | None:
    """The rows of every object/context/operation with bytes in some variant (in the
    order of OBJECTS, CONTEXTS, OPS); None when no variant has any io_* per-transaction
    value (no pg_stat_io: PostgreSQL 15, or never read)."""
    rows: list[IoRow] = []
    tracked = False
    for obj, obj_label in OBJECTS:
        for context in CONTEXTS:
            for op, op_label in OPS:
                key = stat_io.per_xact_metric(op, obj, context)
                values = tuple(_mean(v.cells.get(key)) for v in variants)
                tracked = tracked or any(x is not None for x in values)
                if any(x for x in values):  # some variant moved bytes here
                    rows.append(IoRow(obj_label, context, op_label, key, values))
    if not tracked:
        return None
    return IoTable(tuple(v.label or v.variant_id for v in variants), tuple(rows))


def _mean(cell: CellStats | None) -> float | None:
    return None if cell is None else cell.summary.mean

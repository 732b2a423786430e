"""How many bytes a pg_dump archive takes once restored: tables and indexes, for the
plan's room check (issue 32). Pure: the texts pg_restore prints are read by
blocklab.workloads.dump_room.

What the archive tells without restoring it:

- `pg_restore --list`: its TOC entries (TABLE, TABLE DATA, INDEX, CONSTRAINT, ...), counted
  for the statement of the basis;
- the data section (`pg_restore --data-only -f FILE`): each table's COPY rows, so its
  row count and the bytes of its values as text;
- the post-data section (`pg_restore --section=post-data -f -`): each index and primary
  key or unique constraint, with its table.

The estimate, calibrated on the shipped example's dump (examples/own-database: 4 tables,
412,000 rows, 8.3 MB of COPY text, 8 B-trees; restored with PG 18: 43.0 MB of tables and
indexes with 8 kB pages, 42.9 MB with 4 kB pages; the 2.2 MB archive is 1/20 of that):

  heap   = (text bytes + rows x ROW_OVERHEAD_BYTES) x 100 / fillfactor, + FORK_PAGES pages
  B-tree = its table's rows x INDEX_ENTRY_BYTES x 100 / index fillfactor (90 when unset)

ROW_OVERHEAD_BYTES: the 23-byte tuple header aligned to 24, the 4-byte line pointer and
8 bytes for the alignment of the values and their binary form (a bigint is 8 bytes, its
text often fewer). INDEX_ENTRY_BYTES: an 8-byte index tuple header, a key of 8 to 16
bytes after alignment and a 4-byte line pointer. Text overstates values that TOAST
compresses, and a materialized view's data (refreshed, not copied) is not counted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

ROW_OVERHEAD_BYTES = 36
INDEX_ENTRY_BYTES = 24
DEFAULT_INDEX_FILLFACTOR = 90  # a B-tree's default leaf fillfactor
FORK_PAGES = 4  # a table's free space map (3 pages when small) and visibility map
# restored tables + indexes per archive byte when nothing but its size is known: the
# shipped example's 43.0 MB from 2.2 MB (gzip-compressed generated data; real data
# compresses less, so this overstates it rather than understating)
RESTORED_PER_ARCHIVE_BYTE = 20

# a line of `pg_restore --list`: "219; 1259 16384 TABLE public customers blocklab"; a
# kind of one word, or one of pg_dump's kinds of several (longest first)
_KINDS = ("MATERIALIZED VIEW DATA", "SEQUENCE OWNED BY", "STATISTICS DATA", "TABLE DATA",
          "FK CONSTRAINT", "MATERIALIZED VIEW", "SEQUENCE SET", "FOREIGN TABLE",
          "DEFAULT ACL", "INDEX ATTACH", "TABLE ATTACH", "EVENT TRIGGER", "LARGE OBJECT",
          "BLOB METADATA", "ROW SECURITY")  # fmt: skip
_ENTRY = re.compile(r"^\d+; \d+ \d+ (?P<rest>.*)$", re.MULTILINE)
# pg_dump's COPY line of a table's data: COPY public.customers (id, name) FROM stdin;
_COPY = re.compile(rb"^COPY (?P<table>\S+) .*FROM stdin;\n?$")
_INDEX = re.compile(r"^CREATE (?:UNIQUE )?INDEX (?P<name>\S+) ON (?:ONLY )?(?P<table>\S+) ",
                    re.MULTILINE)  # fmt: skip
_KEY = re.compile(r"^ALTER TABLE (?:ONLY )?(?P<table>\S+)\n\s+ADD CONSTRAINT (?P<name>\S+) "
                  r"(?:PRIMARY KEY|UNIQUE)", re.MULTILINE)  # fmt: skip


@dataclass(frozen=True)
class TableData:
    rows: int
    text_bytes: int  # the rows' COPY text, newlines included


@dataclass(frozen=True)
class Contents:
    """What the archive holds, as pg_restore prints it."""

    entries: dict[str, int]  # TOC entries by kind: {"TABLE": 4, "INDEX": 4, ...}
    tables: dict[str, TableData]  # by schema-qualified name, from the data section
    indexes: tuple[tuple[str, str], ...]  # (index, table): B-trees and keys, post-data


def count_entries(listing: str) -> dict[str, int]:
    """TOC entries of a `pg_restore --list` output by kind ("TABLE DATA", "INDEX", ...)."""
    return dict(Counter(_kind(m["rest"]) for m in _ENTRY.finditer(listing)))


def _kind(rest: str) -> str:
    return next((k for k in _KINDS if rest.startswith(k + " ")), rest.split(" ", 1)[0])


def read_data(lines: Iterable[bytes]) -> dict[str, TableData]:
    """Rows and text bytes per table of a data section (`pg_restore --data-only`)."""
    rows: Counter[str] = Counter()
    size: Counter[str] = Counter()
    table = None
    for line in lines:
        if table is None:
            m = _COPY.match(line)
            if m:
                table = m["table"].decode(errors="replace")
                rows[table] += 0
        elif line.rstrip(b"\n") == b"\\.":
            table = None
        else:
            rows[table] += 1
            size[table] += len(line)
    return {t: TableData(rows[t], size[t]) for t in rows}


def read_indexes(post_data: str) -> tuple[tuple[str, str], ...]:
    """(index, table) of each CREATE INDEX and primary key or unique constraint of a
    post-data section."""
    found = [(m["name"], m["table"]) for m in _INDEX.finditer(post_data)]
    found += [(m["name"], m["table"]) for m in _KEY.finditer(post_data)]
    return tuple(found)


def estimate(
    contents: Contents, fillfactor: int, index_fillfactor: int | None, block_size_bytes: int
) -> tuple[int, str]:
    """(bytes of tables and indexes once restored, the basis in words)."""
    heap = sum(
        math.ceil((t.text_bytes + t.rows * ROW_OVERHEAD_BYTES) * 100 / fillfactor)
        + FORK_PAGES * block_size_bytes
        for t in contents.tables.values()
    )
    ff = index_fillfactor or DEFAULT_INDEX_FILLFACTOR
    entries = sum(_rows_of(contents.tables, table) for _, table in contents.indexes)
    index = math.ceil(entries * INDEX_ENTRY_BYTES * 100 / ff) + 2 * block_size_bytes * len(
        contents.indexes
    )
    rows = sum(t.rows for t in contents.tables.values())
    text = sum(t.text_bytes for t in contents.tables.values())
    basis = (
        f"estimated from the dump: {len(contents.tables)} tables, {rows:,} rows, "
        f"{_mb(text)} of COPY text, {len(contents.indexes)} indexes and keys over "
        f"{entries:,} rows (heap: text + {ROW_OVERHEAD_BYTES} bytes a row; B-tree: "
        f"{INDEX_ENTRY_BYTES} bytes an entry)"
    )
    return heap + index, basis


def _rows_of(tables: dict[str, TableData], table: str) -> int:
    """The table's rows; an index on a table without data rows (a partitioned parent,
    a materialized view) counts the largest table's, erring on the side of room."""
    if table in tables:
        return tables[table].rows
    return max((t.rows for t in tables.values()), default=0)


def guess(archive_bytes: int) -> tuple[int, str]:
    """(bytes, basis) from the archive's size alone (no pg_restore to read it with)."""
    return archive_bytes * RESTORED_PER_ARCHIVE_BYTE, (
        f"guessed from the dump's size alone: {_mb(archive_bytes)} x "
        f"{RESTORED_PER_ARCHIVE_BYTE} (the shipped example's ratio; no cached build's "
        "pg_restore to read the dump with yet)"
    )


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1024 / 1024:.1f} MB"

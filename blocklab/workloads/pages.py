"""Pages of pgbench's freshly loaded tables, indexes and maps, by page size (pure).

Where the row and page constants come from is told in blocklab.workloads.sizing; the
pgbench driver turns these pages into its dataset estimate.
"""

from __future__ import annotations

import math

ACCOUNTS_PER_SCALE = 100_000
TELLERS_PER_SCALE = 10
BRANCHES_PER_SCALE = 1
ACCOUNT_ROW_BYTES = 132  # MAXALIGN(121) + 4-byte line pointer
SMALL_ROW_BYTES = 36  # teller or branch with a NULL filler
PAGE_HEADER_BYTES = 24
BTREE_SPECIAL_BYTES = 16
BTREE_ENTRY_BYTES = 20  # MAXALIGN(8 + 4) + 4
BTREE_LEAF_FILLFACTOR = 90


def heap_pages(rows: int, row_bytes: int, block_size_bytes: int, fillfactor: int) -> int:
    """Pages of a freshly loaded table: rows fill each page up to its fillfactor."""
    reserved = block_size_bytes * (100 - fillfactor) // 100
    per_page = max(1, (block_size_bytes - PAGE_HEADER_BYTES - reserved) // row_bytes)
    return math.ceil(rows / per_page)


def btree_pages(rows: int, block_size_bytes: int) -> int:
    """Pages of a freshly built int4 B-tree: leaves at 90 %, inner levels, metapage."""
    usable = block_size_bytes - PAGE_HEADER_BYTES - BTREE_SPECIAL_BYTES
    per_leaf = max(2, (usable * BTREE_LEAF_FILLFACTOR // 100) // BTREE_ENTRY_BYTES - 1)
    fanout = max(2, usable // BTREE_ENTRY_BYTES - 1)
    pages, level = 1, math.ceil(rows / per_leaf)  # the metapage, then the leaves
    while True:
        pages += level
        if level == 1:
            return pages
        level = math.ceil(level / fanout)


def map_pages(heap: int, block_size_bytes: int) -> int:
    """Free space map and visibility map forks of a vacuumed table."""
    fsm = 3 + heap // (block_size_bytes // 4)
    vm = 1 + heap // (4 * block_size_bytes)
    return fsm + vm


def pgbench_tables_bytes(scale: int, fillfactor: int, block_size_bytes: int) -> int:
    """Tables, primary keys and their maps right after `pgbench -i -s SCALE -F FILLFACTOR`."""
    pages = 0
    for per_scale, row_bytes in (
        (ACCOUNTS_PER_SCALE, ACCOUNT_ROW_BYTES),
        (TELLERS_PER_SCALE, SMALL_ROW_BYTES),
        (BRANCHES_PER_SCALE, SMALL_ROW_BYTES),
    ):
        rows = per_scale * scale
        heap = heap_pages(rows, row_bytes, block_size_bytes, fillfactor)
        pages += heap + map_pages(heap, block_size_bytes) + btree_pages(rows, block_size_bytes)
    return pages * block_size_bytes

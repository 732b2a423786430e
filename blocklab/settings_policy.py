"""Settings policy: what a GUC counted in pages means in a build with another page size.

Some PostgreSQL settings count data pages (BLCKSZ) or WAL blocks (XLOG_BLCKSZ), so the
same number means a different volume at another block size: `bgwriter_lru_maxpages =
100` lets the background writer write 400 kB per round with 4 kB pages and 800 kB with
8 kB pages. An experiment picks one of two policies:

- ``native``: every build gets the same numbers (what a user who recompiles and keeps
  postgresql.conf gets). Settings are passed through unchanged.
- ``bytes``: every build gets the same *bytes* as the reference build. Every setting
  counted in pages or WAL blocks is converted, whether the experiment sets it or leaves
  a default that is a page count:

  ===========================  ======  ==========================================
  setting                      unit    default that is a page count (8 kB = ref)
  ===========================  ======  ==========================================
  bgwriter_lru_maxpages        pages   100 (a plain count, written as a count)
  backend_flush_after          pages   0 (off: nothing to convert)
  bgwriter_flush_after         pages   64 (512 kB at 8 kB)
  checkpoint_flush_after       pages   32 (256 kB at 8 kB)
  effective_cache_size         pages   524288 (4 GB at 8 kB)
  temp_buffers                 pages   1024 (8 MB at 8 kB)
  shared_buffers               pages   none: initdb writes 128MB at any page size
  min_parallel_*_scan_size     pages   none: the default is already 8 MB / 512 kB
  wal_writer_flush_after       WAL     none: the default is already 1 MB
  wal_buffers                  WAL     -1 = auto-tuning, see below
  ===========================  ======  ==========================================

  A value written with a unit ("128MB", "256kB") is already bytes and is left alone. A
  plain number is read as pages (WAL blocks) of the *reference* build and rewritten in kB.
  The *_flush_after settings are capped by PostgreSQL at 256 pages of the build
  (WRITEBACK_MAX_PENDING_FLUSHES); where the reference's bytes exceed that, the value is
  capped and a note says so.

  wal_buffers = -1 (the default) auto-tunes in xlog.c's XLOGChooseNumBuffers():
  NBuffers / 32 WAL blocks, at most one WAL segment, at least 8 blocks. NBuffers counts
  data pages while the result counts WAL blocks, so the auto-tuned bytes depend on both
  block sizes (pgsql-hackers, "Lowering the default wal_blocksize to 4K"). The bytes
  policy computes what auto-tuning gives at the reference sizes and sets that explicitly.

Planner and vacuum costs per page (seq_page_cost, vacuum_cost_page_*) are costs per I/O,
not volumes, and are not converted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["native", "bytes"]
POLICIES: tuple[str, ...] = ("native", "bytes")

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SHARED_BUFFERS_BYTES = 128 * MIB  # what initdb writes at any BLCKSZ
DEFAULT_WAL_SEGMENT_BYTES = 16 * MIB
WRITEBACK_MAX_PENDING_FLUSHES = 256  # upper limit of the *_flush_after settings, in pages

UNIT_BYTES = {"B": 1, "kB": KIB, "MB": MIB, "GB": 1024 * MIB, "TB": 1024 * 1024 * MIB}
_PLAIN_INT = re.compile(r"^\s*(-?\d+)\s*$")
_WITH_UNIT = re.compile(r"^\s*(\d+)\s*(B|kB|MB|GB|TB)\s*$")


@dataclass(frozen=True)
class PageSetting:
    unit: Literal["page", "wal_block"]
    default_units: int | None = None  # a default that is a page count (materialised)
    max_units: int | None = None  # PostgreSQL's upper limit, in the build's units
    count: bool = False  # a plain count (no unit accepted): written back as a number


PAGE_SETTINGS: dict[str, PageSetting] = {
    "bgwriter_lru_maxpages": PageSetting("page", 100, count=True),
    "backend_flush_after": PageSetting("page", None, WRITEBACK_MAX_PENDING_FLUSHES),
    "bgwriter_flush_after": PageSetting("page", 64, WRITEBACK_MAX_PENDING_FLUSHES),
    "checkpoint_flush_after": PageSetting("page", 32, WRITEBACK_MAX_PENDING_FLUSHES),
    "effective_cache_size": PageSetting("page", 524288),
    "temp_buffers": PageSetting("page", 1024),
    "shared_buffers": PageSetting("page"),
    "min_parallel_table_scan_size": PageSetting("page"),
    "min_parallel_index_scan_size": PageSetting("page"),
    "wal_writer_flush_after": PageSetting("wal_block"),
}


@dataclass(frozen=True)
class Conversion:
    settings: dict[str, str]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Sizes:
    page: int
    wal_block: int
    ref_page: int
    ref_wal_block: int

    def build_unit(self, s: PageSetting) -> int:
        return self.page if s.unit == "page" else self.wal_block

    def ref_unit(self, s: PageSetting) -> int:
        return self.ref_page if s.unit == "page" else self.ref_wal_block


def value_bytes(value: str, unit_bytes: int) -> int | None:
    """Bytes of a GUC value: a plain number counts `unit_bytes`; None if not a size."""
    m = _WITH_UNIT.match(value)
    if m:
        return int(m.group(1)) * UNIT_BYTES[m.group(2)]
    m = _PLAIN_INT.match(value)
    if m:
        return int(m.group(1)) * unit_bytes
    return None


def convert(
    settings: dict[str, str],
    policy: str,
    *,
    block_size_bytes: int,
    wal_block_size_bytes: int,
    reference_block_size_bytes: int = 8192,
    reference_wal_block_size_bytes: int = 8192,
    reference_wal_segment_size_bytes: int = DEFAULT_WAL_SEGMENT_BYTES,
) -> Conversion:
    """The settings to write for a build with these block sizes under `policy`, with
    notes on values that could not keep the reference's bytes."""
    if policy not in POLICIES:
        raise ValueError(f"settings policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "native":
        return Conversion(dict(settings))
    sizes = _Sizes(
        block_size_bytes,
        wal_block_size_bytes,
        reference_block_size_bytes,
        reference_wal_block_size_bytes,
    )
    out = dict(settings)
    notes: list[str] = []
    for name, spec in PAGE_SETTINGS.items():
        given = settings.get(name)
        if given is None and spec.default_units is None:
            continue
        value = given if given is not None else str(spec.default_units)
        converted = _convert_one(name, value, spec, sizes, notes)
        if converted is not None:
            out[name] = converted
    out["wal_buffers"] = _wal_buffers(settings, sizes, reference_wal_segment_size_bytes)
    return Conversion(out, notes)


def _convert_one(
    name: str, value: str, spec: PageSetting, sizes: _Sizes, notes: list[str]
) -> str | None:
    if _WITH_UNIT.match(value):
        nbytes = value_bytes(value, 1)
        assert nbytes is not None
        return _capped(name, nbytes, value, spec, sizes, notes)
    nbytes = value_bytes(value, sizes.ref_unit(spec))
    if nbytes is None or nbytes < 0:
        return None  # not a size (e.g. -1 or an expression): leave it to PostgreSQL
    unit = sizes.build_unit(spec)
    if spec.count:
        units = max(1, round(nbytes / unit)) if nbytes > 0 else 0
        if units * unit != nbytes:
            notes.append(f"{name}: {nbytes} bytes is not a whole number of pages; using {units}")
        return str(units)
    return _capped(name, nbytes, _kb(nbytes), spec, sizes, notes)


def _capped(
    name: str, nbytes: int, text: str, spec: PageSetting, sizes: _Sizes, notes: list[str]
) -> str:
    unit = sizes.build_unit(spec)
    if spec.max_units is None or nbytes <= spec.max_units * unit:
        return text
    cap = spec.max_units * unit
    notes.append(
        f"{name}: {_kb(nbytes)} exceeds PostgreSQL's limit of {spec.max_units} pages "
        f"({_kb(cap)}) at {unit // KIB} kB pages; capped"
    )
    return _kb(cap)


def _kb(nbytes: int) -> str:
    if nbytes % KIB:
        return f"{nbytes}B"
    return f"{nbytes // KIB}kB"


def auto_wal_buffers_bytes(
    shared_buffers_bytes: int, block_size_bytes: int, wal_block_size_bytes: int, segment_bytes: int
) -> int:
    """What wal_buffers = -1 gives (xlog.c XLOGChooseNumBuffers), in bytes."""
    nbuffers = shared_buffers_bytes // block_size_bytes
    xbuffers = min(nbuffers // 32, segment_bytes // wal_block_size_bytes)
    return max(xbuffers, 8) * wal_block_size_bytes


def _wal_buffers(settings: dict[str, str], sizes: _Sizes, segment_bytes: int) -> str:
    given = settings.get("wal_buffers", "-1").strip()
    if given != "-1":
        nbytes = value_bytes(given, sizes.ref_wal_block)
        return given if nbytes is None or _WITH_UNIT.match(given) else _kb(nbytes)
    sb = value_bytes(settings.get("shared_buffers", ""), sizes.ref_page)
    shared = sb if sb is not None and sb > 0 else DEFAULT_SHARED_BUFFERS_BYTES
    return _kb(auto_wal_buffers_bytes(shared, sizes.ref_page, sizes.ref_wal_block, segment_bytes))

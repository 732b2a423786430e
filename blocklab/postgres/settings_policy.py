"""Settings policy: what a GUC counted in pages means in a build with another page size.

Some PostgreSQL settings count data pages (BLCKSZ) or WAL blocks (XLOG_BLCKSZ), so the
same number means a different volume at another block size: `bgwriter_lru_maxpages =
100` lets the background writer write 400 kB per round with 4 kB pages and 800 kB with
8 kB pages. An experiment picks one of two policies:

- ``native``: every build gets the same numbers (what a user who recompiles and keeps
  postgresql.conf gets). Settings are passed through unchanged.
- ``bytes``: every build gets the same *bytes* as the reference build. Every setting
  counted in pages or WAL blocks is converted, whether the experiment sets it or leaves
  a default that is a page count.

Which settings count pages comes from each build's own catalogue (pg_settings, recorded
beside the build by blocklab.postgres.settings_catalogue), not from a list written here: a
setting is counted in pages when its ``unit`` is the build's block size or WAL block
size ('4kB' on a 4 kB build: shared_buffers, effective_cache_size, temp_buffers, the
*_flush_after settings, io_combine_limit, io_max_combine_limit, the SLRU *_buffers of
PostgreSQL 17+, ...). A few counts of pages have no unit and are named here
(UNITLESS_PAGE_COUNTS: bgwriter_lru_maxpages, max_notify_queue_pages); internal
read-only settings (segment_size) are skipped.

A value written with a unit ("128MB", "256kB") is already bytes. A plain number is read
as units of the *reference* build (its catalogue says which) and rewritten in kB (a
unitless count is rewritten as a count). A setting the experiment leaves alone gets the
reference's default bytes when the two builds' defaults differ in bytes (temp_buffers =
1024 pages is 4 MB at 4 kB, 8 MB at 8 kB); a default that is already the same bytes
(min_parallel_table_scan_size, io_combine_limit) or a sentinel for auto-tuning (0 or -1:
the SLRU buffers, which follow shared_buffers) is not written. The default is what a
fresh initdb'd cluster shows: the compiled-in boot value, or initdb's postgresql.conf
(shared_buffers = 128MB at any page size).

Every value respects the target build's min_val and max_val (io_combine_limit: at most
128 pages, 512 kB at 4 kB pages; the *_flush_after settings at most 256 pages): a value
outside is clamped to the limit and a note says so. A value that is not a whole number of
the build's pages is rounded to the nearest page (as PostgreSQL would) with a note.

wal_buffers = -1 (the default) auto-tunes in xlog.c's XLOGChooseNumBuffers():
NBuffers / 32 WAL blocks, at most one WAL segment, at least 8 blocks. NBuffers counts
data pages while the result counts WAL blocks, so the auto-tuned bytes depend on both
block sizes (pgsql-hackers, "Lowering the default wal_blocksize to 4K"). The bytes
policy computes what auto-tuning gives at the reference sizes and sets that explicitly.

Not converted: planner and vacuum costs per page (seq_page_cost, vacuum_cost_page_*) are
costs per I/O, not volumes; effective_io_concurrency, maintenance_io_concurrency and
io_max_concurrency count I/Os, not pages. The SLRU buffers left at 0 auto-tune to
shared_buffers / 512 within 16 to 1024 pages: the same bytes in every build between the
clamps (shared_buffers from 32 MB to 2 GB at 4 kB pages), not outside them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from blocklab.model import BuildRequest, Variant

Policy = Literal["native", "bytes"]
POLICIES: tuple[str, ...] = ("native", "bytes")

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SHARED_BUFFERS_BYTES = 128 * MIB  # what initdb writes at any BLCKSZ
DEFAULT_WAL_SEGMENT_BYTES = 16 * MIB
# Settings that count pages but carry no unit in pg_settings (PostgreSQL 13-18).
UNITLESS_PAGE_COUNTS = ("bgwriter_lru_maxpages", "max_notify_queue_pages")
SPECIAL = ("wal_buffers",)  # converted by its own rule (auto-tuning), see above

UNIT_BYTES = {"B": 1, "kB": KIB, "MB": MIB, "GB": 1024 * MIB, "TB": 1024 * 1024 * MIB}
_PLAIN_INT = re.compile(r"^\s*(-?\d+)\s*$")
_WITH_UNIT = re.compile(r"^\s*(\d+)\s*(B|kB|MB|GB|TB)\s*$")


@dataclass(frozen=True)
class Guc:
    """One row of pg_settings, as the catalogue records it (strings as PostgreSQL gives)."""

    name: str
    unit: str = ""
    vartype: str = "integer"
    context: str = "user"
    min_val: str = ""
    max_val: str = ""
    boot_val: str = ""
    reset_val: str = ""
    source: str = "default"
    enumvals: str = ""  # an enum's allowed values, comma-separated; "" = not recorded

    def allowed_values(self) -> tuple[str, ...] | None:
        """An enum's allowed values as this build knows them; None when not an enum or
        not recorded (catalogues kept before enumvals was)."""
        if self.vartype != "enum" or not self.enumvals:
            return None
        return tuple(self.enumvals.split(","))

    def default_units(self) -> int | None:
        """The value a fresh initdb'd cluster has, in the setting's units: initdb's
        postgresql.conf if it sets it (shared_buffers), else the compiled-in default."""
        text = self.reset_val if self.source == "configuration file" else self.boot_val
        return _int_or_none(text)

    def limits(self) -> tuple[int | None, int | None]:
        return _int_or_none(self.min_val), _int_or_none(self.max_val)


@dataclass(frozen=True)
class Catalogue:
    """The settings of one build (pg_settings of a fresh cluster) and its block sizes."""

    block_size_bytes: int
    wal_block_size_bytes: int
    gucs: dict[str, Guc]
    version: str = ""
    key: str = ""  # the build it was read from

    def page_settings(self) -> dict[str, int]:
        """Settings counted in pages or WAL blocks: name -> bytes of one unit here."""
        block_units = {
            _unit_name(self.block_size_bytes): self.block_size_bytes,
            _unit_name(self.wal_block_size_bytes): self.wal_block_size_bytes,
        }
        out = {}
        for g in self.gucs.values():
            if g.context == "internal" or g.vartype != "integer" or g.name in SPECIAL:
                continue
            if g.unit in block_units:
                out[g.name] = block_units[g.unit]
            elif not g.unit and g.name in UNITLESS_PAGE_COUNTS:
                out[g.name] = self.block_size_bytes
        return out


def _unit_name(nbytes: int) -> str:
    """How pg_settings.unit names a block of this size ('8kB')."""
    return f"{nbytes // KIB}kB"


def _int_or_none(text: str) -> int | None:
    m = _PLAIN_INT.match(text or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Conversion:
    settings: dict[str, str]
    notes: list[str] = field(default_factory=list)


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
    catalogue: Catalogue | None = None,
    reference: Catalogue | None = None,
    reference_wal_segment_size_bytes: int = DEFAULT_WAL_SEGMENT_BYTES,
) -> Conversion:
    """The settings to write for the build of `catalogue` under `policy`, with notes on
    values that could not keep the reference's bytes. `bytes` needs both catalogues:
    the build's and its reference's."""
    if policy not in POLICIES:
        raise ValueError(f"settings policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "native":
        return Conversion(dict(settings))
    if catalogue is None or reference is None:
        raise ValueError("the bytes policy needs the catalogues of the build and its reference")
    out = dict(settings)
    notes: list[str] = []
    ref_units = reference.page_settings()
    for name, unit in catalogue.page_settings().items():
        nbytes = _wanted_bytes(
            name, settings.get(name), unit, ref_units.get(name), catalogue, reference
        )
        if nbytes is not None:
            out[name] = _fit(name, nbytes, settings.get(name), unit, catalogue, notes)
    out["wal_buffers"] = _wal_buffers(settings, reference, reference_wal_segment_size_bytes)
    return Conversion(out, notes)


def for_variant(
    variant: Variant,
    reference: Variant,
    catalogue_of: Callable[[BuildRequest], Catalogue | None],
) -> Conversion | None:
    """The settings a variant's server gets under its policy, compared with its reference
    variant (the one place where a variant's settings meet the policy: `plan` shows them,
    the runner writes them). `catalogue_of` gives a build's settings catalogue, asked for
    only under the bytes policy; None when it does not know one (a build not made yet)."""
    if variant.settings_policy != "bytes":
        return convert(dict(variant.settings), variant.settings_policy)
    own, theirs = catalogue_of(variant.build), catalogue_of(reference.build)
    if own is None or theirs is None:
        return None
    return convert(
        dict(variant.settings),
        variant.settings_policy,
        catalogue=own,
        reference=theirs,
        reference_wal_segment_size_bytes=reference.wal_segsize_mb * 1024**2,
    )


def _wanted_bytes(
    name: str,
    given: str | None,
    unit: int,
    ref_unit: int | None,
    catalogue: Catalogue,
    reference: Catalogue,
) -> int | None:
    """The reference's bytes for this setting; None: nothing to write (a default that
    is already the same bytes, a sentinel such as -1, or not a size at all)."""
    if given is not None:
        if _WITH_UNIT.match(given):
            return value_bytes(given, 1)
        nbytes = value_bytes(given, ref_unit or unit)
        return nbytes if nbytes is not None and nbytes >= 0 else None
    if ref_unit is None:  # not a page count in the reference: keep the build's default
        return None
    ref_default = reference.gucs[name].default_units()
    own_default = catalogue.gucs[name].default_units()
    if ref_default is None or own_default is None or ref_default < 0:
        return None
    if ref_default * ref_unit == own_default * unit:
        return None
    return ref_default * ref_unit


def _fit(
    name: str, nbytes: int, given: str | None, unit: int, catalogue: Catalogue, notes: list[str]
) -> str:
    """`nbytes` as a value this build accepts: whole pages within its min and max."""
    guc = catalogue.gucs[name]
    units = round(nbytes / unit)
    if nbytes > 0 and units == 0:
        units = 1
    if units * unit != nbytes:
        notes.append(
            f"{name}: {_kb(nbytes)} is not a whole number of {unit // KIB} kB pages; "
            f"using {units} ({_kb(units * unit)})"
        )
    low, high = guc.limits()
    bounded = units if low is None else max(units, low)
    bounded = bounded if high is None else min(bounded, high)
    if bounded != units:
        side = "above PostgreSQL's maximum" if bounded < units else "below PostgreSQL's minimum"
        notes.append(
            f"{name}: {_kb(units * unit)} is {side} of {bounded} × {unit // KIB} kB "
            f"in this build; clamped to {_kb(bounded * unit)}"
        )
    if not guc.unit:
        return str(bounded)
    if given is not None and _WITH_UNIT.match(given) and bounded * unit == nbytes:
        return given  # already bytes that this build takes as they are
    return _kb(bounded * unit)


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


def _wal_buffers(settings: dict[str, str], reference: Catalogue, segment_bytes: int) -> str:
    page, wal_block = reference.block_size_bytes, reference.wal_block_size_bytes
    given = settings.get("wal_buffers", "-1").strip()
    if given != "-1":
        nbytes = value_bytes(given, wal_block)
        return given if nbytes is None or _WITH_UNIT.match(given) else _kb(nbytes)
    sb = value_bytes(settings.get("shared_buffers", ""), page)
    shared = sb if sb is not None and sb > 0 else DEFAULT_SHARED_BUFFERS_BYTES
    return _kb(auto_wal_buffers_bytes(shared, page, wal_block, segment_bytes))

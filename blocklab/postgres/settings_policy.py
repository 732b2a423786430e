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
outside is clamped to the limit. A value that is not a whole number of the build's pages
is rounded to the nearest page (as PostgreSQL would). PostgreSQL's check hooks add rules
of their own: the SLRU buffers of PostgreSQL 17+ must be a multiple of SLRU_BANK_SIZE = 16
(slru.c check_slru_buffers; 0 = auto), so 48 pages of 8 kB become 32 (not 24) of 16 kB;
wal_buffers is whole WAL blocks of the build, at least 4 (check_wal_buffers). Every step
taken is one note, with the bytes kept when they are not the reference's:
"transaction_buffers 48 (384 kB) -> 32 at 16 kB: 24 rounded up to a multiple of 16
(PostgreSQL requires it); 512 kB instead of 384 kB (not equal in bytes)".

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

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from blocklab.units import fmt_size

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
SLRU_BANK_SIZE = 16  # slru.h: the SLRU buffers of PostgreSQL 17+ come in banks of 16
# check_slru_buffers (slru.c), the check hook of each: a multiple of SLRU_BANK_SIZE (0 = auto)
MULTIPLE_OF = dict.fromkeys(
    (
        "commit_timestamp_buffers", "multixact_member_buffers", "multixact_offset_buffers",
        "notify_buffers", "serializable_buffers", "subtransaction_buffers", "transaction_buffers",
    ),
    SLRU_BANK_SIZE,
)  # fmt: skip
WAL_BUFFERS_MIN_BLOCKS = 4  # xlog.c check_wal_buffers raises anything lower (but -1) to 4

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
    out["wal_buffers"] = _wal_buffers(
        settings, reference, catalogue, reference_wal_segment_size_bytes, notes
    )
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
    """`nbytes` as a value this build accepts: whole units within its min and max, and a
    multiple of what PostgreSQL's check hook asks for (MULTIPLE_OF). One note says every
    step taken and the bytes kept when they differ from `nbytes`."""
    guc = catalogue.gucs[name]
    units, steps = fit_units(name, nbytes, unit, guc)
    if steps:
        notes.append(_note(name, nbytes, given, units, unit, steps))
    if not guc.unit:
        return str(units)
    if given is not None and _WITH_UNIT.match(given) and units * unit == nbytes:
        return given  # already bytes that this build takes as they are
    return _kb(units * unit)


def fit_units(name: str, nbytes: int, unit: int, guc: Guc) -> tuple[int, list[str]]:
    """The units of `unit` bytes this build takes for `nbytes`, and why it differs."""
    steps: list[str] = []
    units = round(nbytes / unit)
    if nbytes > 0 and units == 0:
        units = 1
    if units * unit != nbytes:
        steps.append(
            f"{_kb(nbytes)} is not a whole number of {unit // KIB} kB units; rounded to {units}"
        )
    low, high = guc.limits()
    bounded = units if low is None else max(units, low)
    bounded = bounded if high is None else min(bounded, high)
    if bounded != units:
        side = "above PostgreSQL's maximum" if bounded < units else "below PostgreSQL's minimum"
        steps.append(f"{units} is {side} of {bounded} here; clamped to {_kb(bounded * unit)}")
    multiple = MULTIPLE_OF.get(name, 1)
    if bounded % multiple:
        rounded = _round_to_multiple(bounded, multiple, low, high)
        way = "up" if rounded > bounded else "down"
        steps.append(
            f"{bounded} rounded {way} to a multiple of {multiple} (PostgreSQL requires it)"
        )
        bounded = rounded
    return bounded, steps


def _round_to_multiple(n: int, multiple: int, low: int | None, high: int | None) -> int:
    """The nearest multiple of `multiple` (halfway: up) within [low, high], never 0 for a
    positive n (0 means auto-tuning for the SLRU buffers)."""
    down = n - n % multiple
    up = down + multiple
    best = up if n - down >= up - n or down == 0 else down
    if high is not None and best > high:
        best = down
    if low is not None and best < low:
        best = up
    return best


def _note(
    name: str, nbytes: int, given: str | None, units: int, unit: int, steps: list[str]
) -> str:
    """'transaction_buffers 48 -> 32 at 16 kB: ...; 512 kB instead of 384 kB'."""
    source = f"{given}" if given is not None else "the reference's default"
    head = f"{name} {source} ({fmt_size(nbytes)}) -> {units} at {unit // KIB} kB: "
    kept = units * unit
    tail = (
        f"; {fmt_size(kept)} instead of {fmt_size(nbytes)} (not equal in bytes)"
        if kept != nbytes
        else "; same bytes"
    )
    return head + "; ".join(steps) + tail


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


def _wal_buffers(
    settings: dict[str, str],
    reference: Catalogue,
    catalogue: Catalogue,
    segment_bytes: int,
    notes: list[str],
) -> str:
    """wal_buffers with the reference's bytes, in whole WAL blocks of this build (at least
    the 4 that check_wal_buffers raises a smaller value to)."""
    page, wal_block = reference.block_size_bytes, reference.wal_block_size_bytes
    given = settings.get("wal_buffers", "-1").strip()
    if given == "-1":
        sb = value_bytes(settings.get("shared_buffers", ""), page)
        shared = sb if sb is not None and sb > 0 else DEFAULT_SHARED_BUFFERS_BYTES
        nbytes: int | None = auto_wal_buffers_bytes(shared, page, wal_block, segment_bytes)
        given_text = None
    else:
        nbytes, given_text = value_bytes(given, wal_block), given
    if nbytes is None or nbytes < 0:
        return given  # not a size: PostgreSQL says what it makes of it
    own = catalogue.gucs.get("wal_buffers", Guc("wal_buffers", unit="kB"))
    _low, high = own.limits()
    guc = dataclasses.replace(own, min_val=str(WAL_BUFFERS_MIN_BLOCKS), max_val=str(high or ""))
    unit = catalogue.wal_block_size_bytes
    units, steps = fit_units("wal_buffers", nbytes, unit, guc)
    if steps:
        notes.append(_note("wal_buffers", nbytes, given_text, units, unit, steps))
    if given_text is not None and _WITH_UNIT.match(given_text) and units * unit == nbytes:
        return given_text
    return _kb(units * unit)

"""The Five-Minute Rule per page size (pure: no I/O).

Gray and Putzolu (1987), as restated by Graefe ("The five-minute rule twenty years later",
2007):

    BreakEvenIntervalSeconds = (PagesPerMBofRAM / AccessesPerSecondPerDisk)
                               x (PricePerDiskDrive / PricePerMBofRAM)

Units: (pages/MB) / (accesses/s) x (price/drive) / (price/MB) = seconds (one access reads
one page; the drive and the MB cancel). MB here is a MiB, so a 4 kB page gives 256 pages
per MB. A page re-referenced more often than once per break-even interval is cheaper to
keep in RAM than to read again; one referenced less often is cheaper to read again.

The same formula prices a device-device tier (Graefe's flash-disk tier): the upper
device's price per MB takes the place of RAM's, the lower device's IOPS and price those
of the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from blocklab.errors import UserError

MIB = 1024 * 1024
GIB = 1024 * MIB
FORMULA = (
    "BreakEvenIntervalSeconds = (PagesPerMBofRAM / AccessesPerSecondPerDisk)"
    " x (PricePerDiskDrive / PricePerMBofRAM)"
)
UNITS = (
    "pages per MB = 1 MiB / page size; accesses per second = the device's IOPS at a request "
    "size equal to the page size; prices in one currency (price per device, price per MB = "
    "price per GB / 1024); result in seconds"
)


@dataclass(frozen=True)
class Device:
    """One storage device: its name, IOPS by request size (bytes) and price."""

    name: str
    iops_by_size: Mapping[int, float]  # request bytes -> I/O operations per second
    price: float  # per device drive
    capacity_bytes: int | None = None  # needed when it is the upper tier of two devices

    @property
    def price_per_mb(self) -> float | None:
        if not self.capacity_bytes:
            return None
        return self.price / (self.capacity_bytes / MIB)


@dataclass(frozen=True)
class Row:
    """The break-even interval of one page size in one tier."""

    tier: str  # e.g. "RAM-ssd" or "ssd-hdd"
    page_bytes: int
    pages_per_mb: float
    accesses_per_s: float  # of the lower tier's device
    lower_price: float  # per drive
    upper_price_per_mb: float
    break_even_s: float


@dataclass(frozen=True)
class Verdict:
    tier: str
    shortest: Row  # page-granular access: cheapest page size per MB of data
    most_iops: Row  # scattered single-row access, read from the device: cheapest
    smallest: Row  # scattered single-row access, kept in RAM: cheapest


def pages_per_mb(page_bytes: int) -> float:
    """1 MiB / page size: 256 for a 4 kB page, 128 for 8 kB."""
    if page_bytes <= 0:
        raise UserError(f"page size: must be positive (got {page_bytes} bytes)")
    return MIB / page_bytes


def break_even_seconds(
    page_bytes: int, accesses_per_s: float, price_per_drive: float, price_per_mb: float
) -> float:
    """Gray and Putzolu's break-even interval in seconds (see the module docstring)."""
    if accesses_per_s <= 0:
        raise UserError(f"IOPS: must be positive (got {accesses_per_s})")
    if price_per_mb <= 0:
        raise UserError(f"price per MB of the upper tier: must be positive (got {price_per_mb})")
    if price_per_drive < 0:
        raise UserError(f"price per device: must not be negative (got {price_per_drive})")
    return (pages_per_mb(page_bytes) / accesses_per_s) * (price_per_drive / price_per_mb)


def tier_rows(
    tier: str, upper_price_per_mb: float, lower: Device, page_sizes: Sequence[int]
) -> list[Row]:
    """One row per page size that the lower device has an IOPS figure for."""
    rows = []
    for size in page_sizes:
        iops = lower.iops_by_size.get(size)
        if iops is None:
            continue
        rows.append(
            Row(
                tier=tier,
                page_bytes=size,
                pages_per_mb=pages_per_mb(size),
                accesses_per_s=iops,
                lower_price=lower.price,
                upper_price_per_mb=upper_price_per_mb,
                break_even_s=break_even_seconds(size, iops, lower.price, upper_price_per_mb),
            )
        )
    return rows


def table(
    ram_price_per_gb: float, devices: Sequence[Device], page_sizes: Sequence[int]
) -> list[Row]:
    """RAM-device rows for every device, and device-device rows for each pair where the
    dearer device per MB sits above the cheaper one (both capacities needed)."""
    if ram_price_per_gb <= 0:
        raise UserError(f"--ram-price-per-gb: must be positive (got {ram_price_per_gb})")
    ram_per_mb = ram_price_per_gb / 1024
    rows: list[Row] = []
    for dev in devices:
        rows += tier_rows(f"RAM-{dev.name}", ram_per_mb, dev, page_sizes)
    for upper, lower in device_pairs(devices):
        assert upper.price_per_mb is not None
        rows += tier_rows(f"{upper.name}-{lower.name}", upper.price_per_mb, lower, page_sizes)
    return rows


def device_pairs(devices: Sequence[Device]) -> list[tuple[Device, Device]]:
    """(upper, lower) pairs: the device dearer per MB caches the cheaper one."""
    pairs = []
    for i, a in enumerate(devices):
        for b in devices[i + 1 :]:
            if a.price_per_mb is None or b.price_per_mb is None:
                continue
            pairs.append((a, b) if a.price_per_mb >= b.price_per_mb else (b, a))
    return pairs


def verdicts(rows: Sequence[Row]) -> list[Verdict]:
    """Per tier: which page size each reading of the rule favours (see DECISION_RULE)."""
    out = []
    for tier in dict.fromkeys(r.tier for r in rows):
        mine = [r for r in rows if r.tier == tier]
        out.append(
            Verdict(
                tier=tier,
                shortest=min(mine, key=lambda r: (r.break_even_s, r.page_bytes)),
                most_iops=max(mine, key=lambda r: (r.accesses_per_s, -r.page_bytes)),
                smallest=min(mine, key=lambda r: r.page_bytes),
            )
        )
    return out


DECISION_RULE = """\
How to read it (Gray and Putzolu; Graefe 2007):
  A page re-referenced at least once per break-even interval T is cheaper kept in the
  upper tier (RAM); one re-referenced less often is cheaper read again from the device.
  The cost of keeping data whose pages are each touched every t seconds, per MB of data,
  is (price per MB of RAM) x min(1, T / t): cached data costs the same per MB at every
  page size, data read again costs T / t of that. So when whole pages are useful (scans,
  clustered rows), the page size with the SHORTEST T is never dearer, and cheaper for
  data read from the device. That is the page size printed as favoured.
  When each access wants one small row and hot rows are scattered (one per page), the
  cost per row is min(page bytes x RAM price per byte, device price / (t x IOPS)): kept
  in RAM the smallest page wins, read from the device the page size with the most IOPS
  wins, whatever T says. The rule ignores write costs, write amplification and cache
  slots (seed 001): weigh those separately."""

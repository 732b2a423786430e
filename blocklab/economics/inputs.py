"""Inputs of `blocklab economics`: IOPS lists, price files and the devices they describe
(pure: a stored profile is read through the `profile_iops` callable the command passes)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from blocklab.economics.rule import GIB, Device
from blocklab.errors import UserError

PAGE_SIZES_KB = (1, 2, 4, 8, 16, 32)  # PostgreSQL's BLCKSZ choices
PRICE_KEYS = (
    "ram_price_per_gb",
    "device_price",
    "device_capacity_gb",
    "device2_price",
    "device2_capacity_gb",
)
_SIZE = re.compile(r"^\s*(\d+)\s*(k|kb|kib)?\s*$", re.IGNORECASE)


def parse_size_kb(text: str, flag: str) -> int:
    """'4k', '4kB', '4' -> 4 (kB). UserError naming the flag otherwise."""
    m = _SIZE.match(text)
    if not m or int(m.group(1)) not in PAGE_SIZES_KB:
        raise UserError(
            f"{flag}: {text.strip()!r} is not a page size; use one of "
            f"{', '.join(f'{k}k' for k in PAGE_SIZES_KB)}"
        )
    return int(m.group(1))


def parse_iops(text: str, flag: str = "--iops") -> dict[int, float]:
    """'4k=40000,8k=30000' -> {4096: 40000.0, 8192: 30000.0} (request bytes -> IOPS)."""
    out: dict[int, float] = {}
    for part in (p for p in text.split(",") if p.strip()):
        size, sep, value = part.partition("=")
        if not sep:
            raise UserError(
                f"{flag}: {part.strip()!r} is not SIZE=IOPS; write e.g. 4k=40000,8k=30000"
            )
        kb = parse_size_kb(size, flag)
        try:
            iops = float(value)
        except ValueError:
            raise UserError(f"{flag}: {value.strip()!r} is not a number (IOPS at {kb}k)") from None
        if not iops > 0:
            raise UserError(f"{flag}: IOPS at {kb}k must be positive (got {value.strip()})")
        out[kb * 1024] = iops
    if not out:
        raise UserError(f"{flag}: no SIZE=IOPS pair; write e.g. 4k=40000,8k=30000")
    return out


def parse_page_sizes(text: str) -> list[int]:
    """'4,8' or '4k,8k' -> [4096, 8192]."""
    sizes = [parse_size_kb(p, "--page-sizes") * 1024 for p in text.split(",") if p.strip()]
    if not sizes:
        raise UserError("--page-sizes: give at least one of " + ", ".join(map(str, PAGE_SIZES_KB)))
    return sorted(set(sizes))


def check_price(value: float | None, flag: str, *, positive: bool) -> float | None:
    if value is None:
        return None
    if value < 0 or (positive and value == 0):
        need = "positive" if positive else "zero or more"
        raise UserError(f"{flag}: must be {need} (got {value:g})")
    return float(value)


def prices_from_toml(data: Mapping[str, Any], source: str) -> dict[str, float]:
    """A price file's table: the keys of PRICE_KEYS, numbers. UserError on anything else."""
    table = data.get("prices", data)
    if not isinstance(table, Mapping):
        raise UserError(f"{source}: [prices] must be a table of {', '.join(PRICE_KEYS)}")
    out: dict[str, float] = {}
    for key, value in table.items():
        if key not in PRICE_KEYS:
            raise UserError(f"{source}: unknown key {key!r}; allowed: {', '.join(PRICE_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UserError(f"{source}: {key} must be a number (got {value!r})")
        positive = key != "device_price" and key != "device2_price"
        checked = check_price(float(value), f"{source}: {key}", positive=positive)
        assert checked is not None
        out[key] = checked
    return out


def required_price(
    value: float | None,
    prices: Mapping[str, float],
    *,
    key: str,
    flag: str,
    what: str,
    positive: bool,
) -> float:
    """The flag's value, else the price file's `key`; UserError naming both when neither."""
    checked = check_price(value, flag, positive=positive)
    found = prices.get(key) if checked is None else checked
    if found is None:
        raise UserError(f"{flag}: the price of {what} is needed (or {key} in the --prices file)")
    return found


@dataclass(frozen=True)
class DeviceInput:
    """Where one device's IOPS come from: a stored profile or --iops numbers."""

    profile: str | None
    iops: str | None
    price: float | None
    capacity_gb: float | None
    flag: str  # "" for the first device, "2" for the second


ProfileIops = Callable[[str, str], tuple[dict[int, float], str]]


def resolve_device(
    d: DeviceInput, prices: Mapping[str, float], profile_iops: ProfileIops
) -> tuple[Device, str]:
    """The device (name, IOPS by request bytes, price, capacity) and where its IOPS come
    from; `profile_iops(name, flag)` reads a stored profile. Flags win over `prices`."""
    key = f"device{d.flag}"
    price = required_price(
        d.price,
        prices,
        key=f"{key}_price",
        flag=f"--{key}-price",
        what="one device",
        positive=False,
    )
    cap_gb = check_price(d.capacity_gb, f"--{key}-capacity-gb", positive=True)
    cap_gb = prices.get(f"{key}_capacity_gb") if cap_gb is None else cap_gb
    capacity = int(cap_gb * GIB) if cap_gb else None
    if (d.profile is None) == (d.iops is None):
        raise UserError(
            f"--profile{d.flag} / --iops{d.flag}: give exactly one of them "
            "(a stored device profile, or numbers such as 4k=40000,8k=30000)"
        )
    if d.iops is not None:
        iops = parse_iops(d.iops, f"--iops{d.flag}")
        return Device(f"device{d.flag or '1'}", iops, price, capacity), f"--iops{d.flag}"
    assert d.profile is not None
    iops, source = profile_iops(d.profile, f"--profile{d.flag}")
    return Device(d.profile, iops, price, capacity), source

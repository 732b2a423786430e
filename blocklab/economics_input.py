"""Inputs of `blocklab economics`: IOPS lists and price files (pure parsing, no I/O)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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

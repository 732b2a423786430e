"""The text `blocklab economics` prints: inputs, units, formula, table and verdicts (pure)."""

from __future__ import annotations

import math

from blocklab.economics import rule as economics
from blocklab.economics.rule import GIB, Device, Row
from blocklab.units import fmt_number

PRICE_DIGITS = 6  # prices as given (129.99, 6,200), without float noise


def format_interval(seconds: float) -> str:
    """Seconds with a human reading: '300 s (5 min)', '5,250 s (1.46 h)'."""
    text = f"{fmt_number(seconds)} s"
    for limit, size, unit in ((3600, 60, "min"), (86400, 3600, "h"), (math.inf, 86400, "days")):
        if seconds < 60:
            return text
        if seconds < limit:
            return f"{text} ({fmt_number(seconds / size)} {unit})"
    raise AssertionError("unreachable")  # pragma: no cover


def _price(x: float) -> str:
    return fmt_number(x, PRICE_DIGITS)


def render(
    rows: list[Row],
    devices: list[Device],
    ram_price_per_gb: float,
    sources: dict[str, str],
) -> str:
    """The answer with its inputs, units, formula and decision rule (plain text)."""
    lines = ["Five-Minute Rule: break-even interval per page size", ""]
    lines += ["Formula:  " + economics.FORMULA, "Units:    " + economics.UNITS, "", "Inputs:"]
    lines.append(
        f"  RAM: {_price(ram_price_per_gb)} per GB ({_price(ram_price_per_gb / 1024)} per MB)"
    )
    for d in devices:
        cap = f", {fmt_number(d.capacity_bytes / GIB)} GB" if d.capacity_bytes else ""
        per_mb = f" ({_price(d.price_per_mb)} per MB)" if d.price_per_mb else ""
        iops = ", ".join(f"{s // 1024}k={fmt_number(v)}" for s, v in sorted(d.iops_by_size.items()))
        lines.append(f"  device {d.name}: {_price(d.price)} per drive{cap}{per_mb}; IOPS {iops}")
        lines.append(f"    IOPS from {sources[d.name]}")
    lines += ["", _table(rows), ""]
    for v in economics.verdicts(rows):
        lines.append(
            f"{v.tier}: favoured page size {v.shortest.page_bytes // 1024} kB "
            f"(shortest break-even interval, {format_interval(v.shortest.break_even_s)}); "
            f"scattered rows: {v.smallest.page_bytes // 1024} kB when kept in RAM, "
            f"{v.most_iops.page_bytes // 1024} kB when read from the device (most IOPS)"
        )
    lines += ["", economics.DECISION_RULE]
    return "\n".join(lines)


def _table(rows: list[Row]) -> str:
    head = ("tier", "page", "pages/MB", "IOPS", "price/drive", "upper price/MB", "break-even")
    body = [
        (
            r.tier,
            f"{r.page_bytes // 1024} kB",
            fmt_number(r.pages_per_mb),
            fmt_number(r.accesses_per_s),
            _price(r.lower_price),
            _price(r.upper_price_per_mb),
            format_interval(r.break_even_s),
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    out = []
    for i, cells in enumerate([head, *body]):
        out.append(
            "  ".join(
                c.ljust(w) if j == 0 else c.rjust(w)
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)

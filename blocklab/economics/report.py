"""The text `blocklab economics` prints: inputs, units, formula, table and verdicts (pure)."""

from __future__ import annotations

from blocklab.economics import rule as economics
from blocklab.economics.rule import GIB, Device, Row


def format_interval(seconds: float) -> str:
    """Seconds with a human reading: '300 s (5.0 min)'."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds:.4g} s ({seconds / 60:.1f} min)"
    if seconds < 86400:
        return f"{seconds:.4g} s ({seconds / 3600:.1f} h)"
    return f"{seconds:.4g} s ({seconds / 86400:.1f} days)"


def render(
    rows: list[Row],
    devices: list[Device],
    ram_price_per_gb: float,
    sources: dict[str, str],
) -> str:
    """The answer with its inputs, units, formula and decision rule (plain text)."""
    lines = ["Five-Minute Rule: break-even interval per page size", ""]
    lines += ["Formula:  " + economics.FORMULA, "Units:    " + economics.UNITS, "", "Inputs:"]
    lines.append(f"  RAM: {ram_price_per_gb:g} per GB ({ram_price_per_gb / 1024:.6g} per MB)")
    for d in devices:
        cap = f", {d.capacity_bytes / GIB:g} GB" if d.capacity_bytes else ""
        per_mb = f" ({d.price_per_mb:.6g} per MB)" if d.price_per_mb else ""
        iops = ", ".join(f"{s // 1024}k={v:,.0f}" for s, v in sorted(d.iops_by_size.items()))
        lines.append(f"  device {d.name}: {d.price:g} per drive{cap}{per_mb}; IOPS {iops}")
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
            f"{r.pages_per_mb:g}",
            f"{r.accesses_per_s:,.0f}",
            f"{r.lower_price:g}",
            f"{r.upper_price_per_mb:.6g}",
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

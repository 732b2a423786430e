"""CLI command: `economics`, the Five-Minute Rule per page size (blocklab.economics).

Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import click

from blocklab import economics
from blocklab.economics import GIB, Device, Row
from blocklab.economics_input import (
    PAGE_SIZES_KB,
    PRICE_KEYS,
    check_price,
    parse_iops,
    parse_page_sizes,
    prices_from_toml,
)
from blocklab.errors import UserError

PATTERNS = ("randread", "randwrite")
DEPTHS = (1, 32)


@dataclass(frozen=True)
class DeviceInput:
    """Where one device's IOPS come from: a stored profile or --iops numbers."""

    profile: str | None
    iops: str | None
    price: float | None
    capacity_gb: float | None
    flag: str  # "" for the first device, "2" for the second


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


def _load_prices(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise UserError(f"--prices: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"--prices: {path} is not valid TOML: {e}") from None
    return prices_from_toml(data, f"--prices {path}")


def _device(
    d: DeviceInput, prices: dict[str, float], pattern: str, depth: int, results: Path | None
) -> tuple[Device, str]:
    key = f"device{d.flag}"
    price = check_price(d.price, f"--{key}-price", positive=False)
    price = prices.get(f"{key}_price") if price is None else price
    if price is None:
        raise UserError(
            f"--{key}-price: the price of one device is needed (or {key}_price "
            "in the --prices file)"
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
    iops, source = profile_iops(d.profile, pattern, depth, results, f"--profile{d.flag}")
    return Device(d.profile, iops, price, capacity), source


def profile_iops(
    name: str, pattern: str, depth: int, results: Path | None, flag: str
) -> tuple[dict[int, float], str]:
    """IOPS by request bytes from a stored device profile (blocklab.device_store)."""
    import blocklab.device_store as device_store
    from blocklab.paths import Paths

    res = Paths.from_env(results=results).results
    iops = device_store.iops_by_size(res, name, pattern=pattern, iodepth=depth, flag=flag)
    return iops, f"stored profile {name!r}: {pattern}, queue depth {depth} ({res})"


@click.command("economics")
@click.option("--profile", help="Stored device profile (blocklab device list).")
@click.option("--iops", help="IOPS by request size instead of a profile: 4k=40000,8k=30000.")
@click.option("--device-price", type=float, help="Price of one device drive.")
@click.option(
    "--device-capacity-gb", type=float, help="Capacity in GB (needed for a device-device tier)."
)
@click.option("--profile2", help="A second device's stored profile (device-device tier).")
@click.option("--iops2", help="A second device's IOPS: 4k=200,8k=195.")
@click.option("--device2-price", type=float, help="Price of one second device.")
@click.option("--device2-capacity-gb", type=float, help="Capacity of the second device in GB.")
@click.option("--ram-price-per-gb", type=float, help="Price of 1 GB of RAM.")
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(path_type=Path),
    help=f"TOML file with {', '.join(PRICE_KEYS)} (flags win).",
)
@click.option(
    "--pattern",
    type=click.Choice(PATTERNS),
    default="randread",
    show_default=True,
    help="Which profile points count as accesses.",
)
@click.option(
    "--depth",
    type=click.Choice([str(d) for d in DEPTHS]),
    default="1",
    show_default=True,
    help="Queue depth of the profile points.",
)
@click.option(
    "--page-sizes",
    default=",".join(map(str, PAGE_SIZES_KB)),
    show_default=True,
    help="Page sizes in kB (those the device has IOPS for are shown).",
)
@click.option("--results", type=click.Path(path_type=Path), help="Results directory.")
def economics_command(
    profile: str | None,
    iops: str | None,
    device_price: float | None,
    device_capacity_gb: float | None,
    profile2: str | None,
    iops2: str | None,
    device2_price: float | None,
    device2_capacity_gb: float | None,
    ram_price_per_gb: float | None,
    prices_file: Path | None,
    pattern: str,
    depth: str,
    page_sizes: str,
    results: Path | None,
) -> None:
    """The Five-Minute Rule: how long a page of each size must stay in RAM (or on the
    faster device) before keeping it there is cheaper than reading it again."""
    prices = _load_prices(prices_file)
    ram = check_price(ram_price_per_gb, "--ram-price-per-gb", positive=True)
    ram = prices.get("ram_price_per_gb") if ram is None else ram
    if ram is None:
        raise UserError(
            "--ram-price-per-gb: the price of 1 GB of RAM is needed "
            "(or ram_price_per_gb in the --prices file)"
        )
    sizes = parse_page_sizes(page_sizes)
    inputs = [DeviceInput(profile, iops, device_price, device_capacity_gb, "")]
    if profile2 is not None or iops2 is not None:
        inputs.append(DeviceInput(profile2, iops2, device2_price, device2_capacity_gb, "2"))
    devices, sources = [], {}
    for d in inputs:
        dev, source = _device(d, prices, pattern, int(depth), results)
        devices.append(dev)
        sources[dev.name] = source
    if len(devices) == 2 and not economics.device_pairs(devices):
        raise UserError(
            "--device-capacity-gb / --device2-capacity-gb: a device-device tier "
            "needs both capacities"
        )
    rows = economics.table(ram, devices, sizes)
    if not rows:
        have = sorted({s // 1024 for d in devices for s in d.iops_by_size})
        raise UserError(f"--page-sizes: the devices have IOPS at {have} kB only")
    click.echo(render(rows, devices, ram, sources))


COMMANDS: list[click.Command] = [economics_command]

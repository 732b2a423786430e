"""CLI command: `economics`, the Five-Minute Rule per page size (blocklab.economics.rule).

Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click

from blocklab.commands.options import choice_option, results_option
from blocklab.economics import report as economics_report
from blocklab.economics import rule as economics
from blocklab.economics.inputs import (
    PAGE_SIZES_KB,
    PRICE_KEYS,
    DeviceInput,
    parse_page_sizes,
    prices_from_toml,
    required_price,
    resolve_device,
)
from blocklab.errors import UserError

PATTERNS = ("randread", "randwrite")
DEPTHS = (1, 32)


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


def profile_iops(
    name: str, pattern: str, depth: int, results: str | None, flag: str
) -> tuple[dict[int, float], str]:
    """IOPS by request bytes from a stored device profile (blocklab.economics.device_store)."""
    import blocklab.economics.device_store as device_store
    from blocklab.store.factory import results_spec

    res, _ = results_spec(results)
    iops = device_store.iops_by_size(res, name, pattern=pattern, iodepth=depth, flag=flag)
    return iops, f"stored profile {name!r}: {pattern}, queue depth {depth} ({res})"


@click.command("economics")
@click.option("--profile", help="stored device profile (blocklab device list)")
@click.option("--iops", help="IOPS by request size instead of a profile: 4k=40000,8k=30000")
@click.option("--device-price", type=float, help="price of one device drive")
@click.option(
    "--device-capacity-gb", type=float, help="capacity in GB (needed for a device-device tier)"
)
@click.option("--profile2", help="a second device's stored profile (device-device tier)")
@click.option("--iops2", help="a second device's IOPS: 4k=200,8k=195")
@click.option("--device2-price", type=float, help="price of one second device")
@click.option("--device2-capacity-gb", type=float, help="capacity of the second device in GB")
@click.option("--ram-price-per-gb", type=float, help="price of 1 GB of RAM")
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(path_type=Path),
    help=f"TOML file with {', '.join(PRICE_KEYS)} (flags win)",
)
@choice_option("--pattern", PATTERNS, "randread", "which profile points count as accesses")
@choice_option("--depth", [str(d) for d in DEPTHS], "1", "queue depth of the profile points")
@click.option(
    "--page-sizes",
    default=",".join(map(str, PAGE_SIZES_KB)),
    show_default=True,
    help="page sizes in kB (those the device has IOPS for are shown)",
)
@results_option
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
    results: str | None,
) -> None:
    """The Five-Minute Rule: how long a page of each size must stay in RAM (or on the
    faster device) before keeping it there is cheaper than reading it again."""
    prices = _load_prices(prices_file)
    ram = required_price(
        ram_price_per_gb,
        prices,
        key="ram_price_per_gb",
        flag="--ram-price-per-gb",
        what="1 GB of RAM",
        positive=True,
    )
    sizes = parse_page_sizes(page_sizes)
    inputs = [DeviceInput(profile, iops, device_price, device_capacity_gb, "")]
    if profile2 is not None or iops2 is not None:
        inputs.append(DeviceInput(profile2, iops2, device2_price, device2_capacity_gb, "2"))
    devices, sources = [], {}
    for d in inputs:
        dev, source = resolve_device(
            d, prices, lambda name, flag: profile_iops(name, pattern, int(depth), results, flag)
        )
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
    click.echo(economics_report.render(rows, devices, ram, sources))


COMMANDS: list[click.Command] = [economics_command]

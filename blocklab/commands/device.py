"""CLI commands: `device profile`, `device list`, `device show` (blocklab.economics.device_profile).

Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import statistics
import time
from datetime import datetime
from pathlib import Path

import click

from blocklab.commands.options import choice_option, results_option
from blocklab.economics import device_profile, device_store, fio
from blocklab.economics.device_profile import Plan, Target
from blocklab.errors import UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.store import RESULTS_DB_NAME
from blocklab.store.factory import describe, is_postgres, open_results, open_store, results_spec
from blocklab.units import fmt_bytes, fmt_number

FS_KINDS = ("ext4", "xfs", "btrfs")
FS_BLOCK_SIZES_B = tuple(512 * 2**i for i in range(8))  # 512 B .. 64 kB (xfs's range)


class FsBlockSize(click.ParamType):
    """A file-system block size in kB like --block-size ("4", "4k", "4kB"), or in bytes
    with the unit written ("512B", "4096B"); in bytes. A bare number that only makes sense
    as bytes (4096) is refused: it is ambiguous since this flag once took bytes."""

    name = "KB"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        low = text.lower().removesuffix("kb").removesuffix("k")
        in_bytes = text.upper().endswith("B") and not text.lower().endswith("kb")
        number = text[:-1] if in_bytes else low
        if not number.strip().isdigit():
            self.fail(f"'{text}' is not a block size (examples: 4, 4k, 512B)", param, ctx)
        size = int(number) if in_bytes else int(number) * 1024
        if size in FS_BLOCK_SIZES_B:
            return size
        allowed = "kB: 1, 2, 4, 8, 16, 32, 64 (or 512B)"
        if not in_bytes and int(number) in FS_BLOCK_SIZES_B:
            n = int(number)
            meant = (f"{n // 1024} or " if n >= 1024 else "") + f"{n}B"
            self.fail(
                f"'{text}' is read as kB (as --block-size is): for {n} bytes write {meant}",
                param,
                ctx,
            )
        self.fail(f"'{text}' is not a file-system block size; allowed {allowed}", param, ctx)


def point_label(p: fio.Point) -> str:
    return f"{p.pattern} {p.request_bytes // 1024}k qd{p.iodepth}"


class LineProgress(device_profile.Listener):
    """One line per finished point with an ETA from the points measured so far."""

    def __init__(self) -> None:
        self.total, self.done, self.durations, self.t0 = 0, 0, list[float](), 0.0

    def begin(self, total: int, point_s: float) -> None:
        self.total, self.point_s = total, point_s
        click.echo(
            f"{total} points of {fmt_number(point_s)} s each: at least "
            f"{fmt_number(total * point_s)} s"
        )

    def point_started(self, point: fio.Point) -> None:
        self.t0 = time.monotonic()

    def point_finished(self, point: fio.Point, result: fio.Result | None, reason: str) -> None:
        self.done += 1
        self.durations.append(time.monotonic() - self.t0)
        eta = statistics.median(self.durations) * (self.total - self.done)
        what = reason and f"FAILED: {reason}"
        if result is not None:
            p99 = "" if result.lat_p99_us is None else f", p99 {fmt_number(result.lat_p99_us)} us"
            mb_s = fmt_number(result.bw_bytes_per_s / 1e6)
            what = f"{fmt_number(result.iops)} IOPS, {mb_s} MB/s{p99}"
        click.echo(
            f"[{self.done}/{self.total}] {point_label(point)}: {what} "
            f"(ETA {int(eta // 60)}m{int(eta % 60):02d}s)"
        )


def _target(
    path: Path | None,
    device: str | None,
    yes: bool,
    experiment: Path | None,
    storage: str | None,
    fs: str,
    fs_block_size: int | None,
    name: str,
    size_bytes: int,
) -> Target:
    given = [
        f
        for f, v in (("--path", path), ("--device", device), ("--experiment", experiment))
        if v is not None
    ]
    if len(given) > 1:
        raise UserError(f"{' / '.join(given)}: give one storage, not {len(given)}")
    if storage is not None and experiment is None:
        raise UserError("--storage: names a storage of --experiment FILE; give the file too")
    if path is not None:
        return device_profile.dir_target(path)
    if device is not None:
        return device_profile.device_target(device, yes)
    paths = Paths.from_env()
    if experiment is not None:
        req = device_profile.pick_storage(device_profile.storages_in(experiment), storage)
    else:
        req = StorageRequest(kind=fs, block_size=fs_block_size)  # type: ignore[arg-type]
    return device_profile.storage_target(req, name=name, paths=paths, size_bytes=size_bytes)


@click.group("device")
def device() -> None:
    """Device profiles: fio by request size and queue depth on a storage."""


@device.command("profile")
@click.option("--name", help="profile name (default: the storage kind and the time)")
@click.option("--path", type=click.Path(path_type=Path), help="an existing directory to test")
@click.option("--device", "device_path", help="a whole block device (fio writes to it: --yes)")
@click.option("--yes", is_flag=True, help="confirm that fio may overwrite --device")
@click.option(
    "--experiment",
    type=click.Path(path_type=Path),
    help="use a storage table of this experiment file",
)
@click.option("--storage", help="which of the experiment's storages (its label)")
@choice_option(
    "--fs", FS_KINDS, "ext4", "without --path/--device/--experiment: a loop-device file system"
)
@click.option(
    "--fs-block-size",
    type=FsBlockSize(),
    help="file-system block size in kB, like --block-size (4 or 4k; 512B in bytes) (--fs)",
)
@click.option(
    "--patterns",
    default=",".join(fio.PATTERNS),
    show_default=True,
    help="fio access patterns, comma-separated",
)
@click.option(
    "--sizes",
    default=",".join(map(str, fio.REQUEST_SIZES_KB)),
    show_default=True,
    help="request sizes in kB",
)
@click.option(
    "--depths", default=",".join(map(str, fio.DEPTHS)), show_default=True, help="queue depths"
)
@click.option("--runtime", type=float, default=5, show_default=True, help="seconds per point")
@click.option("--size", default="256M", show_default=True, help="fio's file (or device region)")
@choice_option("--ioengine", fio.IOENGINES, "libaio", "fio's I/O engine")
@click.option("--replace", is_flag=True, help="replace a stored profile of the same name")
@results_option
def profile(
    name: str | None,
    path: Path | None,
    device_path: str | None,
    yes: bool,
    experiment: Path | None,
    storage: str | None,
    fs: str,
    fs_block_size: int | None,
    patterns: str,
    sizes: str,
    depths: str,
    runtime: float,
    size: str,
    ioengine: str,
    replace: bool,
    results: str | None,
) -> None:
    """Measure IOPS, bandwidth and latency percentiles with fio (direct I/O) at each
    pattern x request size x queue depth, and store them in the results database."""
    points = fio.grid(
        fio.parse_list(patterns, "--patterns", fio.PATTERNS),
        fio.parse_list(sizes, "--sizes", fio.REQUEST_SIZES_KB, "k"),
        fio.parse_list(depths, "--depths", fio.DEPTHS),
    )
    device_profile.check_fio()
    size_bytes = device_profile.parse_size(size)
    kind = "profile" if (path or device_path or experiment) else fs
    name = name or f"{kind}-{datetime.now():%Y%m%d-%H%M%S}"
    plan = Plan(name, points, device_profile.check_runtime(runtime), size_bytes, ioengine)
    res, _ = results_spec(results)
    if not replace and (is_postgres(res) or (Path(res) / RESULTS_DB_NAME).exists()):
        with open_store(res) as db:
            device_store.check_name_free(db, name)
    target = _target(
        path, device_path, yes, experiment, storage, fs, fs_block_size, name, size_bytes
    )
    with device_profile.released(target):
        device_profile.check_block_target(target, size_bytes)
        device_profile.run_profile(plan, target, res, LineProgress(), replace=replace)
    click.echo(f"stored device profile {name!r} in {describe(res)} (blocklab device show {name})")


@device.command("list")
@results_option
def list_profiles(results: str | None) -> None:
    """Stored device profiles."""
    with open_results(results, create=False) as db:
        rows = device_store.profiles(db)
    if not rows:
        click.echo("no device profiles stored (blocklab device profile)")
    for r in rows:
        failed = f", {r['failed_points']} failed" if r["failed_points"] else ""
        click.echo(
            f"{r['name']}  {r['created_at']}  {r['state']}  {r['points']} points{failed}"
            f"  {fmt_number(r['runtime_s'])} s/point  {r['ioengine']}"
        )


@device.command("show")
@click.argument("name")
@results_option
def show(name: str, results: str | None) -> None:
    """One profile's points: IOPS, bandwidth and latency percentiles."""
    with open_results(results, create=False) as db:
        head = device_store.profile(db, name)
        rows = device_store.points(db, head["id"])
    click.echo(
        f"{name}: {head['state']}, {head['fio_version']} {head['ioengine']}, "
        f"{fmt_number(head['runtime_s'])} s per point, {fmt_bytes(head['size_bytes'])}"
    )
    click.echo(
        f"{'pattern':<10} {'size':>5} {'qd':>3} {'IOPS':>10} {'MB/s':>9} "
        f"{'p50 us':>9} {'p99 us':>9} {'p99.9 us':>9}"
    )
    for r in rows:
        if r["status"] != "ok":
            click.echo(
                f"{r['pattern']:<10} {r['request_bytes'] // 1024:>4}k {r['iodepth']:>3} "
                f"FAILED: {r['reason']}"
            )
            continue
        click.echo(
            f"{r['pattern']:<10} {r['request_bytes'] // 1024:>4}k {r['iodepth']:>3} "
            f"{fmt_number(r['iops']):>10} {fmt_number(r['bw_bytes_per_s'] / 1e6):>9} "
            f"{_us(r['lat_p50_us'])} {_us(r['lat_p99_us'])} {_us(r['lat_p999_us'])}"
        )


def _us(v: float | None) -> str:
    return f"{'-':>9}" if v is None else f"{fmt_number(v):>9}"


COMMANDS: list[click.Command] = [device]

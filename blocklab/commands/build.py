"""CLI commands: `build` (one cached, verified build) and `builds` (list and prune the cache).

Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from blocklab import proc
from blocklab.console import console
from blocklab.errors import UserError
from blocklab.model import BLOCK_SIZES_KB, SEGSIZES_GB, WAL_BLOCK_SIZES_KB, BuildRequest
from blocklab.paths import Paths
from blocklab.postgres.installation import Installation
from blocklab.units import fmt_bytes

# BuildRequest field -> (flag, allowed values) for messages about bad input.
FLAGS = {
    "block_size_kb": ("--block-size", f"one of {', '.join(map(str, BLOCK_SIZES_KB))} (kB)"),
    "wal_block_size_kb": (
        "--wal-block-size",
        f"a power of two from 1 to 64: one of {', '.join(map(str, WAL_BLOCK_SIZES_KB))} (kB)",
    ),
    "segsize_gb": ("--segsize-gb", f"one of {', '.join(map(str, SEGSIZES_GB))} (GB)"),
    "layout_seed": ("--layout-seed", "a whole number from 1 to 2147483647"),
}


def request_from_options(**fields: Any) -> BuildRequest:
    """A BuildRequest, or a UserError naming the flag and its allowed values."""
    try:
        return BuildRequest(**fields)
    except ValidationError as e:
        messages = []
        for err in e.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            flag, allowed = FLAGS.get(field, (f"--{field.replace('_', '-')}", err["msg"]))
            messages.append(f"{flag}: must be {allowed} (got {err.get('input')!r})")
        raise UserError("; ".join(messages)) from None


def _progress(message: str) -> None:
    click.echo(message, err=True)


@click.command("build")
@click.option("--pg", default="18", show_default=True, help="PostgreSQL major version")
@click.option("--block-size", "block_size_kb", type=int, default=8, show_default=True,
              help="data page size in kB: 1, 2, 4, 8, 16 or 32")  # fmt: skip
@click.option("--wal-block-size", "wal_block_size_kb", type=int, default=8, show_default=True,
              help="WAL block size in kB: 1, 2, 4, 8, 16, 32 or 64")  # fmt: skip
@click.option("--segsize-gb", type=int, default=1, show_default=True,
              help="relation segment size in GB (--with-segsize)")  # fmt: skip
@click.option("--source", default="debian", show_default=True,
              help="'debian', a tarball path or a source tree path")  # fmt: skip
@click.option("--patch", "patches", multiple=True, help="patch file (-p1), applied in order")
@click.option("--configure-arg", "configure_args", multiple=True,
              help="extra argument for configure (repeatable)")  # fmt: skip
@click.option("--layout-seed", type=int, default=None,
              help="a layout variant: the backend linked in an order drawn from this seed "
                   "(same geometry and flags, code at other addresses)")  # fmt: skip
def build_command(
    pg: str,
    block_size_kb: int,
    wal_block_size_kb: int,
    segsize_gb: int,
    source: str,
    patches: tuple[str, ...],
    configure_args: tuple[str, ...],
    layout_seed: int | None,
) -> None:
    """Build PostgreSQL at a page and WAL block size (cached by key, verified)."""
    from blocklab.postgres import build

    if source != "debian":
        source = str(Path(source).absolute())
    req = request_from_options(
        pg=pg,
        source=source,
        patches=tuple(str(Path(p).absolute()) for p in patches),
        block_size_kb=block_size_kb,
        wal_block_size_kb=wal_block_size_kb,
        segsize_gb=segsize_gb,
        configure_args=configure_args,
        layout_seed=layout_seed,
    )
    build.validate(req)
    paths = Paths.from_env()
    from blocklab.postgres.cluster import open_home

    open_home(paths, _progress)  # before building: the check runs initdb as the server user
    with proc.sigterm_as_interrupt():  # a TERMinated build ends its make too
        inst = build.ensure_build(req, paths, log=_progress)
    click.echo(f"prefix  {inst.prefix}")
    click.echo(f"key     {inst.key}")
    click.echo(f"version {inst.version}")
    click.echo(
        f"geometry: {inst.block_size_bytes} B pages, {inst.wal_block_size_bytes} B WAL blocks, "
        f"{inst.segsize_gb} GB segments"
    )
    click.echo(f"features {features_label(inst)}")
    click.echo(f"layout  {layout_label(inst)}")


def features_label(inst: Installation) -> str:
    """The optional libraries configured in ("lz4 zstd liburing"); "none" for a build
    made without them (before blocklab configured them), "?" when nothing says."""
    if inst.features is None:
        return "?"
    return " ".join(inst.features) or "none"


def layout_label(inst: Installation) -> str:
    """ "link order seed N" for a layout variant, "ordinary link" otherwise."""
    seed = inst.manifest.get("layout_seed")
    return f"link order seed {seed}" if seed is not None else "ordinary link"


def _builds_table(builds: list[Installation]) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title=f"{len(builds)} cached build(s)", box=box.SIMPLE_HEAD)
    table.add_column("key", no_wrap=True)
    table.add_column("version")
    table.add_column("page/WAL/seg", no_wrap=True)
    table.add_column("patches")
    table.add_column("features")
    table.add_column("layout")
    table.add_column("size", justify="right")
    table.add_column("built (UTC)")
    for b in builds:
        patches = [Path(p["path"]).name for p in b.manifest.get("patches", [])]
        table.add_row(
            b.key,
            b.version,
            f"{b.block_size_bytes // 1024}k/{b.wal_block_size_bytes // 1024}k/{b.segsize_gb}G",
            ", ".join(patches) or "-",
            features_label(b),
            layout_label(b),
            fmt_bytes(int(b.manifest.get("size_bytes", 0))),
            str(b.manifest.get("created_at", ""))[:16].replace("T", " "),
        )
    console().print(table)


def stored_build_requests(results: str | None) -> tuple[list[dict[str, Any]], str]:
    """Build requests of every stored variant, and all run provenance as one text."""
    from blocklab.store.factory import open_results

    with open_results(results, create=False) as rdb:
        variants, prov = rdb.variant_jsons(), rdb.provenance_jsons()
    requests = []
    for variant_json in variants:
        raw = json.loads(variant_json).get("build", {})
        try:
            requests.append(BuildRequest(**raw).model_dump(mode="json"))
        except ValidationError:  # written by another blocklab version: compare as stored
            requests.append(raw)
    return requests, "\n".join(prov)


def unused_builds(
    builds: list[Installation], requests: list[dict[str, Any]], provenance: str
) -> list[Installation]:
    """Builds that no stored variant asks for and no stored run names. A build whose
    manifest has no request is kept (we cannot tell)."""
    unused = []
    for b in builds:
        req = b.manifest.get("request")
        if req is None or req in requests or b.key in provenance:
            continue
        unused.append(b)
    return unused


def blind_spot_note(results: str | None) -> str:
    """What --prune cannot see: only one results database's experiments count."""
    from blocklab.store.factory import describe, results_spec

    seen = describe(results_spec(results)[0])
    return (
        f"--prune counts the experiments of {seen} only: a build that an experiment of "
        "another results directory or a fleet's PostgreSQL database uses looks unused here "
        "(it would be rebuilt, about 3 min, when that experiment runs again); check with "
        "--dry-run, and give --results for the database whose builds you mean to keep"
    )


@click.command("builds")
@click.option("--prune", is_flag=True, help="remove builds that no stored experiment uses")
@click.option("--results", default=None,
              help="results directory or PostgreSQL URI whose experiments use builds")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="with --prune: only say what would be removed")
def builds_command(prune: bool, results: str | None, dry_run: bool) -> None:
    """List cached builds; with --prune, remove those no experiment uses."""
    from blocklab.postgres import build

    if (results is not None or dry_run) and not prune:
        raise UserError("--results and --dry-run go with --prune")
    builds = build.cached_builds(Paths.from_env())
    if not prune:
        _builds_table(builds)
        return
    requests, provenance = stored_build_requests(results)
    doomed = unused_builds(builds, requests, provenance)
    click.echo(blind_spot_note(results), err=True)
    for b in doomed:
        click.echo(f"{'would remove' if dry_run else 'removing'} {b.key} ({b.prefix})")
        if not dry_run:
            build.remove_build(b.prefix)
    kept = len(builds) - len(doomed)
    click.echo(f"{len(doomed)} unused build(s) {'found' if dry_run else 'removed'}, {kept} kept")


COMMANDS: list[click.Command] = [build_command, builds_command]

"""CLI commands: selftest. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.errors import UserError
from blocklab.postgres.installation import Installation
from blocklab.units import fmt_number, fmt_p_value


@click.group("selftest")
def selftest() -> None:
    """Checks of blocklab's own measurement machinery."""


def _installation(pg: int | None, prefix: Path | None) -> Installation:
    from blocklab.postgres.installation import MANIFEST_NAME

    if pg is not None and prefix is not None:
        raise UserError("give either --pg (Debian's packaged binaries) or --prefix, not both")
    if prefix is not None:
        if not (prefix / MANIFEST_NAME).is_file():
            raise UserError(
                f"--prefix: {prefix} is not a blocklab build (no {MANIFEST_NAME}); "
                "give a directory under the build cache (see `blocklab builds`)"
            )
        return Installation.from_manifest(prefix)
    inst = Installation.system(pg or 15)
    if not inst.bin("postgres").exists():
        raise UserError(
            f"--pg: no PostgreSQL {pg or 15} binaries at {inst.prefix}; "
            "give an installed Debian major (e.g. 15) or --prefix DIR of a build"
        )
    return inst


@selftest.command("overhead")
@click.option(
    "--pg", type=int, default=None, help="the Debian-packaged PostgreSQL major (default 15)"
)
@click.option("--prefix", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="a blocklab build directory (has blocklab-build.json)")  # fmt: skip
@click.option("--pairs", type=click.IntRange(2, 1000), default=20, show_default=True,
              help="bare/instrumented pairs (order alternates between pairs)")  # fmt: skip
@click.option("--duration", "duration_s", type=click.IntRange(1, 3600), default=5,
              show_default=True, help="seconds per pgbench run")  # fmt: skip
@click.option("--scale", type=click.IntRange(1, 10000), default=10, show_default=True,
              help="pgbench scale factor")  # fmt: skip
@click.option("--clients", type=click.IntRange(1, 256), default=2, show_default=True,
              help="pgbench clients (and threads)")  # fmt: skip
@click.option("--interval", "interval_s", type=click.FloatRange(0.01, 60), default=1.0,
              show_default=True,
              help="sampler interval in seconds (smaller: more cost)")  # fmt: skip
def overhead(
    pg: int | None,
    prefix: Path | None,
    pairs: int,
    duration_s: int,
    scale: int,
    clients: int,
    interval_s: float,
) -> None:
    """tps instrumented / tps bare, interleaved on one server, with a 95 % CI.

    The instrumented arm runs everything the probes do while pgbench runs (snapshots,
    the sampler, the log parse); the after-run pgstattuple pass is left out. Many short
    pairs give a tighter CI than a few long ones on a noisy machine.
    """
    from blocklab.execution.overhead import TARGET_RATIO, measure_overhead
    from blocklab.paths import Paths

    inst = _installation(pg, prefix.absolute() if prefix else None)
    res = measure_overhead(
        inst,
        Paths.from_env(),
        pairs=pairs,
        duration_s=duration_s,
        scale=scale,
        clients=clients,
        interval_s=interval_s,
        log=lambda m: click.echo(m, err=True),
    )
    c = res.comparison
    assert c is not None
    click.echo(
        f"PostgreSQL {inst.version} ({inst.key}), {pairs} pairs x {duration_s} s, "
        f"{fmt_number(clients)} clients, sampler every {fmt_number(interval_s)} s"
    )
    for line in ratio_lines(c.estimate, c.ci95_low, c.ci95_high, c.p_value):
        click.echo(line)
    click.echo(f"samples per instrumented run: {res.samples_per_run}")
    click.echo(f"target >= {TARGET_RATIO}: {res.verdict()}")
    if c.note:
        click.echo(f"note: {c.note}")


def ratio_lines(
    estimate: float | None, low: float | None, high: float | None, p_value: float | None
) -> list[str]:
    """The ratio, its CI and p in the terminal's number style (blocklab.units)."""
    ci = "n/a" if low is None or high is None else f"[{fmt_number(low, 4)}, {fmt_number(high, 4)}]"
    return [
        "instrumented/bare tps ratio (geometric mean): "
        + ("n/a" if estimate is None else fmt_number(estimate, 4)),
        f"95 % CI of the ratio: {ci}  p={fmt_p_value(p_value)}",
    ]


COMMANDS: list[click.Command] = [selftest]

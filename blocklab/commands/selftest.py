"""CLI commands: selftest. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from blocklab.errors import UserError
from blocklab.postgres.installation import Installation
from blocklab.units import fmt_number, fmt_p_value

if TYPE_CHECKING:
    from blocklab.analysis.slices import CpuShare
    from blocklab.execution.overhead import OverheadResult
    from blocklab.execution.overhead_slices import SliceResult


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
@click.option("--design", type=click.Choice(["slices", "pairs"]), default="slices",
              show_default=True,
              help="slices: each probe on/off in ABBA blocks of one pgbench run; "
              "pairs: whole bare and instrumented runs")  # fmt: skip
@click.option("--probe", "probes", multiple=True,
              type=click.Choice(["sampler", "cpu_log", "both"]),
              help="slices: the probes to measure (repeatable; default sampler and cpu_log, "
              "each on its own); both: the two on together, as a run with a placement has "
              "them, the whole set's cost")  # fmt: skip
@click.option("--blocks", type=click.IntRange(2, 1000), default=12, show_default=True,
              help="slices: ABBA blocks per probe")  # fmt: skip
@click.option("--slice", "slice_s", type=click.IntRange(1, 600), default=3, show_default=True,
              help="slices: seconds per slice")  # fmt: skip
@click.option("--pairs", type=click.IntRange(2, 1000), default=20, show_default=True,
              help="pairs: bare/instrumented pairs (order alternates)")  # fmt: skip
@click.option("--duration", "duration_s", type=click.IntRange(1, 3600), default=5,
              show_default=True, help="pairs: seconds per pgbench run")  # fmt: skip
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
    design: str,
    probes: tuple[str, ...],
    blocks: int,
    slice_s: int,
    pairs: int,
    duration_s: int,
    scale: int,
    clients: int,
    interval_s: float,
) -> None:
    """What the probes cost in tps, on one server, with a 95 % CI.

    slices (default): one pgbench run cut into slices; each probe is switched on and off
    in ABBA/BAAB blocks, so that the machine's drift cancels; a ratio per probe, and
    under it the probe's share of the measured system's CPU (what it adds in its on
    slices, on minus off, over the server's and blocklab's CPU), whose interval is much
    tighter than the ratio's on a noisy machine. The probes of a run's begin and end
    (pg_stat_io, the CPU account, the space pass) run outside the workload's window:
    their seconds per run are printed.
    pairs: whole bare and instrumented pgbench runs, interleaved; the after-run
    pgstattuple pass is left out. Many short pairs give a tighter CI than a few long ones.
    """
    from blocklab.paths import Paths

    inst = _installation(pg, prefix.absolute() if prefix else None)

    def echo_err(message: str) -> None:
        click.echo(message, err=True)

    if design == "slices":
        from blocklab.execution.overhead_slices import PROBES, measure_slices

        res = measure_slices(inst, Paths.from_env(), probes=probes or PROBES,
                             blocks_per_probe=blocks, slice_s=slice_s, scale=scale,
                             clients=clients, interval_s=interval_s, log=echo_err)  # fmt: skip
        click.echo(
            f"PostgreSQL {inst.version} ({inst.key}), one pgbench run: {len(res.plan)} "
            f"slices of {slice_s} s in ABBA blocks, {fmt_number(clients)} clients, "
            f"sampler every {fmt_number(interval_s)} s"
        )
        for line in slice_lines(res):
            click.echo(line)
        load = ", ".join(fmt_number(x, 2) for x in os.getloadavg())
        click.echo(f"load average (1, 5, 15 min) at the end: {load}")
        return
    from blocklab.execution.overhead import measure_overhead

    pairs_res = measure_overhead(inst, Paths.from_env(), pairs=pairs, duration_s=duration_s,
                           scale=scale, clients=clients, interval_s=interval_s,
                           log=echo_err)  # fmt: skip
    click.echo(
        f"PostgreSQL {inst.version} ({inst.key}), {pairs} pairs x {duration_s} s, "
        f"{fmt_number(clients)} clients, sampler every {fmt_number(interval_s)} s"
    )
    _pairs_report(pairs_res)


def _pairs_report(res: OverheadResult) -> None:
    from blocklab.execution.overhead import TARGET_RATIO

    c = res.comparison
    assert c is not None
    for line in ratio_lines(c.estimate, c.ci95_low, c.ci95_high, c.p_value):
        click.echo(line)
    click.echo(f"samples per instrumented run: {res.samples_per_run}")
    click.echo(f"target >= {TARGET_RATIO}: {res.verdict()}")
    if c.note:
        click.echo(f"note: {c.note}")


def slice_lines(res: SliceResult) -> list[str]:
    """The per-probe table of the slices design, then the probes outside the window."""
    from blocklab.execution.overhead import TARGET_RATIO, verdict

    lines = [f"{'probe':<10} {'tps on/off':>10}  {'95 % CI':<18} {'half-width':>10} {'blocks':>6}"]
    for probe, c in res.ratios.items():
        ci = "n/a"
        half = "n/a"
        if c.ci95_low is not None and c.ci95_high is not None:
            ci = f"[{fmt_number(c.ci95_low, 4)}, {fmt_number(c.ci95_high, 4)}]"
            half = f"{fmt_number((c.ci95_high - c.ci95_low) / 2 * 100, 2)} %"
        est = "n/a" if c.estimate is None else fmt_number(c.estimate, 4)
        lines.append(f"{probe:<10} {est:>10}  {ci:<18} {half:>10} {c.n_pairs:>6}")
        lines.append(f"  target >= {TARGET_RATIO}: {verdict(c)}")
        if probe in res.shares:
            lines.append(f"  {share_line(res.shares[probe])}")
    outside = ", ".join(f"{k} {fmt_number(v, 3)} s" for k, v in res.end_probe_s.items())
    lines.append(f"outside the window (once per run, no tps cost): {outside}")
    lines.append(f"longest switch delay: {fmt_number(res.max_switch_delay_s, 3)} s")
    return lines


def share_line(share: CpuShare) -> str:
    """'CPU share x % (95 % CI a to b)' of one probe, with what it adds per slice."""
    if share.share_pct is None:
        return "CPU share n/a (no block with CPU figures)"
    ci = "no CI"
    if share.ci95_low_pct is not None and share.ci95_high_pct is not None:
        ci = f"95 % CI {fmt_number(share.ci95_low_pct, 3)} to {fmt_number(share.ci95_high_pct, 3)}"
    added = share.added_cpu_s_per_slice or 0.0
    return (
        f"CPU share {fmt_number(share.share_pct, 3)} % ({ci}), "
        f"{fmt_number(added, 3)} cpu_s per slice, {share.n_blocks} blocks; "
        f"{_share_verdict(share)}"
    )


def _share_verdict(share: CpuShare) -> str:
    """Whether a CPU share's CI meets the tps target (1 - TARGET_RATIO, i.e. 1 %)."""
    from blocklab.execution.overhead import TARGET_RATIO

    target_pct = round((1 - TARGET_RATIO) * 100, 6)
    if share.ci95_low_pct is None or share.ci95_high_pct is None:
        return "too few blocks for a CI"
    if share.ci95_high_pct <= target_pct:
        return f"target met: the whole CI is <= {fmt_number(target_pct)} %"
    if share.ci95_low_pct > target_pct:
        return f"target missed: the whole CI is above {fmt_number(target_pct)} %"
    return f"inconclusive: the CI straddles {fmt_number(target_pct)} %"


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

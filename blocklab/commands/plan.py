"""CLI commands: plan. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from blocklab import experiment_file as spec
from blocklab.commands import plan_view
from blocklab.commands.options import (
    RunFlags,
    allow_options,
    check_trust,
    granted,
    results_option,
    run_options,
)
from blocklab.console import console, user_text
from blocklab.errors import BlocklabError, UserError
from blocklab.execution import cycles, preflight
from blocklab.execution import plan as planning
from blocklab.execution.plan import Plan, format_duration
from blocklab.model import BuildRequest
from blocklab.paths import Paths
from blocklab.postgres import settings_catalogue
from blocklab.postgres.installation import Installation
from blocklab.postgres.settings_policy import Catalogue, Conversion
from blocklab.units import fmt_number

if TYPE_CHECKING:
    from blocklab.analysis.assurance import TargetPlan

CatalogueOf = Callable[[BuildRequest], Catalogue | None]


def _request_key(req: BuildRequest | dict[str, Any] | None) -> str:
    data = req.model_dump(mode="json") if isinstance(req, BuildRequest) else req
    return json.dumps(data, sort_keys=True)


def cached_installations() -> dict[str, Installation]:
    """The builds the cache holds, by the request stored in each manifest; a build made
    before blocklab configured the optional libraries (lz4, zstd, liburing) is not one
    a run would use (blocklab.postgres.build.is_current)."""
    from blocklab.postgres.build import cached_builds, is_current

    builds = [i for i in cached_builds(Paths.from_env()) if is_current(i)]
    return {_request_key(i.manifest.get("request")): i for i in builds}


def cache_lookup() -> Callable[[BuildRequest], bool]:
    """Which builds the cache already holds (by the request stored in each manifest)."""
    installs = cached_installations()
    return lambda req: _request_key(req) in installs


def catalogue_lookup(installs: dict[str, Installation]) -> CatalogueOf:
    """The settings catalogue of a cached build (None for a build not made yet, or
    one whose catalogue cannot be read)."""
    paths = Paths.from_env()

    @functools.cache
    def of(key: str) -> Catalogue | None:
        inst = installs.get(key)
        if inst is None:
            return None
        try:
            return settings_catalogue.load(inst, paths)
        except (BlocklabError, OSError):
            return None

    return lambda req: of(_request_key(req))


def check_known_settings(exp: spec.Experiment, catalogue_of: CatalogueOf) -> None:
    """Every variant's settings against its build's own catalogue, where the build is
    cached (blocklab.postgres.settings_check): a UserError after the file's name."""
    from blocklab.postgres import settings_check

    for v in exp.variants():
        cat = catalogue_of(v.build)
        if cat is None:
            continue
        try:
            settings_check.check(
                dict(v.settings), cat, f"PostgreSQL {cat.version or v.build.pg}, build {cat.key}"
            )
        except UserError as e:
            raise UserError(f"{exp.source}: {e}" if exp.source else str(e)) from e


@click.command("plan")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@results_option
@run_options
@click.option(
    "--pilot",
    type=int,
    help="run a pilot of N rounds (stored as EXPERIMENT-pilot) to measure the noise",
)
@allow_options
def plan_command(
    file: Path | None,
    results: str | None,
    rounds: int | None,
    duration: int | None,
    scale: int | None,
    clients: int | None,
    until_ci: float | None,
    max_rounds: int | None,
    time_budget: str | None,
    cycles: int | None,
    slices: int | None,
    pilot: int | None,
    allow: tuple[str, ...],
    allow_command_settings: bool,
) -> None:
    """Show what `blocklab run FILE` with the same flags would do: variants, builds,
    datasets, runs, the order of the first round, an ETA, and what the planned rounds can
    resolve (the noise from stored runs of the experiment it is stored as, or of its
    variants, or from --pilot). Builds and runs nothing without --pilot. Without FILE: the
    demo. --until-ci also prints the rounds and time that precision needs."""
    flags = RunFlags(
        rounds, duration, scale, clients, until_ci, max_rounds, time_budget, cycles, slices
    )
    flags.check()
    if pilot is not None and not 2 <= pilot <= 50:
        raise UserError(f"--pilot: rounds between 2 and 50 (got {pilot})")
    grant = granted(allow, allow_command_settings)
    loaded = flags.load(file)
    exp = loaded.model_copy(update=flags.stopping(loaded))  # what `run` would stop by
    check_trust(exp, grant, file, "blocklab run")
    paths = Paths.from_env()
    preflight.check_machine(exp, paths)
    from blocklab.store.factory import check_results

    check_results(results)
    installs = cached_installations()
    catalogue_of = catalogue_lookup(installs)
    check_known_settings(exp, catalogue_of)
    p = planning.describe(exp, cached=lambda req: _request_key(req) in installs)
    out = console()
    stored = plan_view.stored_runs(exp, results)
    render(p, out, catalogue_of=catalogue_of, stored=stored)
    pilot_name = _run_pilot(exp, paths, results, pilot) if pilot else None
    render_precision(p, out, _noise(exp, results, pilot_name), exp.until_ci_pct)


def _run_pilot(exp: spec.Experiment, paths: Paths, results: str | None, rounds: int) -> str:
    from blocklab.commands.run import _execute
    from blocklab.execution.experiment import StoppingRule

    name = f"{exp.name}-pilot"[:64]
    pilot = exp.model_copy(update={"name": name, "rounds": rounds})
    console(stderr=True).print(f"pilot: {rounds} rounds stored as experiment '{name}'")
    _execute(pilot, paths, results, StoppingRule(rounds=rounds), quiet=True)
    return name


def _noise(exp: spec.Experiment, results: str | None, prefer: str | None) -> Any:
    from blocklab.analysis import noise
    from blocklab.store.factory import open_results

    try:
        with open_results(results, create=False) as db:
            return noise.estimate(db, exp, prefer=prefer)
    except UserError:  # no results stored yet
        return None


def render_precision(p: Plan, out: Console, found: Any, until_ci: float | None) -> None:
    """The noise and where it came from, the half-width and MDE at the planned rounds,
    and the rounds a target needs (80 % assurance) beside those an effect of the
    target's size needs (80 % power)."""
    from blocklab.analysis import assurance, precision

    exp = p.experiment
    if found is None:
        out.print(
            "[bold]precision:[/bold] no stored paired rounds of this experiment or its "
            f"variants: run `{plan_view.command_for(exp, '--pilot', '3')}` (3 rounds, "
            "stored apart) or an earlier run to measure the noise",
            highlight=False,
        )
        return
    rounds = max(exp.rounds, precision.MIN_ROUNDS)
    target = until_ci if until_ci is not None else exp.until_ci_pct
    sigma = found.noise.sigma_log
    f = precision.forecast(sigma, rounds, p.seconds_per_round, target)
    assured = assurance.assured_half_width_pct(sigma, rounds, noise_df=found.honest_df)
    out.print(
        f"[bold]precision:[/bold] noise {fmt_number(found.noise.sigma_pct)} % per round "
        f"from {found.source} (stdev of the per-round log ratios); at {rounds} rounds the "
        f"95 % CI half-width is about ±{fmt_number(f.ci_half_width_pct)} % (±"
        f"{fmt_number(assured)} % or narrower with {assurance.ASSURANCE * 100:g} % probability, "
        f"counting the noise estimate's own uncertainty) "
        f"and the minimum detectable effect (power 80 %) {fmt_number(f.mde_pct)} %",
        highlight=False,
    )
    if found.design != exp.run_design.kind:
        out.print(
            f"[yellow]note[/yellow] that noise comes from design {found.design}, this plan "
            f"runs design {exp.run_design.kind}: its noise per round may differ",
            highlight=False,
        )
    out.print(_noise_df_line(found), highlight=False)
    out.print(_equivalence_line(exp, sigma), highlight=False, markup=False)
    if target is not None:
        t = assurance.plan_target(sigma, target, p.seconds_per_round, found.honest_df)
        _render_target(exp, out, t)


def _noise_df_line(found: Any) -> str:
    """How well the noise is known: its honest df and how far above it sigma may be."""
    from blocklab.analysis import assurance

    df = found.honest_df
    factor = assurance.sigma_upper_factor(df)
    word = "wide" if factor >= 1.5 else "rough" if factor >= 1.2 else "fair"
    return (
        f"noise from {found.rounds} rounds ({df} df): {word}; the true noise may be up to "
        f"{fmt_number(factor)} x that ({assurance.ASSURANCE * 100:g} % upper bound): the "
        f"rounds below count it"
    )


def _equivalence_line(exp: spec.Experiment, sigma: float) -> str:
    """The rounds that show "equal within ±X %" (TOST, 80 % power) if the variants are
    truly equal, and the rounds at which any outcome is a verdict (80 % assurance)."""
    from blocklab.analysis import equivalence, precision, stats

    x = exp.equivalence_pct or stats.EQUIVALENCE_PCT
    more = f"more than {precision.MAX_ROUNDS}"
    show = equivalence.rounds_to_show_equal(sigma, x)
    decide = equivalence.rounds_to_decide(sigma, x)
    return (
        f"equal within ±{x:g} % ([experiment] equivalence): {show or more} rounds show it "
        f"with 80 % probability if the variants are truly equal; with {decide or more} "
        "rounds any outcome is a verdict (faster, slower or equal) with 80 % probability"
    )


def _render_target(exp: spec.Experiment, out: Console, t: TargetPlan) -> None:
    from blocklab.analysis import precision

    power = (
        f"more than {precision.MAX_ROUNDS} rounds"
        if t.rounds_power is None
        else f"{t.rounds_power} rounds"
    )
    power_line = f"detecting a true change of {t.target_pct:g} % with 80 % power needs {power}"
    if t.rounds_assured is None or t.seconds_assured is None:
        out.print(
            f"±{t.target_pct:g} % needs more than {precision.MAX_ROUNDS} rounds at this "
            f"noise: not reachable on this machine; {power_line}",
            highlight=False,
        )
        return
    line = (
        f"±{t.target_pct:g} % needs {t.rounds_assured} rounds to be reached with 80 % "
        f"probability ({format_duration(t.seconds_assured)} of runs; {_if_exact(t)}"
        f"{t.rounds_expected} rounds reach it about half the time); {power_line}"
    )
    cap = exp.max_rounds or planning.default_max_rounds(exp.rounds)
    line += _until_ci_floor(exp, t)
    budget = exp.time_budget_s
    if t.rounds_assured > cap or (budget is not None and t.seconds_assured > budget):
        line += (
            f"; beyond the budget (max {cap} rounds"
            + (f", {format_duration(budget)}" if budget is not None else "")
            + "): an --until-ci run may stop early"
        )
    out.print(line, highlight=False)


def _if_exact(t: TargetPlan) -> str:
    if t.noise_df is None or t.rounds_if_exact is None:
        return ""
    return f"{t.rounds_if_exact} rounds were the noise exact; "


def _until_ci_floor(exp: spec.Experiment, t: TargetPlan) -> str:
    """What --until-ci runs at least (blocklab.analysis.stopping's floor)."""
    from blocklab.analysis import stopping

    first = stopping.first_stage(exp.rounds)
    return (
        f"; --until-ci {t.target_pct:g} runs the rounds its first {first} rounds' noise "
        f"plans, at least {stopping.floor(first)}"
    )


COMMANDS: list[click.Command] = [plan_command]


def render(
    p: Plan, console: Console, *, catalogue_of: CatalogueOf = lambda _r: None, stored: int = 0
) -> None:
    exp = p.experiment
    console.print(f"[bold]{exp.name}[/bold]  {user_text(exp.description)}")
    console.print(f"stored as experiment '{exp.name}'", highlight=False)
    console.print(
        f"seed {exp.seed} · {exp.rounds} rounds · settings policy {exp.settings_policy}"
        + (f" · source {user_text(exp.source)}" if exp.source else "")
    )
    console.print(_variants_table(p))
    plan_view.render_run(p, console)
    _settings_table(p, console, catalogue_of)
    if exp.command_settings():  # allowed by the file (else the load refused it)
        console.print(
            f"[yellow]note[/yellow] settings that run commands or load libraries: "
            f"{', '.join(exp.command_settings())}; `run` and `agent` need "
            "--allow commands",
            highlight=False,
        )
    _counts(p, console, stored)
    console.print("[bold]round 1 order:[/bold] " + " → ".join(map(user_text, p.first_round)))
    console.print(p.order_note, highlight=False)
    console.print(p.footprint_line(), highlight=False, markup=False)
    plan_view.render_room(p, console)
    window = cycles.window_line(exp)
    if window is not None:
        console.print(window, highlight=False, markup=False)
    _eta(p, console, stored)
    for host in exp.host_variants:  # [fleet.hosts]: what `fleet submit` gives each host
        shown = ", ".join(user_text(v.label or v.variant_id) for v in exp.variants_on(host))
        console.print(f"[bold]fleet host {host}:[/bold] {shown}", highlight=False)


def _variants_table(p: Plan) -> Table:
    exp = p.experiment
    dim_keys = list(dict.fromkeys(k for v in p.variants for k in exp.dims(v)))
    table = Table(title=f"{len(p.variants)} variants")
    table.add_column("label")
    for k in dim_keys:
        table.add_column(k, justify="right")
    table.add_column("compared with")
    table.add_column("id", style="dim")
    for v in p.variants:
        dims = exp.dims(v)
        ref = exp.reference_for(v)
        compared = (
            "[bold]reference[/bold]" if ref == v.variant_id else user_text(exp.variant(ref).label)
        )
        cells = (user_text(dims.get(k, "")) for k in dim_keys)
        table.add_row(user_text(v.label), *cells, compared, v.variant_id)
    return table


def _settings_table(p: Plan, console: Console, catalogue_of: CatalogueOf) -> None:
    """Settings every variant shares on one line; those that differ in a table."""
    exp = p.experiment
    found = {v.variant_id: exp.effective_settings(v, catalogue_of) for v in p.variants}
    conv = {vid: c or Conversion(dict(exp.variant(vid).settings)) for vid, c in found.items()}
    names = sorted({n for c in conv.values() for n in c.settings})
    values = {n: [conv[v.variant_id].settings.get(n, "") for v in p.variants] for n in names}
    same = [n for n in names if len(set(values[n])) == 1]
    differ = [n for n in names if n not in same]
    title = f"settings written (policy {exp.settings_policy})"
    if same:
        shared = ", ".join(f"{n}={user_text(values[n][0])}" for n in same)
        console.print(f"[bold]{title}, same in every variant:[/bold] {shared}")
    unknown = [v.label for v in p.variants if found[v.variant_id] is None]
    if differ:
        console.print(_differing(p, {n: values[n] for n in differ}, unknown, title))
    if unknown:
        console.print(
            f"[yellow]known after build[/yellow] {user_text(', '.join(unknown))}: settings "
            "shown as written; the bytes policy reads which settings count pages, with their "
            "defaults and limits, from the pg_settings of the variant's build and its reference's"
        )
    for v in p.variants:
        for note in conv[v.variant_id].notes:
            console.print(f"[yellow]note[/yellow] {user_text(v.label)}: {user_text(note)}")


def _differing(p: Plan, values: dict[str, list[str]], unknown: list[str], title: str) -> Table:
    """One row per setting (there are more settings than variants), one column per variant."""
    caption = "blank: the build's default" + ("; ?: known after build" if unknown else "")
    table = Table(title=f"{title}, differing", caption=caption)
    table.add_column("setting")
    for v in p.variants:
        table.add_column(user_text(v.label), justify="right", overflow="fold")
    for name, row in values.items():
        blank = ["?" if v.label in unknown else "" for v in p.variants]
        table.add_row(name, *(user_text(value) or blank[i] for i, value in enumerate(row)))
    return table


def _counts(p: Plan, console: Console, stored: int = 0) -> None:
    cached = len(p.builds) - len(p.builds_to_make)
    per_round = p.runs // max(1, p.experiment.rounds)
    runs = (
        f"{p.runs} runs ({per_round} per round, design {p.experiment.run_design.kind}, "
        f"× {p.experiment.rounds} rounds)"
    )
    if p.max_runs is not None:
        runs += f", up to {p.max_runs} until every CI half-width ≤ {p.experiment.until_ci_pct:g} %"
    loads = f" (loaded with {', '.join(p.load_settings)})" if p.load_settings else ""
    console.print(
        f"[bold]{len(p.builds)}[/bold] builds ({cached} cached) · "
        f"[bold]{p.datasets}[/bold] datasets{loads} · [bold]{runs}[/bold]"
    )
    if stored:
        console.print(
            f"stored: {stored} of the {p.runs} planned runs (experiment "
            f"'{p.experiment.name}'); `blocklab run` skips them and runs "
            f"{p.runs - stored}",
            highlight=False,
        )


def _eta(p: Plan, console: Console, stored: int = 0) -> None:
    """The time of what is left: builds not cached, datasets, the runs not stored."""
    left = max(0, p.runs - stored) / max(1, p.runs)
    runs_s = p.eta_runs_s * left
    parts = (
        f"builds {format_duration(p.eta_builds_s)} + datasets "
        f"{format_duration(p.eta_datasets_s)} + runs {format_duration(runs_s)}"
    )
    if stored:
        parts += f" of the {p.runs - stored} runs not stored"
    eta_s = p.eta_builds_s + p.eta_datasets_s + runs_s
    line = f"[bold]ETA {format_duration(eta_s)}[/bold] ({parts})"
    if p.eta_max_runs_s is not None:
        worst = p.eta_builds_s + p.eta_datasets_s + p.eta_max_runs_s - p.eta_runs_s * (1 - left)
        line += f"; at most {format_duration(worst)} with adaptive rounds"
    if p.experiment.time_budget_s is not None:
        line += f"; time budget {format_duration(p.experiment.time_budget_s)}"
    if stored >= p.runs and p.eta_max_runs_s is None:
        more = plan_view.command_for(p.experiment, "--rounds", str(2 * p.experiment.rounds))
        line += f"; every planned run is stored: for more rounds, `{more}`"
    console.print(line, highlight=False)

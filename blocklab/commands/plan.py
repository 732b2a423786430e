"""CLI commands: plan. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from blocklab import plan as planning
from blocklab import settings_catalogue, spec
from blocklab.console import console
from blocklab.errors import BlocklabError
from blocklab.installation import Installation
from blocklab.model import BuildRequest
from blocklab.paths import Paths
from blocklab.plan import Plan, format_duration
from blocklab.settings_policy import Catalogue, Conversion

CatalogueOf = Callable[[BuildRequest], Catalogue | None]


def _request_key(req: BuildRequest | dict[str, Any] | None) -> str:
    data = req.model_dump(mode="json") if isinstance(req, BuildRequest) else req
    return json.dumps(data, sort_keys=True)


def cached_installations() -> dict[str, Installation]:
    """The builds the cache holds, by the request stored in each manifest."""
    from blocklab.build import cached_builds

    return {_request_key(i.manifest.get("request")): i for i in cached_builds(Paths.from_env())}


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


@click.command("plan")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
def plan_command(file: Path | None) -> None:
    """Show what `blocklab run FILE` would do: variants, builds, datasets, runs, the order
    of the first round and an ETA. Builds and runs nothing. Without FILE: the demo."""
    exp = spec.load(file) if file is not None else spec.demo()
    spec.check_machine(exp, Paths.from_env())
    installs = cached_installations()
    p = planning.describe(exp, cached=lambda req: _request_key(req) in installs)
    render(p, console(), catalogue_of=catalogue_lookup(installs))


COMMANDS: list[click.Command] = [plan_command]


def render(p: Plan, console: Console, *, catalogue_of: CatalogueOf = lambda _r: None) -> None:
    exp = p.experiment
    console.print(f"[bold]{exp.name}[/bold]  {exp.description}")
    console.print(
        f"seed {exp.seed} · {exp.rounds} rounds · settings policy {exp.settings_policy}"
        + (f" · source {exp.source}" if exp.source else "")
    )
    console.print(_variants_table(p))
    _settings_table(p, console, catalogue_of)
    _counts(p, console)
    console.print("[bold]round 1 order:[/bold] " + " → ".join(p.first_round))
    _eta(p, console)


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
        compared = "[bold]reference[/bold]" if ref == v.variant_id else exp.variant(ref).label
        table.add_row(v.label, *(str(dims.get(k, "")) for k in dim_keys), compared, v.variant_id)
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
        shared = ", ".join(f"{n}={values[n][0]}" for n in same)
        console.print(f"[bold]{title}, same in every variant:[/bold] {shared}")
    unknown = [v.label for v in p.variants if found[v.variant_id] is None]
    if differ:
        console.print(_differing(p, {n: values[n] for n in differ}, unknown, title))
    if unknown:
        console.print(
            f"[yellow]known after build[/yellow] {', '.join(unknown)}: settings shown as "
            "written; the bytes policy reads which settings count pages, with their defaults "
            "and limits, from the pg_settings of the variant's build and its reference's"
        )
    for v in p.variants:
        for note in conv[v.variant_id].notes:
            console.print(f"[yellow]note[/yellow] {v.label}: {note}")


def _differing(p: Plan, values: dict[str, list[str]], unknown: list[str], title: str) -> Table:
    """One row per setting (there are more settings than variants), one column per variant."""
    caption = "blank: the build's default" + ("; ?: known after build" if unknown else "")
    table = Table(title=f"{title}, differing", caption=caption)
    table.add_column("setting")
    for v in p.variants:
        table.add_column(v.label, justify="right", overflow="fold")
    for name, row in values.items():
        blank = ["?" if v.label in unknown else "" for v in p.variants]
        table.add_row(name, *(value or blank[i] for i, value in enumerate(row)))
    return table


def _counts(p: Plan, console: Console) -> None:
    cached = len(p.builds) - len(p.builds_to_make)
    runs = f"{p.runs} runs ({len(p.variants)} variants × {p.experiment.rounds} rounds)"
    if p.max_runs is not None:
        runs += f", up to {p.max_runs} until every CI half-width ≤ {p.experiment.until_ci_pct:g} %"
    console.print(
        f"[bold]{len(p.builds)}[/bold] builds ({cached} cached) · "
        f"[bold]{p.datasets}[/bold] datasets · [bold]{runs}[/bold]"
    )


def _eta(p: Plan, console: Console) -> None:
    parts = (
        f"builds {format_duration(p.eta_builds_s)} + datasets "
        f"{format_duration(p.eta_datasets_s)} + runs {format_duration(p.eta_runs_s)}"
    )
    line = f"[bold]ETA {format_duration(p.eta_s)}[/bold] ({parts})"
    if p.eta_max_runs_s is not None:
        worst = p.eta_builds_s + p.eta_datasets_s + p.eta_max_runs_s
        line += f"; at most {format_duration(worst)} with adaptive rounds"
    if p.experiment.time_budget_s is not None:
        line += f"; time budget {format_duration(p.experiment.time_budget_s)}"
    console.print(line)

"""CLI commands: plan. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from blocklab import plan as planning
from blocklab import spec
from blocklab.console import console
from blocklab.model import BuildRequest
from blocklab.plan import Plan, format_duration


def cache_lookup() -> Callable[[BuildRequest], bool]:
    """Which builds the cache already holds (by the request stored in each manifest)."""
    from blocklab.build import cached_builds
    from blocklab.paths import Paths

    requests = {
        json.dumps(inst.manifest.get("request"), sort_keys=True)
        for inst in cached_builds(Paths.from_env())
    }
    return lambda req: json.dumps(req.model_dump(mode="json"), sort_keys=True) in requests


@click.command("plan")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
def plan_command(file: Path | None) -> None:
    """Show what `blocklab run FILE` would do: variants, builds, datasets, runs, the order
    of the first round and an ETA. Builds and runs nothing. Without FILE: the demo."""
    exp = spec.load(file) if file is not None else spec.demo()
    render(planning.describe(exp, cached=cache_lookup()), console())


COMMANDS: list[click.Command] = [plan_command]


def render(p: Plan, console: Console) -> None:
    exp = p.experiment
    console.print(f"[bold]{exp.name}[/bold]  {exp.description}")
    console.print(
        f"seed {exp.seed} · {exp.rounds} rounds · settings policy {exp.settings_policy}"
        + (f" · source {exp.source}" if exp.source else "")
    )
    console.print(_variants_table(p))
    _settings_table(p, console)
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


def _settings_table(p: Plan, console: Console) -> None:
    """Settings every variant shares on one line; those that differ in a table."""
    exp = p.experiment
    conv = {v.variant_id: exp.effective_settings(v) for v in p.variants}
    names = sorted({n for c in conv.values() for n in c.settings})
    values = {n: [conv[v.variant_id].settings.get(n, "") for v in p.variants] for n in names}
    same = [n for n in names if len(set(values[n])) == 1]
    differ = [n for n in names if n not in same]
    title = f"settings written (policy {exp.settings_policy})"
    if same:
        shared = ", ".join(f"{n}={values[n][0]}" for n in same)
        console.print(f"[bold]{title}, same in every variant:[/bold] {shared}")
    if differ:
        table = Table(title=f"{title}, differing")
        table.add_column("variant")
        for n in differ:
            table.add_column(n, justify="right")
        for i, v in enumerate(p.variants):
            table.add_row(v.label, *(values[n][i] for n in differ))
        console.print(table)
    for v in p.variants:
        for note in conv[v.variant_id].notes:
            console.print(f"[yellow]note[/yellow] {v.label}: {note}")


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

"""CLI command: export (stored runs and series as CSV)."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.commands.options import results_option
from blocklab.errors import UserError
from blocklab.paths import Paths


@click.command("export")
@click.argument("experiment", required=False)
@click.option(
    "--csv",
    "csv_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="directory to write runs.csv and series.csv into",
)
@results_option
def export_cmd(experiment: str | None, csv_dir: Path, results: Path | None) -> None:
    """Runs (every dimension and metric) and per-second series as CSV."""
    from blocklab.export import export_csv
    from blocklab.store import ResultsDB

    paths = Paths.from_env(results=results)
    if not paths.results.is_dir():
        raise UserError(f"--results: {paths.results} does not exist")
    with ResultsDB(paths.results, create=False) as db:
        written = export_csv(db, csv_dir, experiment)
    for path, rows in written:
        click.echo(f"{path}: {rows} rows")


COMMANDS: list[click.Command] = [export_cmd]

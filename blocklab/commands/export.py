"""CLI command: export (stored runs and series as CSV, or into a shared PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from blocklab.commands.options import results_option
from blocklab.errors import UserError

if TYPE_CHECKING:
    from blocklab.store import ResultsStore


@click.command("export")
@click.argument("experiment", required=False)
@click.option(
    "--csv",
    "csv_dir",
    type=click.Path(path_type=Path),
    help="directory to write runs.csv, series.csv and rounds.csv into",
)
@click.option(
    "--to",
    "to",
    help="a PostgreSQL results database (postgresql://...) to copy the runs into; "
    "runs already there are skipped",
)
@results_option
def export_cmd(
    experiment: str | None, csv_dir: Path | None, to: str | None, results: str | None
) -> None:
    """Runs (every dimension and metric) and per-second series as CSV, or copied into a
    shared PostgreSQL results database."""
    from blocklab.store.factory import is_postgres, open_results, open_store
    from blocklab.store.uri import parse_pg

    if (csv_dir is None) == (to is None):
        raise UserError("--csv / --to: give one of them (CSV files, or a PostgreSQL URI)")
    if to is not None and not is_postgres(to):
        raise UserError("--to: a PostgreSQL URI (postgresql://... or postgres://...)")
    if to is not None:
        parse_pg(to, flag="--to", from_argv=True)  # refuses a password on the command line
    with open_results(results, create=False) as db:
        if csv_dir is not None:
            from blocklab.store.export import export_csv

            for path, rows in export_csv(db, csv_dir, experiment):
                click.echo(f"{path}: {rows} rows")
            path, rows = _rounds_csv(db, csv_dir, experiment)
            click.echo(f"{path}: {rows} rows")
            return
        from blocklab.store.copy_results import copy_results

        with open_store(str(to), flag="--to") as dest:
            counts = copy_results(db, dest, experiment)
            click.echo(
                f"copied {counts.copied} runs, skipped {counts.skipped} already in "
                f"{dest.location} ({counts.experiments} experiment(s))"
            )


def _rounds_csv(db: ResultsStore, out_dir: Path, experiment: str | None) -> tuple[Path, int]:
    """rounds.csv: the per-round values the summary and the report compare."""
    from blocklab.analysis.round_table import ROUND_FIELDS, round_rows
    from blocklab.store.export import write_csv

    names = [experiment] if experiment else [e["name"] for e in db.experiments()]
    rows = [row for name in names for row in round_rows(db, name)]
    path = out_dir / "rounds.csv"
    return path, write_csv(path, rows, ROUND_FIELDS)


COMMANDS: list[click.Command] = [export_cmd]

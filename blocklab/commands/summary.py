"""CLI command: summary (the statistics table of stored experiments)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from blocklab.commands.options import results_option
from blocklab.console import console
from blocklab.errors import UserError
from blocklab.paths import Paths

if TYPE_CHECKING:
    from blocklab.store import ResultsStore


@click.command("summary")
@click.argument("experiment", required=False)
@results_option
@click.option(
    "--metric",
    default="tps",
    show_default=True,
    help="tps, latency_avg_ms, or a derived metric such as wal_bytes_per_xact",
)
def summary_cmd(experiment: str | None, results: Path | None, metric: str) -> None:
    """The table: n, mean ± stdev, min, median, max, CI and gain against the reference."""
    from blocklab.store import ResultsDB
    from blocklab.summary import summarize_experiment
    from blocklab.summary_table import print_summary

    paths = Paths.from_env(results=results)
    if not paths.results.is_dir():
        raise UserError(f"--results: {paths.results} does not exist")
    with ResultsDB(paths.results, create=False) as db:
        names = [experiment] if experiment else [r["name"] for r in db.experiments()]
        if not names:
            raise UserError(f"--results: {paths.results} holds no experiment")
        out = console()
        for name in names:
            _check_metric(db, db.experiment(name)["name"], metric)
            print_summary(out, summarize_experiment(db, name, metric))


def _check_metric(db: ResultsStore, experiment: str, metric: str) -> None:
    from blocklab.metrics import RUN_COLUMN_METRICS

    known = [*RUN_COLUMN_METRICS, *db.metric_names(experiment)]
    if metric not in known:
        raise UserError(
            f"--metric: '{metric}' is not stored for experiment '{experiment}'; "
            f"allowed: {', '.join(known)}"
        )


COMMANDS: list[click.Command] = [summary_cmd]

"""CLI command: summary (the statistics table of stored experiments)."""

from __future__ import annotations

import click

from blocklab.commands.options import results_option
from blocklab.console import console
from blocklab.errors import UserError


@click.command("summary")
@click.argument("experiment", required=False)
@results_option
@click.option(
    "--metric",
    default="tps",
    show_default=True,
    help="a metric's key or the label the summary prints: tps (throughput), "
    "latency_avg_ms, wal_bytes_per_xact or 'WAL bytes per transaction'",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="every side metric, the A/A floor and the metrics that are 0 in both or constant",
)
def summary_cmd(experiment: str | None, results: str | None, metric: str, everything: bool) -> None:
    """The answer first (a verdict per comparison, key side metrics, checks), then the
    table: n, mean ± stdev, min, median, max, CI and gain against the reference."""
    from blocklab.analysis.changed_metrics import print_changed
    from blocklab.analysis.metrics import resolve_metric
    from blocklab.analysis.query_summary import summarize_queries
    from blocklab.analysis.query_table import print_queries
    from blocklab.analysis.summary import summarize_by_host
    from blocklab.analysis.summary_table import print_summary
    from blocklab.store.factory import open_results

    with open_results(results, create=False) as db:
        names = [experiment] if experiment else [r["name"] for r in db.experiments()]
        if not names:
            raise UserError(f"--results: {db.location} holds no experiment")
        out = console()
        asked = metric
        for name in names:
            stored = db.experiment(name)["name"]
            # the runs and their metrics read once, not once a metric and a table: at
            # 10,000 runs the summary read each run's metrics 14 times, one query each
            db.read_ahead(stored)
            metric = resolve_metric(asked, db.metric_names(stored))
            by_host = summarize_by_host(db, name, metric)
            for host, summary in by_host:
                if len(by_host) > 1:  # a fleet: one table per host, never paired across
                    summary.name = f"{name} @ host {host}"
                print_summary(out, summary, everything=everything)
                if metric == "tps":
                    print_changed(out, db, name, host, everything=everything)
            queries = summarize_queries(db, name)
            if queries is not None:
                print_queries(out, queries)


COMMANDS: list[click.Command] = [summary_cmd]

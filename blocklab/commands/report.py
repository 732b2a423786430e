"""CLI commands: report, serve. Each module exports COMMANDS, registered by blocklab.cli."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from blocklab import proc
from blocklab.commands.options import results_option
from blocklab.paths import Paths
from blocklab.report.server import DEFAULT_HOST, make_server
from blocklab.store.factory import is_postgres, results_spec
from blocklab.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:
    from blocklab.report.site import SiteResult

OUT_HELP = (
    "where to write the site (default: RESULTS/report); a site made by this blocklab version "
    "is updated (only pages whose results changed are rewritten), anything else replaced whole"
)
FULL_HELP = (
    "generate the whole site anew instead of updating the pages that changed (every run's "
    "stationarity judged again from its series, not read where kept)"
)
WATCH_HELP = (
    "keep running: update the site again whenever the results change (polled every "
    "--every seconds), until Ctrl-C or SIGTERM (exit 0); one process loads its libraries "
    "once, not once an update"
)
EVERY_HELP = "with --watch: seconds between two looks at the results store  [default: 2]"
EVERY_S = 2.0


def watch_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--watch and --every."""
    f = click.option(
        "--every",
        type=click.FloatRange(min=0.1, max=3600),
        help=EVERY_HELP,
    )(f)
    return click.option("--watch", is_flag=True, help=WATCH_HELP)(f)


def _dirs(results: str | None, out: Path | None) -> tuple[str, Path]:
    """The results store and the site: RESULTS/report, or $BLOCKLAB_HOME/report for a
    PostgreSQL results database."""
    spec, _ = results_spec(results)
    default = Paths.from_env().home if is_postgres(spec) else Path(spec).absolute()
    return spec, (out.absolute() if out else default / "report")


def _describe(r: SiteResult) -> str:
    how = (
        f"updated: wrote {r.written} pages, kept {r.kept}"
        if r.incremental
        else f"generated whole: wrote {r.written} pages"
    )
    return (
        f"{how}; {r.pages} pages for {r.experiments} experiment(s), {r.runs} runs in "
        f"{fmt_seconds(r.elapsed_s)}: {fmt_bytes(r.html_bytes)} of HTML, "
        f"{fmt_bytes(r.total_bytes)} in all; largest page {r.largest_page} "
        f"({fmt_bytes(r.largest_page_bytes)})"
    )


def _told(r: SiteResult) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} {_describe(r)}")


def _every_s(watch: bool, every: float | None) -> float:
    """--every's seconds; refused without --watch (exit 2), where it would mean nothing."""
    if every is not None and not watch:
        raise click.UsageError("--every: only with --watch (seconds between two looks)")
    return EVERY_S if every is None else every


def _watching(
    res: str, site: Path, every_s: float, full: bool, started: Callable[[], None]
) -> None:
    """The site kept up to date until Ctrl-C or SIGTERM (a service manager's stop), which
    end the watch (exit 0). As `blocklab run` does, Ctrl-C (or SIGINT by PID) ends it
    wherever it was started: a shell starts a background job with SIGINT ignored."""
    from blocklab.report.watch import watch  # the site's generation: when it runs

    try:
        with proc.interruptible():  # the workers take SIGTERM's default: report.parallel
            watch(res, site, every_s=every_s, told=_told, full=full, started=started)
    except KeyboardInterrupt:
        click.echo("stopped watching")


@click.command("report")
@results_option
@click.option("--out", type=click.Path(path_type=Path), help=OUT_HELP)
@click.option("--full", is_flag=True, help=FULL_HELP)
@watch_options
def report(
    results: str | None, out: Path | None, full: bool, watch: bool, every: float | None
) -> None:
    """Write the static report site (works offline, from disk)."""
    every = _every_s(watch, every)
    res, site = _dirs(results, out)
    if watch:
        started = functools.partial(
            click.echo,
            f"open {site / 'index.html'}; watching {res} every {every:g} s (Ctrl-C to stop)",
        )
        _watching(res, site, every, full, started)
        return
    from blocklab.report.site import build_site  # imported when it runs, not for --help

    r = build_site(res, site, full=full)
    click.echo(_describe(r))
    click.echo(f"open {site / 'index.html'}")


@click.command("serve")
@results_option
@click.option("--out", type=click.Path(path_type=Path), help=OUT_HELP)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="port to listen on (0: any free port)",
)
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="address to listen on; anything but 127.0.0.1 exposes the results to the network",
)
@watch_options
def serve(
    results: str | None, out: Path | None, port: int, host: str, watch: bool, every: float | None
) -> None:
    """(Re)generate the report site and serve it on 127.0.0.1 until Ctrl-C."""
    from blocklab.report.site import build_site  # imported when it runs, not for --help

    every = _every_s(watch, every)
    res, site = _dirs(results, out)
    if not watch:
        click.echo(_describe(build_site(res, site)))
    server = make_server(site, host=host, port=port)
    if host != DEFAULT_HOST:
        click.secho(f"warning: listening on {host}: reachable from other machines", err=True)
    bound_port = server.server_address[1]
    serving = f"serving {site} at http://{host}:{bound_port}/"
    try:
        if not watch:
            click.echo(f"{serving} (Ctrl-C to stop)")
            server.serve_forever()
            return
        # the site made first, then served from a thread while this one keeps it up to date
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        started = functools.partial(
            _serve_from, thread, f"{serving}; watching {res} every {every:g} s (Ctrl-C to stop)"
        )
        _watching(res, site, every, False, started)
        if thread.is_alive():
            server.shutdown()
    finally:
        server.server_close()


def _serve_from(thread: threading.Thread, said: str) -> None:
    thread.start()
    click.echo(said)


COMMANDS: list[click.Command] = [report, serve]

"""CLI commands: fleet submit|status|cancel|move, and agent (docs/FLEET.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from blocklab.commands.options import (
    RunFlags,
    allow_options,
    check_max_rounds,
    experiment_options,
    granted,
    results_option,
)
from blocklab.console import console, user_text
from blocklab.errors import UserError

if TYPE_CHECKING:
    from blocklab.experiment_file import Experiment
    from blocklab.fleet.registry import Submission
    from blocklab.store.uri import PgTarget

FLEET_NEEDS_PG = (
    "the fleet needs a PostgreSQL results database (its queue lives there): give "
    "--results postgresql://USER@HOST/DB (or BLOCKLAB_RESULTS)"
)


def _target(results: str | None) -> tuple[str, PgTarget]:
    """The results URI and its connection (checked: no password in argv, local or TLS)."""
    from blocklab.store.factory import is_postgres, results_spec
    from blocklab.store.uri import parse_pg

    spec, from_argv = results_spec(results)
    if not is_postgres(spec):
        raise UserError(f"--results: {spec} is a results directory (SQLite); {FLEET_NEEDS_PG}")
    return spec, parse_pg(spec, from_argv=from_argv)


@click.group("fleet")
def fleet_group() -> None:
    """One experiment across many hosts: queue it, watch it, cancel or move a host's jobs."""


@fleet_group.command("submit")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--hosts",
    help="the hosts that run the matrix, e.g. a,b,c (default: the hosts of FILE's [fleet.hosts])",
)
@results_option
@click.option("--rounds", type=int, help="rounds per host")
@experiment_options
def submit_cmd(
    file: Path,
    hosts: str | None,
    results: str | None,
    rounds: int | None,
    duration: int | None,
    scale: int | None,
    clients: int | None,
    until_ci: float | None,
    max_rounds: int | None,
    cycles: int | None,
    slices: int | None,
) -> None:
    """Queue FILE's experiment on every host: one job per host and round (--until-ci and
    --max-rounds apply to each host on its own). A [fleet.hosts] table in FILE gives a host
    the variants its selector matches (and their references); other hosts run them all."""
    from blocklab.fleet.hosts import parse_hosts

    flags = RunFlags(
        rounds=rounds,
        duration=duration,
        scale=scale,
        clients=clients,
        until_ci=until_ci,
        max_rounds=max_rounds,
        cycles=cycles,
        slices=slices,
    )
    flags.check()
    names = parse_hosts(hosts) if hosts is not None else None
    spec, target = _target(results)
    exp, overrides = _load_experiment(file, flags)
    check_max_rounds(max_rounds, until_ci, exp.until_ci_pct)
    names = _fleet_hosts(exp, names)
    n_rounds = rounds or exp.rounds
    sub = _submission(file, exp, overrides, names, n_rounds, until_ci, max_rounds)
    n_variants, done = _register(spec, exp, names, n_rounds)
    queued, already = _queue_jobs(target, sub, done)
    _print_submitted(
        exp,
        names,
        n_rounds,
        target,
        n_variants=n_variants,
        queued=queued,
        already=already,
        done=done,
    )


def _load_experiment(file: Path, flags: RunFlags) -> tuple[Experiment, dict[str, int]]:
    """FILE's experiment with the flags that change it (RunFlags.overrides), and those."""
    from blocklab.experiment_file import load

    if not file.is_file():
        raise UserError(f"FILE: no experiment file at {file}")
    overrides = flags.overrides()
    return load(file, overrides), overrides


def _submission(
    file: Path,
    exp: Experiment,
    overrides: dict[str, int],
    names: list[str],
    n_rounds: int,
    until_ci: float | None,
    max_rounds: int | None,
) -> Submission:
    """What the queue keeps about the experiment, for the agents (blocklab.fleet.registry)."""
    from blocklab.fleet import registry
    from blocklab.timestamps import now_iso

    return registry.Submission(
        name=exp.name,
        spec_text=file.read_text(),
        spec_path=str(file.absolute()),
        overrides=overrides,
        hosts=names,
        rounds=n_rounds,
        until_ci_pct=until_ci if until_ci is not None else exp.until_ci_pct,
        max_rounds=max_rounds if max_rounds is not None else exp.max_rounds,
        submitted_at=now_iso(),
    )


def _register(
    spec: str, exp: Experiment, names: list[str], n_rounds: int
) -> tuple[int, dict[str, set[int]]]:
    """The experiment registered in the results; its number of variants, and per host the
    rounds already stored for all of the host's variants."""
    from blocklab.execution.experiment import register
    from blocklab.fleet import control
    from blocklab.store.factory import open_store

    with open_store(spec) as db:
        variants = register(db, exp.model_copy(update={"rounds": n_rounds}), {"fleet_hosts": names})
        done = {
            h: control.complete_rounds(
                db.run_keys(exp.name, h), [v.variant_id for v in exp.variants_on(h)], n_rounds
            )
            for h in names
        }
    return len(variants), done


def _queue_jobs(target: PgTarget, sub: Submission, done: dict[str, set[int]]) -> tuple[int, int]:
    """The submission saved and its jobs (the rounds not `done` yet) queued: (queued,
    already queued)."""
    from blocklab.fleet import control, queue, registry

    queue.install(target)
    with queue.connect(target) as conn:
        registry.save(conn, sub)
    jobs = control.jobs_to_submit(sub.name, sub.hosts, sub.rounds, done)
    return control.submit(target, jobs)


def _print_asked(exp: Experiment) -> None:
    """What the queued experiment asks of each agent's owner (the trust boundary)."""
    from blocklab.experiment_file import trust

    classes = sorted({r.cls for r in trust.requests(exp, None)})
    if classes:
        console().print(
            f"its agents need --allow {','.join(classes)} (a job asks; the agent's owner "
            "grants: docs/RELIABILITY.md)",
            highlight=False,
        )


def _print_submitted(
    exp: Experiment,
    names: list[str],
    n_rounds: int,
    target: PgTarget,
    *,
    n_variants: int,
    queued: int,
    already: int,
    done: dict[str, set[int]],
) -> None:
    """What was queued (the variants of each host that runs a share of them), where, and
    what to do next."""
    out = console()
    out.print(
        f"experiment '{exp.name}': {n_variants} variants x {n_rounds} rounds on "
        f"{len(names)} hosts ({', '.join(names)}); {queued} jobs queued"
        + (f", {already} already queued" if already else "")
        + (
            f", {sum(len(d) for d in done.values())} rounds already stored"
            if any(done.values())
            else ""
        ),
        highlight=False,
    )
    for h in exp.host_variants:
        if h in names:
            shown = ", ".join(user_text(v.label or v.variant_id) for v in exp.variants_on(h))
            out.print(f"  {h}: {shown}", highlight=False)
    _print_asked(exp)
    out.print(f"Results: {target.display}", highlight=False)
    out.print("Next, on each host: blocklab agent --host NAME · then: blocklab fleet status")


def _fleet_hosts(exp: Experiment, names: list[str] | None) -> list[str]:
    """--hosts, or the hosts of [fleet.hosts]; every variant must run on one of them."""
    if names is None:
        if not exp.host_variants:
            raise UserError(
                "--hosts: give host names separated by commas (e.g. a,b,c), or a "
                "[fleet.hosts] table in FILE"
            )
        names = list(exp.host_variants)
    unplaced = exp.unplaced(names)
    if unplaced:
        raise UserError(
            f"--hosts: no host of {', '.join(names)} runs {', '.join(map(repr, unplaced))} "
            f"([fleet.hosts] names {', '.join(exp.host_variants)}); allowed: "
            "hosts that cover every variant"
        )
    return names


@fleet_group.command("status")
@results_option
@click.option("--experiment", help="only this experiment")
def status_cmd(results: str | None, experiment: str | None) -> None:
    """Queued, running, done and failed jobs per host, with an ETA."""
    from rich.table import Table

    from blocklab.fleet import queue
    from blocklab.fleet.status import fleet_status, fmt_eta, trust_asked

    _, target = _target(results)
    queue.require_installed(target)
    with queue.connect(target) as conn:
        rows = fleet_status(conn, experiment)
        asked = trust_asked(conn, [s.experiment for s in rows])
    out = console()
    table = Table(title=f"fleet jobs in {target.display}")
    for col in (
        "experiment",
        "host",
        "queued",
        "running",
        "done",
        "failed",
        "cancelled",
        "ETA",
        "agent",
    ):
        table.add_column(
            col,
            justify="right"
            if col in ("queued", "running", "done", "failed", "cancelled")
            else "left",
        )
    for s in rows:
        c = s.counts
        eta = s.eta_s
        table.add_row(
            s.experiment, s.host, str(c["todo"]), str(c["doing"]), str(c["succeeded"]),
            str(c["failed"]), str(c["cancelled"]),
            fmt_eta(eta),
            s.agent,
        )  # fmt: skip
    out.print(table)
    for s in rows:
        for f in s.failures:
            out.print(f"failed on {s.host} ({s.experiment}) {user_text(f)}", highlight=False)
        if s.vanished:
            out.print(
                f"host {s.host} has vanished with {s.remaining} jobs left: "
                f"blocklab fleet cancel --host {s.host}, or fleet move --from {s.host} --to OTHER",
                highlight=False,
            )
    for name, names in asked.items():
        out.print(
            f"experiment {name} asks for what an agent's owner must allow: its agents need "
            f"--allow {','.join(names)}",
            highlight=False,
        )
    if not rows:
        out.print("no fleet jobs")


@fleet_group.command("cancel")
@click.option("--host", "host", required=True, help="the host whose queued jobs are cancelled")
@results_option
@click.option("--experiment", help="only this experiment's jobs")
def cancel_cmd(host: str, results: str | None, experiment: str | None) -> None:
    """Cancel a host's jobs that have not started (a dead agent's job included)."""
    from blocklab.fleet import control, queue
    from blocklab.fleet.hosts import check_host

    check_host(host)
    _, target = _target(results)
    queue.require_installed(target)
    gone = control.cancel(target, host, experiment)
    console().print(f"host {host}: {len(gone)} jobs cancelled", highlight=False)


@fleet_group.command("move")
@click.option("--from", "src", required=True, help="the host whose queued jobs move")
@click.option("--to", "dst", required=True, help="the host that runs them instead")
@results_option
@click.option("--experiment", help="only this experiment's jobs")
def move_cmd(src: str, dst: str, results: str | None, experiment: str | None) -> None:
    """Move a host's queued rounds to another host, as extra rounds of that host (a round
    measured on one host is never counted as another's)."""
    from blocklab.fleet import control, queue, registry
    from blocklab.fleet.hosts import check_host
    from blocklab.store.factory import open_store

    check_host(src, "--from")
    check_host(dst, "--to")
    if src == dst:
        raise UserError(f"--to: the same host as --from ({src})")
    spec, target = _target(results)
    queue.require_installed(target)
    with open_store(spec) as db:
        last = {
            e["name"]: max((r for (_v, r, _c) in db.run_keys(e["name"], dst)), default=0)
            for e in db.experiments()
        }
    with queue.connect(target) as conn:
        subs = [
            x
            for x in registry.all_submissions(conn)
            if experiment in (None, x.name) and src in x.hosts
        ]
    for sub in subs:  # [fleet.hosts]: the rounds move only to a host that runs src's share
        exp = sub.experiment()
        missing = {v.variant_id for v in exp.variants_on(src)} - {
            v.variant_id for v in exp.variants_on(dst)
        }
        if missing:
            labels = ", ".join(repr(exp.variant(m).label) for m in sorted(missing))
            raise UserError(
                f"--to: {dst} does not run {labels} of {src}'s share of experiment "
                f"'{sub.name}' ([fleet.hosts]); allowed: a host that runs them, or "
                f"blocklab fleet cancel --host {src}"
            )
    moved = control.move(target, src, dst, experiment, last)
    console().print(f"{len(moved)} jobs moved from {src} to {dst}", highlight=False)


@click.command("agent")
@click.option("--host", "host", required=True, help="this host's name in the fleet")
@results_option
@click.option("--until-idle", is_flag=True, help="stop when the host's queue is empty")
@allow_options
def agent_cmd(
    host: str,
    results: str | None,
    until_idle: bool,
    allow: tuple[str, ...],
    allow_command_settings: bool,
) -> None:
    """Run this host's fleet jobs, one at a time, until stopped (SIGINT/SIGTERM let the
    current job finish)."""
    from blocklab.fleet.agent import Agent
    from blocklab.fleet.hosts import check_host
    from blocklab.paths import Paths

    check_host(host)
    grant = granted(allow, allow_command_settings)
    spec, target = _target(results)
    err = console(stderr=True)
    err.print(f"agent {host}: results and queue in {target.display}", highlight=False)
    paths = Paths.from_env()
    from blocklab.postgres.cluster import open_home

    open_home(paths, lambda m: err.print(m, highlight=False))  # before the first job
    agent = Agent(host, target, spec, paths, lambda m: err.print(m, highlight=False))
    agent.granted = grant
    agent.serve(until_idle=until_idle)
    err.print(f"agent {host}: {agent.jobs_done} jobs done", highlight=False)


COMMANDS: list[click.Command] = [fleet_group, agent_cmd]

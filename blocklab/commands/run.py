"""CLI command: run (an experiment file, or the built-in demo)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from blocklab import proc
from blocklab.commands.options import (
    RunFlags,
    allow_options,
    check_trust,
    granted,
    results_option,
    run_options,
)
from blocklab.console import console
from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:  # the heavy modules (scipy, pydantic models) load when a command runs
    from blocklab.execution.experiment import Outcome, StoppingRule
    from blocklab.execution.lab import DatasetInfo, Lab
    from blocklab.experiment_file import Experiment
    from blocklab.model import Variant


def _paths() -> Paths:
    return Paths.from_env()


@click.command("run")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@results_option
@run_options
@click.option("--quiet", "-q", is_flag=True, help="one line per run instead of a progress bar")
@allow_options
def run_cmd(
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
    quiet: bool,
    allow: tuple[str, ...],
    allow_command_settings: bool,
) -> None:
    """Run an experiment file, or the built-in demo (4 kB vs 8 kB pages) without one."""
    flags = RunFlags(
        rounds, duration, scale, clients, until_ci, max_rounds, time_budget, cycles, slices
    )
    flags.check()
    grant = granted(allow, allow_command_settings)
    if file is not None and not file.is_file():
        raise UserError(f"FILE: no experiment file at {file}")
    from blocklab.execution.experiment import StoppingRule
    from blocklab.execution.preflight import check_machine
    from blocklab.postgres.cluster import open_home
    from blocklab.store.factory import check_results

    paths = _paths()
    check_results(results)
    exp = flags.load(file)
    stopping = flags.stopping(exp)
    check_trust(exp, grant, file, "blocklab run")
    check_machine(exp, paths)
    from blocklab.commands.plan import cached_installations, catalogue_lookup, check_known_settings

    check_known_settings(exp, catalogue_lookup(cached_installations()))
    # before anything starts: a home made by `mktemp -d` (0700) fails the build's check
    open_home(paths, lambda line: console(stderr=True).print(line, highlight=False))
    rule = StoppingRule(rounds=exp.rounds, **stopping)
    # Ctrl-C (or SIGINT by PID) and SIGTERM interrupt the run wherever it was started
    with proc.interruptible():
        outcome, datasets = _execute(exp, paths, results, rule, quiet or not sys.stderr.isatty())
    _print_results(exp.name, results, outcome.end_reason, [d.init_s for d in datasets])
    if outcome.runs_failed:
        raise click.exceptions.Exit(1)


def _print_results(name: str, results: str | None, end_reason: str, init_s: list[float]) -> None:
    """The summary, the plans, and last the answer (blocklab.analysis.first_screen)."""
    from blocklab.analysis.first_screen import print_first_screen
    from blocklab.analysis.query_summary import summarize_queries
    from blocklab.analysis.query_table import print_queries
    from blocklab.analysis.summary import restore_note, summarize_experiment
    from blocklab.analysis.summary_table import print_summary
    from blocklab.store.factory import open_results

    out = console()
    with open_results(results) as db:
        db.read_ahead(name)  # the finished runs and their metrics read once (blocklab summary)
        summary = summarize_experiment(db, name)
        print_summary(out, summary, answer=False)  # the answer comes last, below
        queries = summarize_queries(db, name)
        if queries is not None:  # the plans side by side: blocklab summary
            print_queries(out, queries, diffs=False)
        out.print(restore_note(db, name, init_s), highlight=False)
        where = db.location
    out.print(f"\n{end_reason}. Results: {where} (experiment '{name}').")
    out.print("Next: blocklab summary · blocklab report · blocklab export --csv DIR")
    out.print()
    print_first_screen(out, summary)  # the last lines: the answer, with the A/A check


def _execute(
    exp: Experiment, paths: Paths, results: str | None, rule: StoppingRule, quiet: bool
) -> tuple[Outcome, list[DatasetInfo]]:
    from blocklab.execution import run_lock
    from blocklab.execution.controls import RunControls
    from blocklab.execution.experiment import Loop, register
    from blocklab.execution.lab import Lab
    from blocklab.execution.progress import BarProgress, QuietProgress
    from blocklab.host import host_facts
    from blocklab.postgres.build import build_key
    from blocklab.state import State
    from blocklab.storage.cleanup import release_report
    from blocklab.store import results_space
    from blocklab.store.factory import open_results

    err = console(stderr=True)
    state = State(paths.state_file)
    for line in release_report(state, only_dead_owners=True).lines():
        err.print(f"what a killed blocklab left behind: {line}")
    progress = QuietProgress(err) if quiet else BarProgress(err)
    db = open_results(results)
    try:
        # one run of an experiment into its results at a time; a full results disk is
        # a clear error wherever it strikes (every stored run is kept)
        with run_lock.held(db.directory, exp.name, db.location), results_space.guard(db.directory):
            variants = register(db, exp, host_facts())
            err.print(
                f"experiment '{exp.name}': {len(variants)} variants, seed {exp.seed}, "
                f"results in {db.location}"
            )
            references = {v.variant_id: exp.variant(exp.reference_for(v)) for v in variants}
            controls = RunControls.from_design(exp.run_design)
            with Lab(
                paths,
                state,
                log=progress.note,
                references=references,
                variants=variants,
                controls=controls,
            ) as lab:
                loop = Loop(exp, variants, db=db, lab=lab, progress=progress)
                loop.check_builds(rule, lambda v: build_key(v.build, paths))
                _prepare(lab, variants, err)
                return loop.run(rule), list(lab.datasets.values())
    except KeyboardInterrupt:
        db.set_experiment_state(
            exp.name, "interrupted", "interrupted; run the same command to resume"
        )
        raise
    finally:
        progress.close()
        db.close()


def _prepare(lab: Lab, variants: list[Variant], console: Console) -> None:
    """Builds, storages and datasets before the first measured run, so that a failed
    build stops the experiment at once and run times (and the ETA) are runs only."""
    for v in variants:
        lab.prepare(v)
    for info in lab.datasets.values():
        made = "made" if info.made_now else "found"
        console.print(
            f"dataset {info.key} ({info.description}, fillfactor {info.fillfactor}): {made}; "
            f"initialisation {fmt_seconds(info.init_s)}, snapshot {fmt_seconds(info.snapshot_s)}, "
            f"{fmt_bytes(info.size_bytes)} (tables {fmt_bytes(info.table_bytes)}, "
            f"indexes {fmt_bytes(info.index_bytes)})",
            highlight=False,
        )


COMMANDS: list[click.Command] = [run_cmd]

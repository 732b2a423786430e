"""What `plan` prints of the experiment as it will run: the parameters every variant
shares, the driver command of one run, what is already stored, and the commands its
hints name (with the file, so that a hint pasted as printed plans that file)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from blocklab.errors import BlocklabError
from blocklab.execution.plan import Plan
from blocklab.experiment_file import Experiment
from blocklab.model import Variant
from blocklab.postgres.installation import Installation
from blocklab.workloads import drivers, sizing
from blocklab.workloads.base import Endpoint

# placeholders for what only a run knows (the build's directory, the server's socket)
BUILD_DIR = Path("BUILD")
SOCKET_DIR, PORT_PLACEHOLDER, USER = "SOCKET_DIR", 0, "USER"

FIXED: dict[str, Callable[[Variant], str]] = {
    "postgres": lambda v: (
        v.build.pg + (f" from {v.build.source}" if v.build.source != "debian" else "")
    ),
    "data page": lambda v: f"{v.build.block_size_kb} kB",
    "WAL block": lambda v: f"{v.build.wal_block_size_kb} kB",
    "WAL segment": lambda v: f"{v.wal_segsize_mb} MB",
    "data checksums": lambda v: "on" if v.data_checksums else "off",
    "storage": lambda v: v.storage.label(),
    "data": lambda v: _dataset_label(v),
    "workload": lambda v: _workload_label(v),
    "clients": lambda v: str(v.workload.clients),
    "threads": lambda v: str(v.workload.threads),
    "warm-up": lambda v: f"{v.workload.warmup_s} s",
    "measured": lambda v: f"{v.workload.duration_s} s",
}


def _dataset_label(v: Variant) -> str:
    return drivers.for_dataset(v.dataset).dataset_label(v.dataset)


def _workload_label(v: Variant) -> str:
    w = v.workload
    what = w.builtin or " + ".join(Path(s).name for s in w.scripts) or w.driver
    return f"{w.driver} {what}, query mode {w.query_mode}" if w.driver == "pgbench" else what


def fixed_parameters(exp: Experiment, variants: list[Variant]) -> list[tuple[str, str]]:
    """The parameters with one value in every variant, in FIXED's order; a cycles design
    measures whole checkpoint cycles, not matrix.duration (cycles.window_line says so)."""
    out = []
    for name, of in FIXED.items():
        values = {of(v) for v in variants}
        if len(values) == 1:
            out.append((name, values.pop()))
    if exp.run_design.checkpoint == "cycles":
        out = [(n, v) for n, v in out if n != "measured"]
    return out


def driver_command(v: Variant) -> str:
    """The argv of one measured run of `v`, the build's directory, the socket, the port
    and the user as placeholders (logs go to the run's raw directory, RAW)."""
    inst = Installation(
        prefix=BUILD_DIR,
        key="plan",
        version=v.build.pg,
        block_size_bytes=v.build.block_size_kb * 1024,
        wal_block_size_bytes=v.build.wal_block_size_kb * 1024,
    )
    endpoint = Endpoint(SOCKET_DIR, PORT_PLACEHOLDER, USER)
    driver = drivers.for_workload(v.workload)
    try:
        argv = driver.command(inst, endpoint, v.workload, raw_dir=Path("RAW"))
    except BlocklabError as e:
        return f"(not known before the run: {e})"
    port = str(PORT_PLACEHOLDER)
    shown = ["PORT" if a == port and i and argv[i - 1] in ("-p", "--port") else a
             for i, a in enumerate(argv)]  # fmt: skip
    short = getattr(driver, "shown_command", None)  # a driver whose argv holds a file's text
    return str(short(shown)) if short is not None else shlex.join(shown)


def render_run(p: Plan, console: Console) -> None:
    """The fixed parameters on one line and the driver command of the reference's run."""
    fixed = fixed_parameters(p.experiment, p.variants)
    if fixed:
        shown = " · ".join(f"{name} {value}" for name, value in fixed)
        console.print(f"[bold]every variant:[/bold] {shown}", highlight=False)
    first = p.experiment.variant(p.experiment.reference_for(p.variants[0]))
    note = ""
    if p.experiment.run_design.checkpoint == "cycles":
        note = " (-T: the run stops after its whole checkpoint cycles, below)"
    console.print(
        f"[bold]one run ({escape(first.label or first.variant_id)}):[/bold] "
        + escape(driver_command(first) + note),
        highlight=False,
        soft_wrap=True,
    )


def render_room(p: Plan, console: Console) -> None:
    """For a dump dataset, what each storage must hold and what the figure rests on (the
    restored size is measured once a dataset has been restored, estimated before)."""
    dumps = [v for v in p.variants if v.dataset.option("dump") is not None]
    for sreq, needs in sizing.needs_by_storage(dumps).items():
        console.print(
            f"[bold]room ({escape(sreq.label())}):[/bold] "
            + escape(f"{sizing.mb(needs.data.bytes)} for the data volume: {needs.data.how}"),
            highlight=False,
            soft_wrap=True,
        )


def command_for(exp: Experiment, *flags: str) -> str:
    """`blocklab plan FILE FLAGS` for a hint: the file when there is one (the demo's
    command has none), so that the hint pasted as printed plans this experiment."""
    args = ["blocklab", "plan"]
    if exp.source:
        args.append(exp.source)
    return shlex.join([*args, *flags])


def stored_runs(exp: Experiment, results: str | None) -> int:
    """How many of the planned rounds' runs the results database already holds (a re-run
    skips them); 0 without a results database."""
    from blocklab.errors import UserError
    from blocklab.store.factory import open_results

    try:
        with open_results(results, create=False) as db:
            keys = db.run_keys(exp.name)
    except UserError:  # no results stored yet
        return 0
    return sum(1 for (_v, round_no, _c) in keys if round_no <= exp.rounds)

"""Kill points: a test-only way to SIGKILL blocklab at a named step of its work.

Production code calls `step("name")` where a step begins. Nothing happens unless the
environment names that step in BLOCKLAB_KILL_AT (the reliability tests set it):

    BLOCKLAB_KILL_AT=measure          SIGKILL this process as the step begins
    BLOCKLAB_KILL_AT=measure+0.5      SIGKILL it 0.5 s after the step began (the step's
                                      own work, e.g. pgbench, is then under way)

The signal is a real SIGKILL sent to blocklab's own PID (like SQLite's fault injection):
no handler, no `finally`, no cleanup runs; the children (servers, pgbench, cp) live on,
as after a crash or an OOM kill. The code paths exercised are the production ones.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "BLOCKLAB_KILL_AT"

# Every step a kill point can name, in the order an experiment reaches them.
STEPS = (
    "build",  # ensure_build: the cache lookup, then (with a delay) the build itself
    "provision",  # a loop device attached, before mkfs and mount
    "dataset_load",  # the dataset's server is up, before the driver's init commands
    "snapshot",  # the dataset's server stopped, before the copy into the snapshot
    "restore",  # before a run's data directory is replaced by the snapshot
    "server_start",  # the server recorded in State, before pg_ctl start
    "warmup",  # before the warm-up workload
    "measure",  # before the measured workload
    "probes",  # before the probes end (after the measured workload)
    "results_write",  # inside the run's transaction, before COMMIT
    "stored",  # after the run's transaction committed
    "report",  # the site generated into its temporary directory, before the swap
)


def parse(value: str) -> tuple[str, float] | None:
    """'measure+0.5' -> ('measure', 0.5); '' -> None (pure). ValueError for an unknown
    step or a bad delay."""
    if not value:
        return None
    name, _, delay = value.partition("+")
    if name not in STEPS:
        raise ValueError(f"{ENV}: unknown step {name!r} (allowed: {', '.join(STEPS)})")
    delay_s = float(delay) if delay else 0.0
    if delay_s < 0:
        raise ValueError(f"{ENV}: the delay must not be negative (got {delay})")
    return name, delay_s


def step(name: str) -> None:
    """A kill point: SIGKILL this process now (or after the delay) if BLOCKLAB_KILL_AT
    names `name`; nothing otherwise."""
    assert name in STEPS, name
    wanted = parse(os.environ.get(ENV, ""))
    if wanted is None or wanted[0] != name:
        return
    if wanted[1] == 0:
        _kill()
    timer = threading.Timer(wanted[1], _kill)
    timer.daemon = True
    timer.start()


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

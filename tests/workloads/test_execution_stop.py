"""execute(stop_when=...): the driver gets its stop signal once and ends by itself, its
output kept (pgbench's SIGALRM: blocklab.execution.cycles)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from blocklab.workloads.execution import execute

CHILD = (
    "import signal, sys, time\n"
    "done = []\n"
    "signal.signal(signal.SIGALRM, lambda *_: done.append(1))\n"
    "print('started', flush=True)\n"
    "t0 = time.monotonic()\n"
    "while not done and time.monotonic() - t0 < 20: time.sleep(0.05)\n"
    "print('report' if done else 'ran out', flush=True)\n"
)


def test_stop_when_ends_the_driver_cleanly(tmp_path: Path) -> None:
    t0 = time.monotonic()
    res = execute(
        [sys.executable, "-c", CHILD],
        tmp_path,
        "child",
        timeout_s=30,
        server_alive=lambda: True,
        stop_when=lambda: time.monotonic() - t0 > 1.0,
    )
    assert res.exit_code == 0 and res.ended == ""
    assert res.stdout.split() == ["started", "report"]
    assert res.elapsed_s < 5


def test_without_stop_when_it_runs_on(tmp_path: Path) -> None:
    res = execute(
        [sys.executable, "-c", CHILD.replace("< 20", "< 1")],
        tmp_path,
        "child",
        timeout_s=30,
        server_alive=lambda: True,
    )
    assert res.exit_code == 0 and res.stdout.splitlines() == ["started", "ran out"]

"""execute(stop_when=...): the driver gets its stop signal once and ends by itself, its
output kept (pgbench's SIGALRM: blocklab.execution.cycles)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.workloads.execution import execute


@pytest.fixture
def raw(paths: Paths) -> Path:
    """Under the test home: pytest's tmp_path (0700) is closed to the driver's user."""
    return ensure_dir(paths.home / "execution-stop" / uuid.uuid4().hex[:8])


# the system's Python: the driver's user cannot enter the test's own (under /root)
PYTHON = "/usr/bin/python3"
CHILD = (
    "import signal, sys, time\n"
    "done = []\n"
    "signal.signal(signal.SIGALRM, lambda *_: done.append(1))\n"
    "print('started', flush=True)\n"
    "t0 = time.monotonic()\n"
    "while not done and time.monotonic() - t0 < 20: time.sleep(0.05)\n"
    "print('report' if done else 'ran out', flush=True)\n"
)


def test_stop_when_ends_the_driver_cleanly(raw: Path) -> None:
    t0 = time.monotonic()
    res = execute(
        [PYTHON, "-c", CHILD],
        raw,
        "child",
        timeout_s=30,
        server_alive=lambda: True,
        state=State(raw / "state.json"),
        stop_when=lambda: time.monotonic() - t0 > 1.0,
    )
    assert res.exit_code == 0 and res.ended == ""
    assert res.stdout.split() == ["started", "report"]
    assert res.elapsed_s < 5


def test_without_stop_when_it_runs_on(raw: Path) -> None:
    res = execute(
        [PYTHON, "-c", CHILD.replace("< 20", "< 1")],
        raw,
        "child",
        timeout_s=30,
        server_alive=lambda: True,
        state=State(raw / "state.json"),
    )
    assert res.exit_code == 0 and res.stdout.splitlines() == ["started", "ran out"]

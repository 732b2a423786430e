"""blocklab.workloads.execution with real processes: output lands in the raw files, a
driver that outlives its server or its time is ended with its whole process group."""

from __future__ import annotations

import os
import time
from pathlib import Path

from blocklab import proc
from blocklab.workloads.execution import execute

# a "driver" that prints, starts a child in its own process group, and hangs
HANGING = ["sh", "-c", "echo started; echo oops >&2; sleep 300 & echo $! > child.pid; wait"]


def test_exit_code_and_output_in_the_raw_files(tmp_path: Path) -> None:
    res = execute(["sh", "-c", "echo out; echo err >&2; exit 3"], tmp_path, "x",
                  timeout_s=60, server_alive=lambda: True)  # fmt: skip
    assert (res.exit_code, res.stdout, res.stderr, res.ended) == (3, "out\n", "err\n", "")
    assert (tmp_path / "x.stdout").read_text() == "out\n"


def test_a_driver_outliving_its_server_is_ended_with_its_group(tmp_path: Path) -> None:
    argv = [a.replace("child.pid", str(tmp_path / "child.pid")) for a in HANGING]
    t0 = time.monotonic()
    res = execute(argv, tmp_path, "x", timeout_s=600, server_alive=lambda: False, grace_s=1.0)
    assert res.exit_code is None and "after the server died" in res.ended
    assert time.monotonic() - t0 < 300  # not the child's sleep, not the timeout
    assert res.stdout == "started\n" and res.stderr == "oops\n"
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while proc.pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.pid_alive(child)  # the whole group was ended


def test_a_driver_over_its_time_is_ended(tmp_path: Path) -> None:
    res = execute(["sleep", "300"], tmp_path, "x", timeout_s=1, server_alive=lambda: True)
    assert res.exit_code is None and res.ended.startswith("timed out after 1 s")
    assert os.path.exists(tmp_path / "x.stderr")

"""Server faults during `blocklab run`: the postmaster SIGKILLed mid-run, a backend
SIGKILLed mid-run (the server restarts, pgbench aborts), and a variant whose server
refuses to start (a preload library that does not exist: it passes the plan, fails at
start). Each is a failed run with its reason, the experiment goes on, and the variant
that cannot start is tried once, then stored as "not run" and reported once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults_helpers import blocklab, env_for, nothing_left, own_home, release_home, stored_runs

from blocklab.paths import Paths
from blocklab.state import State

pytestmark = [pytest.mark.build, pytest.mark.root, pytest.mark.faults]

EXPERIMENT = """
[experiment]
name = "server-faults"
rounds = 2
reference = "shared_preload_libraries=''"
allow_commands = true  # the missing preload library makes the server refuse to start

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
scale = 1
workload = "simple-update"
clients = 2
duration = 4
warmup = 0

[matrix.settings]
shared_preload_libraries = ["''", "blocklab_no_such_library"]
"""


def _measuring(results: Path) -> Path | None:
    """The raw directory of a run whose measured pgbench is running."""
    for argv in (results / "runs").glob("*/*/pgbench.argv"):
        if not (argv.parent / "pgbench.exit_code").exists():
            return argv.parent
    return None


def _postmaster(home: Path) -> int | None:
    pids = [e.info.get("pid") for e in State(home / "state.json").entries() if e.kind == "server"]
    return int(pids[0]) if pids and pids[0] else None


def _backends(postmaster: int) -> list[int]:
    """Client backends of `postmaster` (their title names the user and database)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            title = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster and title.startswith("postgres: blocklab postgres"):
            found.append(int(entry.name))
    return found


def test_server_faults_are_failed_runs_and_the_experiment_goes_on(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    home = own_home(paths, "srv")
    exp = home / "x.toml"
    exp.write_text(EXPERIMENT)
    results = home / "results"
    out = home / "run.out"
    with open(out, "wb") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "blocklab.cli", "run", str(exp), "--results", str(results)]
            + ["--quiet", "--allow-command-settings"],
            env=env_for(home, paths),
            stdout=f,
            stderr=f,
        )
    faults: dict[Path, str] = {}  # raw dir -> what was killed in it
    try:
        deadline = time.monotonic() + 600
        while p.poll() is None and time.monotonic() < deadline:
            raw = _measuring(results) if (results / "runs").exists() else None
            pm = _postmaster(home)
            if raw is not None and raw not in faults and pm:
                time.sleep(1.0)  # pgbench is connected and running
                if not faults:
                    os.kill(pm, signal.SIGKILL)
                    faults[raw] = "postmaster"
                else:
                    backends = _backends(pm)
                    assert backends, "no client backend to kill"
                    os.kill(backends[0], signal.SIGKILL)
                    faults[raw] = "backend"
            time.sleep(0.1)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = out.read_text()

    try:
        assert p.returncode == 1, text  # failed runs: exit 1, after every planned run
        assert sorted(faults.values()) == ["backend", "postmaster"], (faults, text)
        runs = stored_runs(results)
        assert len(runs) == 4 and len({(v, n) for v, n, _, _ in runs}) == 4, runs
        assert all(s == "failed" for _, _, s, _ in runs), runs
        by_raw = {raw.name.split("-")[0]: kind for raw, kind in faults.items()}
        reasons = {(n, why) for _, n, _, why in runs}
        good = [why for n, why in reasons if "server did not start" not in why]
        assert len(good) == 2, reasons
        killed_pm = next(w for w in good if "the server died during the run" in w)
        assert "pgbench exit code" in killed_pm, killed_pm
        killed_backend = next(w for w in good if w != killed_pm)
        assert "pgbench exit code 2" in killed_backend, killed_backend
        assert "the server died" not in killed_backend  # it restarted after the crash
        bad = sorted((n, why) for n, why in reasons if "server did not start" in why)
        assert [n for n, _ in bad] == [1, 2], bad
        assert bad[0][1].startswith("RunError: the server did not start"), bad
        assert "blocklab_no_such_library" in bad[0][1], bad
        assert bad[1][1].startswith("not run: the server did not start in round 1"), bad
        assert set(by_raw) == {"r001", "r002"}, by_raw
        # reported once: one line for the start failure, one for the rounds not run
        summary = blocklab("summary", "--results", str(results), env=env_for(home, paths)).stdout
        assert summary.count("not run: the server did not start") == 1, summary
        assert summary.count("round 1: RunError: the server did not start") == 1, summary
        assert nothing_left(home) == {}
    finally:
        release_home(home)

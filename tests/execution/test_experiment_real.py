"""`blocklab run` end to end with real builds, servers and pgbench: interrupted by
SIGKILL in the middle of a run, resumed by the same command, and by Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.paths import Paths, ensure_dir
from blocklab.state import State

pytestmark = [pytest.mark.build, pytest.mark.root]

EXPERIMENT = """
[experiment]
name = "{name}"
rounds = 2
reference = {{ block_size = 4 }}
settings_policy = "bytes"

[matrix]
postgres = "18"
block_size = [4, 8]
wal_block_size = 8
scale = 1
workload = "simple-update"
clients = 2
duration = 3

[matrix.settings]
bgwriter_lru_maxpages = 100
"""


def _blocklab(*args: str) -> list[str]:
    return [sys.executable, "-m", "blocklab.cli", *args]


def _runs(results: Path) -> list[tuple[str, int, str]]:
    db = results / "blocklab.sqlite"
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as c:
        try:
            return list(c.execute("SELECT variant_id, round, status FROM runs"))
        except sqlite3.OperationalError:
            return []


def _sessions(results: Path) -> dict[tuple[str, int], str]:
    """(variant id, round) -> the session its stored run names (analysis/sessions.py)."""
    with sqlite3.connect(results / "blocklab.sqlite", timeout=30) as c:
        rows = c.execute(
            "SELECT variant_id, round, json_extract(provenance_json, '$.session') FROM runs"
        )
        return {(vid, rnd): session for vid, rnd, session in rows}


def _setting(results: Path, name: str) -> dict[str, str]:
    """block_size -> the setting's effective value, read back from pg_settings."""
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        rows = [json.loads(r[0]) for r in c.execute("SELECT settings_json FROM runs")]
    return {r["block_size"]["setting"]: r[name]["setting"] for r in rows}


def _wait_for(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _servers_of(paths: Paths) -> list[int]:
    return [e.info.get("pid") or 0 for e in State(paths.state_file).entries() if e.kind == "server"]


@pytest.fixture
def experiment_file(paths: Paths, request: pytest.FixtureRequest) -> Path:
    d = ensure_dir(paths.home / "exp" / request.node.name)
    f = d / "x.toml"
    f.write_text(EXPERIMENT.format(name=request.node.name.replace("_", "-")))
    return f


def _start(experiment_file: Path, results: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _blocklab("run", str(experiment_file), "--results", str(results), "--quiet"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _pgbench_running(results: Path) -> bool:
    """A run's measured pgbench has started (argv written) and not ended (no exit code)."""
    runs_dir = results / "runs"
    started = list(runs_dir.glob("*/*/pgbench.argv")) if runs_dir.exists() else []
    return any(not (p.parent / "pgbench.exit_code").exists() for p in started)


def test_sigkill_mid_run_then_resume_ends_with_the_planned_runs(
    paths: Paths,
    pg18_4k,
    pg18_8k,
    experiment_file: Path,  # type: ignore[no-untyped-def]
) -> None:
    results = paths.home / "results-kill"
    p = _start(experiment_file, results)
    try:
        _wait_for(lambda: len(_runs(results)) >= 1, 600, "the first stored run")
        _wait_for(lambda: _pgbench_running(results), 120, "a run in progress")
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    before = _runs(results)
    assert 1 <= len(before) < 4
    again = subprocess.run(
        _blocklab("run", str(experiment_file), "--results", str(results), "--quiet"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    after = _runs(results)
    keys = [(vid, rnd) for vid, rnd, _ in after]
    assert len(keys) == 4 and len(set(keys)) == 4
    assert {s for _, _, s in after} == {"ok"}
    assert set(before) <= set(after)  # finished runs were kept, not redone
    assert "resuming: " in again.stderr
    # each loop names its session in the runs it stores: the killed one's, the resumed one's
    sessions = _sessions(results)
    first = {sessions[(vid, rnd)] for vid, rnd, _ in before}
    later = {sessions[k] for k in keys} - first
    assert len(first) == 1 and len(later) == 1 and None not in first | later, sessions
    # the bytes policy took the reference's (4 kB) page size: 100 pages of 4 kB = 50 of 8 kB
    assert _setting(results, "bgwriter_lru_maxpages") == {"4096": "100", "8192": "50"}
    assert _servers_of(paths) == []
    summary = subprocess.run(
        _blocklab("summary", "--results", str(results)), capture_output=True, text=True
    )
    assert summary.returncode == 0 and "bs=4k" in summary.stdout, summary.stdout
    # one more round with another compiler flag: another build of the same variants,
    # refused before anything is built or run (analysis/mixed_inputs.py says why)
    builds = sorted(p.name for p in paths.builds.iterdir())
    other = subprocess.run(
        _blocklab("run", str(experiment_file), "--results", str(results), "--rounds", "3"),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COPT": "-O1"},
    )
    assert other.returncode == 2, other.stdout + other.stderr
    assert "resuming would pool two servers in one variant" in other.stderr
    assert other.stderr.count("stored runs on pg18") == 2  # bs=4k and bs=8k
    assert _runs(results) == after and sorted(p.name for p in paths.builds.iterdir()) == builds


def test_ctrl_c_stops_after_releasing_what_was_started(
    paths: Paths,
    pg18_4k,
    pg18_8k,
    experiment_file: Path,  # type: ignore[no-untyped-def]
) -> None:
    results = paths.home / "results-int"
    p = _start(experiment_file, results)
    try:
        _wait_for(lambda: _pgbench_running(results), 600, "the first run in progress")
        server_pids = _servers_of(paths)
        assert server_pids, "a running experiment records its server in the state file"
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, out.decode()
    assert all(not proc.pid_alive(pid) for pid in server_pids if pid)
    assert _servers_of(paths) == []
    assert State(paths.state_file).entries() == []

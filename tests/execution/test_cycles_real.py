"""checkpoint = "cycles" end to end with a real build, server and pgbench: checkpoint_timeout
30 s and one cycle; the measured window opens at a timed checkpoint's start and pgbench is
ended (SIGALRM, its report intact) when the next one starts. Quiesce is recorded too.
Written for the CI with builds (markers build, root); about 2 minutes per run."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from blocklab.paths import Paths, ensure_dir

pytestmark = [pytest.mark.build, pytest.mark.root, pytest.mark.alongside(2)]

EXPERIMENT = """
[experiment]
name = "cycles-real"
rounds = 1

[design]
checkpoint = "cycles"
cycles = 1
quiesce_max_s = 10

[matrix]
postgres = "18"
block_size = 8
scale = 1
workload = "simple-update"
clients = 2
duration = 4
warmup = 2

[matrix.settings]
checkpoint_timeout = "30s"
max_wal_size = "1GB"
"""


def test_a_run_measures_one_whole_timed_cycle(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    d = ensure_dir(paths.home / "exp" / "cycles-real")
    f = d / "x.toml"
    f.write_text(EXPERIMENT)
    results = paths.home / "results-cycles"
    done = subprocess.run(
        [sys.executable, "-m", "blocklab.cli", "run", str(f), "--results", str(results), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        c.row_factory = sqlite3.Row
        (run,) = list(c.execute("SELECT * FROM runs"))
        metrics = {
            r["name"]: r["value"]
            for r in c.execute("SELECT name, value FROM metrics WHERE run_id = ?", (run["id"],))
        }
    assert run["status"] == "ok", run["reason"]
    prov = json.loads(run["provenance_json"])
    assert prov["controls"]["checkpoint"] == {"mode": "cycles", "cycles": 1}
    (cycle,) = prov["cycles"]["cycles"]
    assert cycle["timed"] and cycle["trigger"] == "time"
    assert cycle["length_s"] == pytest.approx(30, abs=1.5)
    assert -1.0 <= cycle["start_s"] <= 0.2  # the window opens at the checkpoint's start
    assert cycle["checkpoint_end_s"] < cycle["end_s"]
    assert metrics["checkpoint_cycles"] == 1 and metrics["checkpoint_cycles_timed"] == 1
    # pgbench was ended early by its own -T signal and still printed its report
    assert run["tps"] and run["tps"] > 0
    assert 28 <= metrics["workload_s"] <= 34
    assert "-T 60" in run["command"]
    assert "quiesce_wait_s" in metrics and prov["quiesce"]["max_s"] == 10

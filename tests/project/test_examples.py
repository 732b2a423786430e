"""Every file in examples/ runs end to end: one round of 2-second runs at scale 1, with
real builds, servers, pgbench, sysbench, go-tpc and (fs-block-size) loop-device file
systems. `--scale 1` is each driver's smoke size (sysbench: at most 1,000 rows per table;
tpcc: 1 warehouse)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.paths import Paths
from blocklab.store import ResultsDB

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
SMOKE = {"scale": 1, "duration": 2}


def test_every_example_is_covered() -> None:
    assert [p.name for p in EXAMPLES] == [
        "fillfactor-footprint.toml",
        "fillfactor.toml",
        "fs-block-size.toml",
        "page-size-device.toml",
        "page-size.toml",
        "seed002-tpch-pagesize.toml",
        "seed003-tpcc-fillfactor.toml",
        "seed004-sysbench-walblock.toml",
        "wal-block-clients.toml",
    ]


@pytest.mark.build
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="fs-block-size needs loop devices (root)")
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_end_to_end(example: Path, paths: Paths, tmp_path: Path) -> None:
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "blocklab.cli", "run", str(example), "--rounds", "1", "-q"]
    argv += ["--results", str(results), "--scale", "1", "--duration", "2"]
    started = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=dict(os.environ))
    took_s = time.monotonic() - started
    print(f"{example.name}: {took_s:.0f} s")  # shown with -s; the figure in the report
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    exp = spec.load(example, SMOKE)
    with ResultsDB(results, create=False) as db:
        runs = db.runs(exp.name)
    assert len(runs) == len(exp.variants())
    assert {run["status"] for run in runs} == {"ok"}, [run["reason"] for run in runs]
    assert f"{exp.name}: " in r.stdout  # the summary's title

"""The README's first command, `make demo`, run from the repository root as a user runs it
(with small numbers through DEMO_ARGS): PostgreSQL builds under make, the runs, the summary.

Both of the demo's builds are the session's cached ones (tests/prebuild.py makes them in the
background on CI's empty cache, under the parent make's variables like every test build:
what once broke a build started from `make demo`)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from blocklab.paths import Paths, ensure_dir
from blocklab.postgres.installation import Installation
from blocklab.state import State

pytestmark = [pytest.mark.build, pytest.mark.builds((8, 8), (4, 8)), pytest.mark.alongside(8)]

REPO = Path(__file__).resolve().parents[2]
# 2 rounds: the fewest that give a paired comparison with an interval (each variant first
# once, and on each storage slot once); each round 2 x 2 slices of 5 s (--slices: the
# demo's 4 are clock-bound CPU that CI's builds need), whatever the scale.
DEMO_ARGS = "--rounds 2 --slices 2 --scale 1 --clients 2 --quiet"
NUMBER = r"\d[\d,]*(?:\.\d+)?"


@pytest.mark.timeout(2400)
def test_make_demo_prints_a_summary_comparing_4k_with_the_8k_reference(
    paths: Paths, pg18_8k: Installation
) -> None:
    home = ensure_dir(paths.home / f"make-demo-{uuid.uuid4().hex[:6]}")
    env = {k: v for k, v in os.environ.items() if k != "BLOCKLAB_RESULTS"}
    env |= {"BLOCKLAB_HOME": str(home), "BLOCKLAB_CACHE": str(paths.cache)}
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["make", "-C", str(REPO), "demo", f"DEMO_ARGS={DEMO_ARGS}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=2300,
        )
        print(f"make demo: {time.monotonic() - started:.0f} s\n{done.stdout}")
        out = done.stdout
        assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
        runs = _runs(home / "results")
        assert State(home / "state.json").entries() == []  # servers stopped and forgotten
    finally:
        shutil.rmtree(home, ignore_errors=True)

    # the demo's design is interleaved: one record per variant per round (copy_index 0)
    assert sorted(runs) == sorted(
        (label, rnd, 0) for label in ("bs=4k", "bs=8k") for rnd in (1, 2)
    ), runs
    assert "demo-page-size-interleaved" in out and "2 rounds" in out, out
    rows = {
        label: line
        for line in out.splitlines()
        for label in ("bs=4k", "bs=8k")
        if label in line and "│" in line
    }
    assert set(rows) == {"bs=4k", "bs=8k"}, out
    ref, other = rows["bs=8k"], rows["bs=4k"]
    assert "reference" in ref, ref
    assert re.search(rf"{NUMBER} ± {NUMBER}", ref), ref  # mean ± stdev
    assert len(re.findall(NUMBER, ref)) >= 6, ref  # n, mean, stdev, min, median, max, ...
    gain = re.search(r"([+-]\d+\.\d) %", other)  # 4 kB pages against the 8 kB reference
    assert gain is not None, other
    assert "Results: " in out and "blocklab summary" in out, out


def _runs(results: Path) -> list[tuple[str, int, int]]:
    """(variant label, round, copy_index) of every stored run; each must have succeeded."""
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        rows = c.execute(
            "SELECT v.label, r.round, r.copy_index, r.status, r.reason FROM runs r "
            "JOIN variants v ON v.experiment = r.experiment AND v.variant_id = r.variant_id"
        ).fetchall()
    assert {status for *_, status, _ in rows} == {"ok"}, rows
    return [(label, rnd, copy) for label, rnd, copy, _, _ in rows]

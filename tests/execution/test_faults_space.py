"""Out of space. A run that writes more than its loop-device storage holds (a bulk
INSERT from a custom script: the plan-time estimate covers the pgbench tables and
max_wal_size, not what a script adds) is stored failed with "no space left on
<device>", its server stopped, its volume released, and the next variants run. A full
results directory (the SQLite file's own disk, a tiny loop file system here) stops the
experiment with a clear error; no stored run is lost and the same command resumes."""

from __future__ import annotations

import errno
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest
from faults_helpers import (
    blocklab,
    env_for,
    integrity_ok,
    nothing_left,
    own_home,
    release_home,
    stored_runs,
)

from blocklab import proc
from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.storage import loopfs
from blocklab.storage.cleanup import release_report

pytestmark = [pytest.mark.build, pytest.mark.root, pytest.mark.faults]

DATA = Path(__file__).parents[1] / "data" / "faults"
MIB = 1024 * 1024

FULL_VOLUME = """
[experiment]
name = "full-volume"
rounds = 2
reference = "simple-update"

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
storage = { kind = "ext4" }
scale = 1
workload = ["simple-update", { scripts = ["fill.sql"] }]
clients = 1
duration = 2
warmup = 0

[matrix.settings]
max_wal_size = "32MB"
"""


def test_a_full_volume_fails_the_run_and_the_next_variant_runs(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    home = own_home(paths, "fullvol")
    shutil.copy(DATA / "fill.sql", home / "fill.sql")
    exp = home / "x.toml"
    exp.write_text(FULL_VOLUME)
    results = home / "results"
    try:
        r = blocklab(  # --allow scripts: fill.sql runs as the superuser (the trust boundary)
            "run",
            str(exp),
            "--results",
            str(results),
            "--quiet",
            "--allow",
            "scripts",
            env=env_for(home, paths),
        )
        assert r.returncode == 1, r.stdout + r.stderr  # failed runs: exit 1
        with closing(sqlite3.connect(results / "blocklab.sqlite")) as c:
            rows = list(
                c.execute(
                    "SELECT v.label, r.status, r.reason FROM runs r JOIN variants v"
                    " ON v.experiment = r.experiment AND v.variant_id = r.variant_id"
                    " ORDER BY r.id"
                )
            )
        assert len(rows) == 4, rows
        fills = [why for label, s, why in rows if label == "fill"]
        assert len(fills) == 2 and all(
            why.startswith("no space left on /dev/loop") for why in fills
        )
        assert all("the data volume" in why and "No space left on device" in why for why in fills)
        assert [s for label, s, _ in rows if label == "simple-update"] == ["ok", "ok"], rows
        # a variant ran after a full volume: on a fresh one (the full one was released)
        first_fill = next(i for i, (label, _, _) in enumerate(rows) if label == "fill")
        assert any(label == "simple-update" for label, _, _ in rows[first_fill + 1 :]), rows
        assert r.stderr.count("released the full storage") == 2, r.stderr
        assert nothing_left(home) == {}
    finally:
        release_home(home)


SMALL = """
[experiment]
name = "full-results"
rounds = 3

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
scale = 1
workload = "simple-update"
clients = 1
duration = 1
warmup = 0
"""


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full."""
    filler = directory / "filler"
    chunk = b"\0" * MIB
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def test_a_full_results_disk_stops_with_a_clear_error(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    home = own_home(paths, "fullres")
    exp = home / "x.toml"
    exp.write_text(SMALL)
    disk = ensure_dir(paths.home / f"resdisk-{uuid.uuid4().hex[:6]}")
    disk_state = State(disk / "state.json")
    results = disk / "mnt"
    try:
        image = disk / "results.img"
        loopfs.create_image(image, 32 * MIB, disk_state)
        device = loopfs.attach(image, disk_state)
        proc.run(["mkfs.ext4", "-q", "-m", "0", device], timeout_s=120)
        loopfs.mount(device, results, "ext4", (), disk_state)
        args = ["run", str(exp), "--results", str(results), "--quiet"]
        out = home / "run.out"
        with open(out, "wb") as f:
            p = subprocess.Popen(
                [sys.executable, "-m", "blocklab.cli", *args],
                env=env_for(home, paths),
                stdout=f,
                stderr=f,
            )
        try:
            deadline = time.monotonic() + 600
            while not stored_runs(results):
                assert p.poll() is None, out.read_text()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            filler = _fill(results)
            p.wait(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        text = out.read_text()
        assert p.returncode == 1, text
        assert "error: no space left on the results directory" in text, text
        assert "every stored run is kept" in text and "Traceback" not in text, text
        kept = stored_runs(results)
        assert 1 <= len(kept) < 3 and {s for _, _, s, _ in kept} == {"ok"}, kept
        assert integrity_ok(results)
        assert nothing_left(home) == {}
        filler.unlink()
        again = blocklab(*args, env=env_for(home, paths))
        assert again.returncode == 0, again.stdout + again.stderr
        runs = stored_runs(results)
        assert sorted(n for _, n, _, _ in runs) == [1, 2, 3], runs
        assert runs[: len(kept)] == kept and {s for _, _, s, _ in runs} == {"ok"}
    finally:
        release_home(home)
        report = release_report(disk_state, only_dead_owners=False)
        assert not report.failed, report.failed  # nothing of the test's keeps the disk busy

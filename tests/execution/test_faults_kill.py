"""Kill at every step: `blocklab run` SIGKILLs itself at each kill point in turn
(blocklab.faults, BLOCKLAB_KILL_AT), then the same command runs again. After every kill
nothing is stored twice and no partial run is counted; everything left behind is in the
state file and `blocklab cleanup` (or the next run) releases it; at the end exactly the
planned runs are stored and no server, mount or loop device is left. The smallest
experiment there is: one variant on an ext4 loop device, scale 1, 1 s warm-up, 1 s run."""

from __future__ import annotations

import pytest
from faults_helpers import (
    blocklab,
    env_for,
    integrity_ok,
    leftovers,
    nothing_left,
    own_home,
    release_home,
    stored_runs,
)

from blocklab import faults
from blocklab.paths import Paths, ensure_dir

pytestmark = [pytest.mark.build, pytest.mark.root, pytest.mark.faults]

EXPERIMENT = """
[experiment]
name = "killed-everywhere"
rounds = 1

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
storage = { kind = "ext4" }
scale = 1
workload = "simple-update"
clients = 1
duration = 1
warmup = 1
"""

# step -> the delay after which blocklab is killed (0: as the step begins; > 0: while
# the step's own work, a pg_ctl start or a pgbench, is under way)
KILL_AT = {
    "build": 0,
    "provision": 0,
    "dataset_load": 0.05,  # inside pgbench -i (scale 1 takes ~0.3 s on a quiet machine)
    "snapshot": 0.1,
    "restore": 0,
    "server_start": 0.2,
    "warmup": 0.5,
    "measure": 0.5,
    "probes": 0,
    "results_write": 0,
    "stored": 0,
}


# what a kill at these steps leaves behind (proof that the kill hit the step's work)
LEFT_BEHIND = {
    "provision": {"loops"},
    "dataset_load": {"servers", "mounts", "loops"},
    "server_start": {"mounts", "loops"},
    "warmup": {"servers", "mounts", "loops", "drivers"},
    "measure": {"servers", "mounts", "loops", "drivers"},
}


def test_kill_at_every_step_then_run_again(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    assert set(KILL_AT) | {"report"} == set(faults.STEPS)
    home = own_home(paths, "kill")
    exp = home / "x.toml"
    exp.write_text(EXPERIMENT)
    tmp = ensure_dir(home / "tmp")  # TMPDIR: the drivers' working directories are seen
    results = home / "results"
    run = ("run", str(exp), "--results", str(results), "--quiet")
    tried = []
    try:
        for i, (step, delay_s) in enumerate(KILL_AT.items()):
            spec = f"{step}+{delay_s}" if delay_s else step
            r = blocklab(*run, env=env_for(home, paths, TMPDIR=str(tmp), BLOCKLAB_KILL_AT=spec))
            assert r.returncode == -9, f"{spec}: not killed ({r.returncode})\n{r.stderr}"
            tried.append(spec)
            runs = stored_runs(results)
            keys = [(v, n) for v, n, _, _ in runs]
            assert len(keys) == len(set(keys)) == (1 if step == "stored" else 0), (spec, runs)
            assert all(s == "ok" for _, _, s, _ in runs), (spec, runs)
            if runs:
                assert integrity_ok(results)
            # what the kill left behind is recorded; cleanup (or the next run) releases it
            left = leftovers(home)
            assert LEFT_BEHIND.get(step, set()) <= set(left), (spec, left)
            assert not (set(left) - {"state"}) or left.get("state"), (spec, left)
            if i % 2 == 0:
                c = blocklab("cleanup", env=env_for(home, paths, TMPDIR=str(tmp)))
                assert c.returncode == 0, c.stdout + c.stderr
                assert nothing_left(home) == {}, spec
        final = blocklab(*run, env=env_for(home, paths, TMPDIR=str(tmp)))
        assert final.returncode == 0, final.stdout + final.stderr
        runs = stored_runs(results)
        assert [(s, n) for _, n, s, _ in runs] == [("ok", 1)], runs
        assert nothing_left(home) == {}
        # every raw directory belongs to the stored run: the partial ones were discarded
        raw_dirs = sorted(p.name for p in (results / "runs").glob("*/*"))
        assert len(raw_dirs) == 1, raw_dirs

        site = home / "site"
        killed = blocklab(
            "report",
            "--results",
            str(results),
            "--out",
            str(site),
            env=env_for(home, paths, BLOCKLAB_KILL_AT="report"),
        )
        assert killed.returncode == -9, killed.stderr
        tried.append("report")
        assert not site.exists() and list(home.glob(".site.tmp-*"))  # half a site, hidden
        again = blocklab(
            "report", "--results", str(results), "--out", str(site), env=env_for(home, paths)
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert (site / "index.html").is_file()
        assert list(home.glob(".site.*")) == []  # the killed report's leftovers are gone
        assert stored_runs(results) == runs
    finally:
        release_home(home)
        print(f"\nkill points tried: {len(tried)} ({', '.join(tried)})")
    assert len(tried) == len(faults.STEPS)

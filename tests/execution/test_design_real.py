"""Designs end to end with real builds, servers and pgbench: an A B B A round with CPU
placement, a steady warm-up and an aligned checkpoint, stored with copy_index 0/1 and
summarised pair by pair; a placement the machine cannot apply is reported in the record;
`plan` reads the noise of the stored rounds and prints the MDE."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.execution import placement
from blocklab.paths import Paths, ensure_dir

pytestmark = [pytest.mark.build, pytest.mark.root]

EXPERIMENT = """
[experiment]
name = "{name}"
rounds = {rounds}
reference = {{ block_size = 8 }}

[design]
kind = "{kind}"
{warmup}
checkpoint = "aligned"
{placement}

[matrix]
postgres = "18"
block_size = [4, 8]
wal_block_size = 8
scale = 1
workload = "simple-update"
clients = 2
duration = 2
"""


# the smallest bound the file allows; the other designs' tests warm up for no time (the
# matrix's 0 s): warm-ups are clock-bound, and their pgbench takes the CPUs CI's builds need
STEADY = 'warmup = "steady"\nwarmup_max_s = 15'


def _blocklab(*args: str) -> list[str]:
    return [sys.executable, "-m", "blocklab.cli", *args]


def _file(paths: Paths, name: str, **fmt: object) -> Path:
    d = ensure_dir(paths.home / "exp" / name)
    f = d / "x.toml"
    fmt = {"rounds": 1, "kind": "abba", "placement": 'placement = "auto"', "warmup": "", **fmt}
    f.write_text(EXPERIMENT.format(name=name, **fmt))
    return f


def _run(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_blocklab(*args), capture_output=True, text=True, timeout=timeout)


def _rows(results: Path) -> list[sqlite3.Row]:
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        c.row_factory = sqlite3.Row
        return list(c.execute("SELECT * FROM runs ORDER BY round, position"))


@pytest.mark.alongside(4)
def test_abba_round_with_placement_stores_copies_and_the_cpus(
    paths: Paths,
    pg18_4k,
    pg18_8k,  # type: ignore[no-untyped-def]
) -> None:
    if len(placement.machine_cpus()) < 2:
        pytest.skip("placement needs 2 CPUs")
    f = _file(paths, "abba-real", rounds=2, warmup=STEADY)
    results = paths.home / "results-abba"
    done = _run("run", str(f), "--results", str(results), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(results)
    assert {r["status"] for r in rows} == {"ok"}, [r["reason"] for r in rows]
    keys = sorted((r["variant_id"], r["round"], r["copy_index"]) for r in rows)
    vids = sorted({k[0] for k in keys})
    assert keys == sorted((v, rnd, c) for v in vids for rnd in (1, 2) for c in (0, 1))
    for r in rows:  # A B B A: a variant's copies sit symmetrically in the round
        twin = next(
            o
            for o in rows
            if o["variant_id"] == r["variant_id"] and o["round"] == r["round"] and o is not r
        )
        assert r["position"] + twin["position"] == 3
        prov = json.loads(r["provenance_json"])
        assert prov["controls"]["checkpoint"]["mode"] == "aligned"
        assert prov["settings_written"]["checkpoint_timeout"] == "1d"
        assert prov["warmup"]["mode"] == "steady" and prov["warmup"]["warmup_s"] <= 15
        warm = prov["warmup"]  # each chunk's WAL rates read from pg_stat_wal (PG 18)
        n_chunks = len(warm["chunks_tps"])
        assert len(warm["chunks_wal_bytes_per_s"]) == len(warm["chunks_wal_fpi_per_s"]) == n_chunks
        assert all(b is not None and b > 0 for b in warm["chunks_wal_bytes_per_s"]), warm
        placed = prov["placement"]
        assert placed["driver"]["applied"] and placed["server"]["applied"], placed
        observed = {o["name"]: o for o in placed["observed"]}
        driver = placement.parse_cpu_list(placed["driver"]["cpus"])
        server = placement.parse_cpu_list(placed["server"]["cpus"])
        pgbench = [o for n, o in observed.items() if n == "pgbench"]
        assert pgbench, placed["observed"]
        for o in placed["observed"]:  # every process ran only where it was placed
            ran = placement.parse_cpu_list(o["ran_on_cpus"])
            want = driver if o["name"] == "pgbench" else server
            assert set(ran) <= set(want), o
    summary = _run("summary", "--results", str(results))
    assert summary.returncode == 0, summary.stderr
    out = " ".join(summary.stdout.split())
    assert "design abba" in out and "2 rounds" in out
    assert "server CPU seconds per transaction" in out
    assert "WAL bytes per transaction" in out
    # the comparison pairs each round's geometric means: 2 pairs, not 4
    from blocklab.analysis.summary import summarize_experiment
    from blocklab.store.factory import open_results

    with open_results(str(results), create=False) as db:
        s = summarize_experiment(db, "abba-real")
    (other,) = [v for v in s.variants if not v.is_reference]
    assert other.comparison is not None and other.comparison.n_pairs == 2
    plan = _run("plan", str(f), "--results", str(results), "--until-ci", "2", timeout=120)
    assert plan.returncode == 0, plan.stderr
    text = " ".join(plan.stdout.split())
    # the noise names the stored experiment and design it comes from
    assert "minimum detectable effect" in text
    assert "from experiment abba-real (design abba, 2 rounds)" in text
    assert "±2 % needs" in text


@pytest.mark.alongside(2)
def test_aa_control_reports_the_noise_floor(paths: Paths, pg18_4k, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    f = _file(paths, "aa-real", rounds=2, kind="aa-control", placement="")
    results = paths.home / "results-aa"
    done = _run("run", str(f), "--results", str(results), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(results)
    copies = sorted((r["round"], r["copy_index"]) for r in rows if "bs=8k" in r["raw_dir"])
    assert copies == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert len(rows) == 6
    out = " ".join(_run("summary", "--results", str(results)).stdout.split())
    assert "A/A noise floor (bs=8k copy 1 vs copy 0, 2 rounds)" in out


def test_placement_that_cannot_be_applied_is_reported(paths: Paths, pg18_4k) -> None:  # type: ignore[no-untyped-def]
    """A CPU gone between plan and run (here: one the machine never had, given to the
    runner directly): the run goes on unplaced and its record says why."""
    from blocklab.execution.controls import RunControls
    from blocklab.execution.lab import Lab
    from blocklab.model import BuildRequest, DatasetRequest, Variant, WorkloadRequest
    from blocklab.state import State

    absent = max(placement.machine_cpus()) + 64
    controls = RunControls(
        placement=placement.Placement((absent,), (absent,)),
        placement_mode="explicit",
    )
    v = Variant(
        label="bs=4k",
        build=BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=8),
        dataset=DatasetRequest(scale=1),
        workload=WorkloadRequest(builtin="simple-update", clients=1, duration_s=2),
    )
    raw = paths.home / "unplaced"
    with Lab(paths, State(paths.state_file), log=lambda _m: None, controls=controls) as lab:
        rec = lab.run(v, experiment="unplaced", round_no=1, position=0, raw_dir=raw)
    assert rec.status == "ok", rec.reason
    placed = rec.provenance["placement"]
    assert placed["driver"]["applied"] is False
    assert placed["server"]["applied"] is False
    assert f"CPU {absent} is not available here" in placed["server"]["reason"]
    assert "taskset" not in rec.command


@pytest.mark.alongside(1.5)
def test_plan_pilot_measures_the_noise_and_says_what_until_ci_needs(
    paths: Paths, pg18_4k, pg18_8k
) -> None:  # type: ignore[no-untyped-def]
    f = _file(paths, "pilot-real", rounds=4, kind="paired", placement="")
    results = paths.home / "results-pilot"
    done = _run("plan", str(f), "--results", str(results), "--pilot", "2", "--until-ci", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "from experiment pilot-real-pilot (design paired, 2 rounds)" in text
    assert "minimum detectable effect" in text and "±0.5 % needs" in text

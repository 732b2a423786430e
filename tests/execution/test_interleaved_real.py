"""The interleaved design end to end with real builds, servers and pgbench: two rounds of
four slices per variant, both servers up at once on the two dir storage slots (which
the variants swap every two rounds); aligned checkpoints (checkpoint_timeout 1d on both
servers, a CHECKPOINT right before each one's first measured slice and none of the
server's own inside the window); one record per variant per round from its slices (with
its slot, A/A halves and carry-over), both servers stopped afterwards, the summary
comparing them."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.execution import orders
from blocklab.experiment_file.experiment import default_seed
from blocklab.paths import Paths, ensure_dir

pytestmark = [pytest.mark.build, pytest.mark.root]

EXPERIMENT = """
[experiment]
name = "il-real"
rounds = 2
reference = { block_size = 8 }

[design]
kind = "interleaved"
slice_s = 1
slices = 4
checkpoint = "aligned"

[matrix]
postgres = "18"
block_size = [4, 8]
wal_block_size = 8
storage = { kind = "dir" }
scale = 1
workload = "simple-update"
clients = 2
duration = 4
warmup = 1
"""
READY = re.compile(r"^\d+\.\d+ \[(\d+)\] LOG:\s+database system is ready to accept connections")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "blocklab.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def _alive(pid: int) -> str:
    """The process's command line if it runs ("" when it is gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
    return "" if stat.rsplit(")", 1)[1].split()[0] == "Z" else f"{pid}: {cmd}"


def _tps(slices: list[dict[str, str]]) -> float:
    return sum(int(s["transactions"]) for s in slices) / sum(float(s["seconds"]) for s in slices)


def _check_slice_metrics(
    vid: str,
    slices: list[dict[str, str]],
    order: list[str],
    stored: dict[tuple[int, str], float],
    run_id: int,
) -> None:
    """The record's A/A halves and carry-over, recomputed from its slices.csv: of its 4
    slices the 1st and 4th are half 0, the 2nd and 3rd half 1 (Thue-Morse 0 1 1 0)."""
    got = {name: v for (rid, name), v in stored.items() if rid == run_id}
    assert got["aa_tps_half0"] == pytest.approx(_tps([slices[0], slices[3]]), rel=1e-5)
    assert got["aa_tps_half1"] == pytest.approx(_tps([slices[1], slices[2]]), rel=1e-5)
    after = [s for s in slices if int(s["position"]) > 0]
    switch = [s for s in after if order[int(s["position"]) - 1] != vid]
    repeat = [s for s in after if order[int(s["position"]) - 1] == vid]
    assert switch and repeat  # A B B A B A A B: each variant has both
    assert got["tps_after_switch"] == pytest.approx(_tps(switch), rel=1e-5)
    assert got["tps_after_repeat"] == pytest.approx(_tps(repeat), rel=1e-5)


def _check_slots_and_checkpoints(
    rows: list[sqlite3.Row], slots: dict[int, float], unplanned: dict[int, float]
) -> None:
    """Each round uses both slots, each variant the one orders.storage_slots gives it (the
    swap itself, every two rounds, is tests/execution/test_orders.py's); each server got
    checkpoint_timeout 1d and took no checkpoint of its own in its window."""
    by = {(r["round"], r["variant_id"]): r for r in rows}
    vids = sorted({r["variant_id"] for r in rows})
    for rnd in (1, 2):
        want = orders.storage_slots(vids, seed=default_seed("il-real"), round_no=rnd)
        assert {v: slots[by[rnd, v]["id"]] for v in vids} == want
    for r in rows:
        prov = json.loads(r["provenance_json"])
        assert prov["storage_slot"] == slots[r["id"]] and prov["checkpoint"] == "aligned"
        assert prov["settings_written"]["checkpoint_timeout"] == "1d"
        effective = json.loads(r["settings_json"])["checkpoint_timeout"]
        assert (effective["setting"], effective["unit"]) == ("86400", "s")
        assert unplanned.get(r["id"], 0.0) == 0.0


@pytest.mark.alongside(2)
def test_interleaved_round_stores_one_record_per_variant_from_its_slices(
    paths: Paths,
    pg18_4k,
    pg18_8k,  # type: ignore[no-untyped-def]
) -> None:
    f = ensure_dir(paths.home / "exp" / "il-real") / "x.toml"
    f.write_text(EXPERIMENT)
    results = paths.home / "results-il"
    done = _run("run", str(f), "--results", str(results), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        c.row_factory = sqlite3.Row
        every = list(c.execute("SELECT * FROM runs ORDER BY round, position"))
        stored = {
            (m["run_id"], m["name"]): m["value"]
            for m in c.execute("SELECT * FROM metrics WHERE name LIKE '%tps%'")
        }
        slots = {
            m["run_id"]: m["value"]
            for m in c.execute("SELECT * FROM metrics WHERE name = 'storage_slot'")
        }
        unplanned = {
            m["run_id"]: m["value"]
            for m in c.execute(
                "SELECT * FROM metrics WHERE name = 'interleaved_unplanned_checkpoints'"
            )
        }
        disturbed = {
            m["run_id"]: m["value"]
            for m in c.execute("SELECT * FROM metrics WHERE name = 'disturbance_cpu_share'")
        }
        logged = {
            (m["run_id"], m["name"]): m["value"]
            for m in c.execute(
                "SELECT * FROM metrics WHERE name IN ('latency_p50_ms', 'latency_p99_ms', "
                "'transaction_log_coverage_ratio')"
            )
        }
    assert len(every) == 4
    assert {r["status"] for r in every} == {"ok"}, [r["reason"] for r in every]
    _check_slots_and_checkpoints(every, slots, unplanned)
    rows = [r for r in every if r["round"] == 1]
    assert [(r["round"], r["copy_index"], r["position"]) for r in rows] == [(1, 0, 0), (1, 0, 1)]
    first = rows[0]["variant_id"]
    measured = []
    mine: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        (raw,) = [d for d in results.rglob(f"r001-*-{r['variant_id']}") if d.is_dir()]
        slices = list(csv.DictReader((raw / "slices.csv").open()))
        assert len(slices) == 4 and {s["variant_id"] for s in slices} == {r["variant_id"]}
        # other processes' CPU, over this variant's slices with both servers known
        assert all(0.0 <= float(s["disturbance_cpu_share"]) <= 1.0 for s in slices), slices
        assert 0.0 <= disturbed[r["id"]] <= 1.0
        # latency percentiles from the slices' sampled per-transaction logs (pgbench -l)
        p50, p99 = logged[r["id"], "latency_p50_ms"], logged[r["id"], "latency_p99_ms"]
        assert 0 < p50 <= p99, (p50, p99)
        assert 0.5 < logged[r["id"], "transaction_log_coverage_ratio"] < 1.5
        assert len(list((raw / "driver").glob("pgbench_log.*"))) >= 4  # one per slice at least
        measured += slices
        mine[r["variant_id"]] = sorted(slices, key=lambda s: int(s["position"]))
        xacts = sum(int(s["transactions"]) for s in slices)
        seconds = sum(float(s["seconds"]) for s in slices)
        assert r["transactions"] == xacts > 0
        assert r["tps"] == pytest.approx(xacts / seconds, rel=1e-5)
        assert (raw / "s000.stdout").exists() or (raw / "s001.stdout").exists()
        assert (raw / "warmup.stdout").exists()
        pids = [
            int(m.group(1))
            for ln in (raw / "server.log").read_text().splitlines()
            if (m := READY.match(ln))
        ]
        assert pids, (raw / "server.log").read_text()[-2000:]
        assert [_alive(p) for p in pids] == [""] * len(pids)  # its server is stopped
    # Thue-Morse over the round: A B B A, A being the round's first variant
    order = [s["variant_id"] for s in sorted(measured, key=lambda s: int(s["position"]))]
    other = next(r["variant_id"] for r in rows if r["variant_id"] != first)
    assert order == [first, other, other, first, other, first, first, other]
    for r in rows:
        _check_slice_metrics(r["variant_id"], mine[r["variant_id"]], order, stored, r["id"])
    # no server left behind but the session's results-store server (tests/pg_results.py),
    # which a test before this one on the same worker may have started
    session_server = paths.work / "pgstore"
    left = [p for p in paths.work.rglob("postmaster.pid") if session_server not in p.parents]
    assert not left, left
    summary = _run("summary", "--results", str(results))
    assert summary.returncode == 0, summary.stderr
    out = " ".join(summary.stdout.split())
    assert "design interleaved" in out and "bs=4k" in out and "bs=8k" in out, out[-3000:]
    # the disturbance check, from the slices: judged either way, never silent
    assert "no run disturbed" in out or "disturbed runs:" in out, out[-3000:]
    # the slot A/A needs 3 rounds or more: two rounds say so, under the slots' label
    assert "storage slot 1 / slot 0" in out, out[-3000:]

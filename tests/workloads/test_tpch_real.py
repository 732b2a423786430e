"""The TPC-H-like workload end to end against real PostgreSQL 18 builds at scale factor
0.01: tpchgen-cli data COPY-loaded, go-tpc's 22 queries, the server's per-query times,
every query's plan captured; a variant with hash joins disabled is found to choose
other plans, in `blocklab summary` and on the report's queries page; a server killed
mid-run is a failed run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import kill_postmaster_after

from blocklab import experiment_file as spec
from blocklab.execution.lab import Lab
from blocklab.model import BuildRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.store import ResultsDB
from blocklab.workloads import gotpc, tpch

pytestmark = pytest.mark.build

HASHJOIN = """[experiment]
name = "tpch-hashjoin"
rounds = 1
reference = { "settings.enable_hashjoin" = "on" }
[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
workload = { driver = "tpch", scale_factor = 0.01 }
duration = 5
[matrix.settings]
enable_hashjoin = ["on", "off"]
"""


def _blocklab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "220"}
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip


def test_plans_captured_and_a_forced_plan_change_is_shown(pg18_8k, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / "tpch.toml"
    toml.write_text(HASHJOIN)
    results = tmp_path / "results"
    run = _blocklab("run", str(toml), "--results", str(results), "-q")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "TPC-H-derived, not comparable with published TPC-H results" in run.stdout
    with ResultsDB(results, create=False) as db:
        runs = db.runs("tpch-hashjoin")
        assert [r["status"] for r in runs] == ["ok", "ok"], [r["reason"] for r in runs]
        rows = db.run_queries("tpch-hashjoin")
        # every query of every run: its server time and its plan
        assert len(rows) == 2 * 22 and all(r["plan_fingerprint"] for r in rows)
        assert {r["query"] for r in rows} == set(gotpc.TPCH_QUERIES)
        assert all(r["calls"] == 1 and r["time_ms_mean"] > 0 for r in rows)
        plans = db.query_plans([r["plan_fingerprint"] for r in rows])
        assert set(plans) == {r["plan_fingerprint"] for r in rows}
        for r in runs:  # throughput is the server's queries per hour
            metrics = db.metrics(r["id"])
            assert r["tps"] == pytest.approx(metrics["queries_per_hour"])
            total_ms = sum(q["time_ms_total"] for q in rows if q["run_id"] == r["id"])
            assert metrics["queries_per_hour"] == pytest.approx(3_600_000 * 22 / total_ms)
        raw = Path(runs[0]["raw_dir"])
        raw = raw if raw.is_absolute() else results / raw
        assert (raw / tpch.QUERIES_FILE).is_file()
        by_query: dict[str, set[str]] = {}
        for r in rows:
            by_query.setdefault(r["query"], set()).add(r["plan_fingerprint"])
        changed = sorted(
            (q for q, fps in by_query.items() if len(fps) > 1), key=lambda q: int(q[1:])
        )
    # q1 and q6 join nothing: the same plan without hash joins; most others change
    assert "q1" not in changed and "q6" not in changed and len(changed) >= 15
    summary = _blocklab("summary", "--results", str(results), "--metric", "queries_per_hour")
    assert summary.returncode == 0, summary.stderr
    out = summary.stdout
    assert "TPC-H-derived, not comparable with published TPC-H results" in out
    assert f"{len(changed)} of 22 queries chose a different plan than enable_hashjoin=on" in out
    assert f"{changed[0]}: enable_hashjoin=on (left) vs enable_hashjoin=off (right)" in out
    assert any(ln.startswith("*") and "Hash Join" in ln for ln in out.splitlines())
    site = tmp_path / "site"
    report = _blocklab("report", "--results", str(results), "--out", str(site))
    assert report.returncode == 0, report.stderr
    page = (site / "e" / "tpch-hashjoin" / "queries.html").read_text()
    assert "TPC-H-derived, not comparable with published TPC-H results" in page
    assert f"{len(changed)} of 22 queries chose a different plan" in page
    assert page.count('<section class="query"') == 22 and page.count("<svg") == 22
    assert 'class="changed">' in page and "Hash Join" in page
    assert 'id="queries-link"' in (site / "e" / "tpch-hashjoin" / "index.html").read_text()


@pytest.fixture
def lab(paths: Paths, pg18_8k) -> Iterator[Lab]:  # type: ignore[no-untyped-def]
    base = paths.home / "tpch" / uuid.uuid4().hex[:8]
    state = State(base / "state.json")
    installs = {BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8): pg18_8k}
    with Lab(
        paths, state, log=lambda _m: None, installations=installs, instrumentation=None
    ) as lab:
        try:
            yield lab
        finally:
            lab.close()
    assert state.entries() == []  # every server was released


def test_a_server_killed_mid_run_is_a_failed_run(lab: Lab, tmp_path: Path) -> None:
    toml = tmp_path / "killed.toml"
    toml.write_text(
        HASHJOIN.replace('rounds = 1\nreference = { "settings.enable_hashjoin" = "on" }\n', "")
        .replace('[matrix.settings]\nenable_hashjoin = ["on", "off"]\n', "")
        .replace("scale_factor = 0.01 }", "scale_factor = 0.01, passes = 50 }")
    )  # fmt: skip
    (v,) = spec.load(toml).variants()
    target = lab.prepare(v)
    raw = tmp_path / "raw"
    t, killed = kill_postmaster_after(raw / "tpch.argv", target.cluster, after_s=1.5)
    rec = lab.run(v, experiment="t", round_no=1, position=0, raw_dir=raw)
    t.join()
    assert killed, "the postmaster was never seen running"
    assert rec.status == "failed" and "server died" in rec.reason, rec.reason
    assert rec.tps is None and not rec.queries
    assert not (raw / tpch.QUERIES_FILE).exists()  # no plan pass on a dead server
    assert (raw / "tpch.stdout").exists()  # go-tpc's output is kept

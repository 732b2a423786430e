"""sysbench and go-tpc tpcc as blocklab workloads end to end (tiny sizes, seconds): a
dataset loaded once with the fillfactor on every table (read back from the catalogue),
restored before every run, runs stored with the driver's own numbers, and a server
killed mid-run stored as a failed run for each driver."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import postgres_running_in as _postgres_running_in

from blocklab import experiment_file as spec
from blocklab.execution.lab import Lab
from blocklab.model import BuildRequest, Variant
from blocklab.paths import Paths
from blocklab.postgres.installation import Installation
from blocklab.state import State
from blocklab.store import ResultsDB, RunRecord
from blocklab.workloads import drivers

pytestmark = pytest.mark.build

PG18 = BuildRequest(pg="18")


def sysbench(test: str, *, tables: int, table_size: int) -> str:
    return (
        f'{{ driver = "sysbench", test = "{test}", tables = {tables}, '
        f"table_size = {table_size}, threads = 2 }}"
    )


def variant(
    tmp_path: Path, workload: str, *, fillfactor: int = 100, duration: int = 3, more: str = ""
) -> Variant:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.toml"
    path.write_text(
        f'[experiment]\nname = "d"\n[matrix]\nworkload = {workload}\n'
        f"fillfactor = {fillfactor}\nduration = {duration}\n{more}\n"
    )
    (v,) = spec.load(path).variants()
    return v


@pytest.fixture
def lab(paths: Paths, pg18_8k: Installation) -> Iterator[tuple[Lab, State]]:
    state = State(paths.home / f"state-{uuid.uuid4().hex[:6]}.json")
    with Lab(
        paths, state, log=lambda _m: None, installations={PG18: pg18_8k}, instrumentation=None
    ) as lab:
        yield lab, state
    assert state.entries() == []  # every server was released


def run(lab: Lab, v: Variant, raw: Path, kill_after_s: float | None = None) -> RunRecord:
    """One run; with kill_after_s, the postmaster is killed by PID that long after the
    driver's argv file appears (the measured execution has started)."""
    target = lab.prepare(v)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (raw / f"{v.workload.driver}.argv").exists() and target.cluster.pid:
                time.sleep(kill_after_s or 0)
                killed.append(target.cluster.pid)
                os.kill(target.cluster.pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    if kill_after_s is not None:
        t.start()
    rec = lab.run(v, experiment="d", round_no=1, position=0, raw_dir=raw)
    if kill_after_s is not None:
        t.join()
        assert killed, "the postmaster was never seen running"
    assert _postgres_running_in(target.cluster.data_dir) == []
    return rec


def store(tmp_path: Path, v: Variant, rec: RunRecord) -> dict[str, object]:
    with ResultsDB(tmp_path / "results") as db:
        db.upsert_experiment(
            "d", description="", spec={}, seed=1, reference=v.variant_id,
            created_at="2026-01-01T00:00:00+00:00", host={},
            variants=[(v.variant_id, v.label, v.canonical_json(), {})],
        )  # fmt: skip
        row = db.run(db.record_run(rec))
        return {
            "row": dict(row),
            "series": db.series(int(row["id"])),
            "metrics": db.metrics(int(row["id"])),
        }


def relations(rec: RunRecord) -> dict[str, dict[str, object]]:
    return {r["name"]: r for r in rec.provenance["dataset"]["relations"]}


def test_sysbench_read_write_stores_sysbench_s_own_tps(lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    the_lab, _ = lab
    workload = sysbench("oltp_read_write", tables=2, table_size=2000)
    v = variant(tmp_path, workload, fillfactor=80, more="index_fillfactor = 70")
    rec = run(the_lab, v, tmp_path / "ok")
    assert rec.status == "ok", rec.reason
    out = (tmp_path / "ok" / "sysbench.stdout").read_text()
    own = re.search(r"^\s+transactions:\s+(\d+)\s+\((\S+) per sec\.\)$", out, re.MULTILINE)
    assert own is not None and rec.tps == float(own.group(2)) and rec.tps > 0
    assert rec.transactions == int(own.group(1)) and rec.failed_transactions == 0
    assert rec.latency_avg_ms and rec.provenance["throughput_metric"] == "tps"
    assert rec.command.split()[1:3] == ["oltp_read_write", "--db-driver=pgsql"]
    assert rec.provenance["driver_uid"] not in (0, None)  # the server's user, never root
    assert rec.provenance["driver_role"] == "blocklab_workload"  # owns sbtest, no superuser
    for name in ("sysbench.argv", "sysbench.stdout", "sysbench.stderr", "sysbench.exit_code"):
        assert (tmp_path / "ok" / name).exists(), name
    # fillfactor 80 on every table the load made and 70 on every index (the primary
    # keys and k_N), read from pg_class after the load
    rels = relations(rec)
    assert {n for n, r in rels.items() if r["kind"] == "table"} == {"sbtest1", "sbtest2"}
    assert {n for n, r in rels.items() if r["kind"] == "index"} == {
        "sbtest1_pkey", "sbtest2_pkey", "k_1", "k_2"
    }  # fmt: skip
    for r in rels.values():
        assert r["reloptions"] == (["fillfactor=80"] if r["kind"] == "table" else ["fillfactor=70"])
    # the plan's rough size (blocklab.workloads.sizing) against the real load
    estimate, _ = drivers.for_dataset(v.dataset).dataset_bytes(v.dataset, 8192)
    real = rec.provenance["dataset"]["table_bytes"] + rec.provenance["dataset"]["index_bytes"]
    assert real / 2 < estimate < real * 2, (estimate, real)
    stored = store(tmp_path, v, rec)
    assert stored["row"]["tps"] == rec.tps and stored["row"]["status"] == "ok"
    assert 2 <= len(stored["series"]["tps"]) <= 4  # one per second (--report-interval=1)
    assert stored["metrics"]["qps"] and "latency_p95_ms" in stored["metrics"]


def test_sysbench_killed_server_is_a_failed_run(lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    the_lab, _ = lab
    workload = sysbench("oltp_write_only", tables=1, table_size=1000)
    v = variant(tmp_path, workload, duration=10)
    rec = run(the_lab, v, tmp_path / "killed", kill_after_s=2.0)
    assert rec.status == "failed" and "died" in rec.reason, rec.reason
    assert rec.tps is None and rec.latency_avg_ms is None
    assert (tmp_path / "killed" / "sysbench.stdout").exists()  # raw output kept
    assert store(tmp_path, v, rec)["row"]["tps"] is None


@pytest.mark.alongside(1.5)
def test_tpcc_one_warehouse_then_a_killed_server(lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    the_lab, _ = lab
    v = variant(tmp_path, '{ driver = "tpcc", warehouses = 1, threads = 2 }', fillfactor=75)
    rec = run(the_lab, v, tmp_path / "ok")
    assert rec.status == "ok", rec.reason
    out = (tmp_path / "ok" / "tpcc.stdout").read_text()
    own = re.search(r"^tpmC: ([\d.]+), tpmTotal: ([\d.]+),", out, re.MULTILINE)
    assert own is not None and rec.tps == float(own.group(1)) and rec.tps > 0
    assert rec.metrics["nopm"] == rec.tps and rec.metrics["tpm_total"] == float(own.group(2))
    assert rec.provenance["throughput_metric"] == "tpmC"
    assert rec.provenance["throughput_unit"] == "NEW_ORDER/min"
    assert rec.provenance["driver_uid"] not in (0, None)
    assert rec.provenance["driver_role"] == "blocklab_workload"
    assert 2 <= len(rec.series["tpmc"]) <= 4
    tables = {n: r for n, r in relations(rec).items() if r["kind"] == "table"}
    assert {"warehouse", "district", "stock", "order_line", "new_order"} <= set(tables)
    assert all(r["reloptions"] == ["fillfactor=75"] for r in tables.values()), tables
    assert rec.provenance["dataset"]["table_bytes"] > 0
    # the same dataset (not loaded again), a server killed mid-run: failed, no number
    killed = run(the_lab, v, tmp_path / "killed", kill_after_s=2.0)
    assert killed.status == "failed" and killed.tps is None, killed.reason
    # go-tpc may exit by itself or hang after its server died: then blocklab ends it
    # SERVER_GONE_GRACE_S later, not at the run's timeout
    assert "died" in killed.reason and "timed out" not in killed.reason
    assert (tmp_path / "killed" / "tpcc.stdout").exists()
    assert killed.provenance["dataset"]["key"] == rec.provenance["dataset"]["key"]

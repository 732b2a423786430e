"""Measured runs end to end: real servers, real pgbench, tiny scale.

PG 15 (Debian's binaries) always; the PG 18 builds (4 kB and 8 kB pages) via the
pg18_4k/pg18_8k fixtures, which build them the first time (several minutes, cached).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import kill_postmaster_after
from helpers import postgres_running_in as _postgres_running_in

from blocklab.execution.lab import Lab
from blocklab.model import BuildRequest, DatasetRequest, Variant, WorkloadRequest
from blocklab.paths import Paths
from blocklab.postgres.cluster import server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State
from blocklab.store import ResultsDB, RunRecord
from blocklab.workloads import dataset, pgbench
from blocklab.workloads.pgbench_latency import SAMPLING_RATE
from blocklab.workloads.role import ROLE

PG15 = BuildRequest(pg="15")
DURATION_S = 3


def variant(build: BuildRequest = PG15, **workload: Any) -> Variant:
    w = {"clients": 2, "duration_s": DURATION_S, **workload}
    settings = tuple(sorted(w.pop("settings", {}).items()))
    return Variant(
        build=build,
        dataset=DatasetRequest(scale=1, fillfactor=90),
        workload=WorkloadRequest(**w),
        settings=settings,
    )


@dataclass
class Env:
    lab: Lab
    state: State
    raw: Path
    db: ResultsDB
    data_dirs: list[Path] = field(default_factory=list)

    def run(self, v: Variant, round_no: int = 1, position: int = 0) -> RunRecord:
        raw_dir = self.raw / f"r{round_no}-{v.variant_id}-{uuid.uuid4().hex[:4]}"
        rec = self.lab.run(v, experiment="t", round_no=round_no, position=position, raw_dir=raw_dir)
        self.data_dirs.append(self.lab.prepare(v).cluster.data_dir)
        return rec


@pytest.fixture
def env(paths: Paths) -> Iterator[Env]:
    base = paths.home / "runner" / uuid.uuid4().hex[:8]
    state = State(base / "state.json")
    installs = {PG15: Installation.system(15)}
    db = ResultsDB(base / "results")
    with Lab(
        paths, state, log=lambda _m: None, installations=installs, instrumentation=None
    ) as lab:
        e = Env(lab, state, base / "results" / "runs", db)
        try:
            yield e
        finally:
            lab.close()
            db.close()
    assert state.entries() == []  # every server was released
    for d in e.data_dirs:
        assert _postgres_running_in(d) == [], f"server processes left on {d}"


def _register(db: ResultsDB, variants: list[Variant]) -> None:
    db.upsert_experiment(
        "t",
        description="",
        spec={},
        seed=1,
        reference=variants[0].variant_id,
        created_at="2025-01-01T00:00:00+00:00",
        host={},
        variants=[(v.variant_id, v.label, v.canonical_json(), {}) for v in variants],
    )


def _printed_tps(raw_dir: Path) -> float:
    line = next(
        x for x in (raw_dir / "pgbench.stdout").read_text().splitlines() if x.startswith("tps = ")
    )
    return float(line.split()[2])


def assert_good_run(rec: RunRecord, db: ResultsDB | None = None) -> None:
    assert rec.status == "ok", rec.reason
    raw_dir = Path(rec.raw_dir)
    assert rec.tps == _printed_tps(raw_dir)
    assert rec.exit_code == 0 and rec.failed_transactions == 0
    assert rec.transactions and rec.latency_avg_ms and rec.latency_stddev_ms is not None
    tps = rec.series["tps"]
    times = [t for t, _ in tps]
    duration_s = rec.provenance["pgbench_report"]["duration_s"]
    # one row a second, stamped with the time pgbench printed it (its elapsed time, %.1f):
    # on a loaded machine a line can come a tenth of a second or so late. The last second's
    # row can be missing: pgbench's first thread prints a report when it finds the second
    # passed, and leaves its loop once its clients are done, which at the end of the run
    # can come first (threadRun); seen once in CI's load, [1.0, 2.0] for a 3 s run
    assert duration_s - 1 <= len(times) <= duration_s, times
    assert all(abs(t - s) < 0.5 for s, t in enumerate(times, 1)), times
    assert len(rec.series["latency_ms"]) == len(times)
    per_second_sum = sum(v or 0 for _, v in tps)
    if len(times) == duration_s:
        assert abs(per_second_sum - rec.transactions) <= 0.01 * rec.transactions + len(times)
    else:
        assert per_second_sum < rec.transactions
    for name in ("pgbench.argv", "pgbench.stdout", "pgbench.stderr", "server.log"):
        assert (raw_dir / name).exists(), name
    assert (raw_dir / "pgbench.exit_code").read_text().strip() == "0"
    assert pgbench.log_files(raw_dir / "driver" / "pgbench_log")  # pgbench's own dir
    assert rec.provenance["transaction_log"]["sampling_rate"] == SAMPLING_RATE
    p50, p95, p99 = (rec.metrics[f"latency_p{q}_ms"] for q in (50, 95, 99))
    assert p50 is not None and p95 is not None and p99 is not None and 0 < p50 <= p95 <= p99
    assert rec.provenance["driver_uid"] == server_user().uid != 0  # never root
    assert rec.provenance["driver_role"] == ROLE  # the workload role, not a superuser
    assert "checkpoint" in (raw_dir / "server.log").read_text()  # this run's CHECKPOINT
    assert rec.provenance["pgbench_argv"][0].endswith("pgbench")
    assert rec.provenance["geometry"]["block_size_bytes"] in (4096, 8192)
    assert rec.settings["server_version_num"]["setting"]
    if db is not None:
        run_id = db.record_run(rec)
        row = db.run(run_id)
        assert row["tps"] == _printed_tps(raw_dir) and row["status"] == "ok"
        assert len(db.series(run_id)["tps"]) == len(times)


def test_two_variants_two_rounds(env: Env) -> None:
    a = variant()
    b = variant(query_mode="simple", settings={"shared_buffers": "16MB"})
    _register(env.db, [a, b])
    for round_no in (1, 2):
        order = [a, b] if round_no == 1 else [b, a]
        for pos, v in enumerate(order):
            assert_good_run(env.run(v, round_no, pos), env.db)
    runs = env.db.runs("t")
    assert len(runs) == 4 and {r["status"] for r in runs} == {"ok"}
    b_runs = [r for r in runs if r["variant_id"] == b.variant_id]
    assert all('"shared_buffers": {"setting": "2048"' in r["settings_json"] for r in b_runs)
    # one dataset, made once, shared by both variants (same build, storage and data)
    assert len(env.lab.datasets) == 1
    info = next(iter(env.lab.datasets.values()))
    assert info.init_s > 0 and info.snapshot_s > 0


def test_every_run_starts_from_identical_bytes(env: Env) -> None:
    v = variant()
    assert_good_run(env.run(v))
    target = env.lab.prepare(v)
    data_dir = target.cluster.data_dir
    snap_digest = dataset.tree_digest(target.snapshot.data)
    assert dataset.tree_digest(data_dir) != snap_digest  # the run changed the data
    restored = dataset.restore(target.snapshot, data_dir)
    assert dataset.tree_digest(data_dir) == snap_digest
    assert restored.restore_s > 0
    c = target.cluster
    c.write_settings({})  # this lab's port and socket (the snapshot may be older)
    c.start()
    try:
        assert c.psql("SELECT count(*) FROM pgbench_history").strip() == "0"
        assert c.psql("SELECT count(*) FROM pgbench_accounts").strip() == "100000"
    finally:
        c.stop()


def test_killed_postmaster_is_a_failed_run_and_the_next_run_succeeds(env: Env) -> None:
    v = variant(duration_s=8)
    target = env.lab.prepare(v)
    raw = env.raw / "killed"
    t, killed = kill_postmaster_after(raw / "pgbench.argv", target.cluster, after_s=2.0)
    rec = env.lab.run(v, experiment="t", round_no=1, position=0, raw_dir=raw)
    t.join()
    assert killed, "the postmaster was never seen running"
    assert rec.status == "failed"
    # pgbench exits 2 ("Run was aborted"), or 1 when the connection is lost mid-message
    # ("unexpected error status"): both are failures, with the reason
    assert rec.exit_code in (1, 2)
    assert f"pgbench exit code {rec.exit_code}" in rec.reason and "died" in rec.reason
    assert rec.tps is None and rec.latency_avg_ms is None and rec.latency_stddev_ms is None
    assert _postgres_running_in(target.cluster.data_dir) == []
    assert [e for e in env.state.entries() if e.kind == "server"] == []
    _register(env.db, [v])
    row = env.db.run(env.db.record_run(rec))
    assert row["status"] == "failed" and row["tps"] is None
    assert_good_run(env.run(variant(), round_no=2))


def test_pgbench_exit_code_2_is_never_a_result(env: Env, paths: Paths) -> None:
    script = paths.home / "div0.sql"
    script.write_text("SELECT 1 / (aid - aid) FROM pgbench_accounts WHERE aid = 1;\n")
    rec = env.run(variant(builtin=None, scripts=(str(script),), query_mode="simple"))
    # PG 15's pgbench exits 1 here ("unexpected error status"), others 2: never a result
    assert rec.status == "failed" and rec.exit_code in (1, 2)
    assert f"exit code {rec.exit_code}" in rec.reason and "division by zero" in rec.reason
    assert rec.tps is None and rec.transactions is None and not rec.series


def test_a_hostile_script_runs_unprivileged_and_as_no_superuser(env: Env, paths: Paths) -> None:
    """A custom script's \\shell and \\setshell run as the server's unprivileged user
    (a file they make is not root's), its SQL as the workload role: COPY ... TO PROGRAM
    is refused, and that run is a failure."""
    tag = uuid.uuid4().hex[:8]
    canary, uid_file, refused = (Path(f"/tmp/blocklab-{n}-{tag}") for n in ("canary", "uid", "no"))
    shell = paths.home / f"shell-{tag}.sql"
    shell.write_text(
        f"\\shell touch {canary}\n\\setshell uid id -u\n\\shell echo :uid > {uid_file}\n"
        "SELECT :uid;\n"
    )
    copy = paths.home / f"copy-{tag}.sql"
    copy.write_text(f"COPY (SELECT 1) TO PROGRAM 'touch {refused}';\n")
    try:
        rec = env.run(variant(builtin=None, scripts=(str(shell),), clients=1))
        assert rec.status == "ok", rec.reason
        assert canary.stat().st_uid == server_user().uid != 0  # ran, but never as root
        assert uid_file.read_text().strip() == str(server_user().uid)
        assert rec.provenance["driver_uid"] == server_user().uid
        bad = env.run(variant(builtin=None, scripts=(str(copy),), clients=1))
        assert bad.status == "failed" and "must be superuser" in bad.reason, bad.reason
        assert not refused.exists()
    finally:
        for f in (canary, uid_file, refused):
            f.unlink(missing_ok=True)


@dataclass
class FakeResult:
    series: dict[str, list[tuple[float, float | None]]]
    metrics: dict[str, float | None]
    checkpoints: list[dict[str, Any]]
    facts: dict[str, Any]
    missing: list[str]


class FakeProbes:
    """Records the calls the runner makes; checks the server is up at both ends."""

    contexts: list[Any] = []

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.calls: list[str] = []
        FakeProbes.contexts.append(self)

    def begin(self) -> None:
        assert os.path.exists(f"/proc/{self.ctx.server_pid}")
        self.calls.append("begin")

    def end(self, transactions: int, duration_s: float) -> FakeResult:
        self.calls.append(f"end {transactions} {duration_s >= DURATION_S}")
        return FakeResult(
            {"wal_bytes_per_s": [(0.0, 1.0)]},
            {"wal_bytes": 123.0},
            [{"trigger": "time", "start_s": 1.0}],
            {"how": "fake"},
            ["pg_stat_io"],
        )


def test_instrumentation_seam(paths: Paths) -> None:
    state = State(paths.home / f"state-{uuid.uuid4().hex[:6]}.json")
    raw = paths.home / "seam" / uuid.uuid4().hex[:6]
    with Lab(
        paths,
        state,
        log=lambda _m: None,
        installations={PG15: Installation.system(15)},
        instrumentation=FakeProbes,
    ) as lab:
        rec = lab.run(variant(), experiment="t", round_no=1, position=0, raw_dir=raw)
        # the server's log while it runs (the Lab removes it at close; the run keeps its part)
        log_during_run = FakeProbes.contexts[-1].ctx.server_log.exists()
    assert_good_run(rec)
    probe = FakeProbes.contexts[-1]
    assert probe.calls == ["begin", f"end {rec.transactions} True"]
    assert probe.ctx.server_version_num // 10000 == 15
    assert probe.ctx.block_size_bytes == 8192 and log_during_run
    assert (raw / "server.log").stat().st_size > 0
    assert rec.metrics["wal_bytes"] == 123.0 and "restore_s" in rec.metrics
    assert rec.series["wal_bytes_per_s"] == [(0.0, 1.0)] and "tps" in rec.series
    assert rec.checkpoints == [{"trigger": "time", "start_s": 1.0}]
    assert rec.provenance["probe_missing"] == ["pg_stat_io"]
    # kind 'dir': the footprint on a compressing drive is missing, with the reason
    assert rec.metrics["footprint_lz4_bytes"] is None
    assert "kind 'dir'" in rec.provenance["footprint"]["missing"]["footprint_lz4_bytes"]
    collected = rec.provenance["collected"]
    assert collected["installation"]["key"] == "system-15" and collected["pg_config"]
    assert collected["commands"][-1] == rec.provenance["pgbench_argv"]
    assert collected["settings_source"]["log_checkpoints"] == "configuration file"
    assert state.entries() == []


@pytest.mark.parametrize("fixture", ["pg18_4k", "pg18_8k"])
def test_pg18_builds(fixture: str, request: pytest.FixtureRequest, paths: Paths) -> None:
    inst: Installation = request.getfixturevalue(fixture)
    kb, wal_kb = inst.block_size_bytes // 1024, inst.wal_block_size_bytes // 1024
    build = BuildRequest(pg="18", block_size_kb=kb, wal_block_size_kb=wal_kb)
    state = State(paths.home / f"state-{uuid.uuid4().hex[:6]}.json")
    raw = paths.home / "pg18" / uuid.uuid4().hex[:6]
    with Lab(
        paths, state, log=lambda _m: None, installations={build: inst}, instrumentation=None
    ) as lab:
        rec = lab.run(variant(build), experiment="t", round_no=1, position=0, raw_dir=raw)
        data_dir = lab.prepare(variant(build)).cluster.data_dir
    assert_good_run(rec)
    assert rec.settings["block_size"]["setting"] == str(inst.block_size_bytes)
    assert rec.settings["data_checksums"]["setting"] == "off"  # PG 18's default overridden
    assert rec.provenance["geometry"]["block_size_bytes"] == inst.block_size_bytes
    assert state.entries() == [] and _postgres_running_in(data_dir) == []


class InterruptingProbes:
    """Ctrl-C arriving while the server is up, right before the workload."""

    def __init__(self, ctx: Any):
        self.ctx = ctx

    def begin(self) -> None:
        raise KeyboardInterrupt

    def end(self, transactions: int, duration_s: float) -> FakeResult:
        raise AssertionError("never reached")


def test_keyboard_interrupt_stops_the_server(paths: Paths) -> None:
    state = State(paths.home / f"state-{uuid.uuid4().hex[:6]}.json")
    raw = paths.home / "interrupt" / uuid.uuid4().hex[:6]
    lab = Lab(
        paths,
        state,
        log=lambda _m: None,
        installations={PG15: Installation.system(15)},
        instrumentation=InterruptingProbes,
    )
    with pytest.raises(KeyboardInterrupt), lab:
        target = lab.prepare(variant())
        lab.run(variant(), experiment="t", round_no=1, position=0, raw_dir=raw)
    assert target.cluster.pid is None
    assert _postgres_running_in(target.cluster.data_dir) == []
    assert state.entries() == []  # servers stopped and storages released on the way out
    assert (raw / "server.log").exists()

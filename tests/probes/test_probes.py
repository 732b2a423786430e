"""Instrumentation on real servers: Debian's PG 15 and a PG 18 build at 4 kB pages.

The same code runs against both. Checked: the per-second WAL series adds up to the
pg_stat_wal difference; the checkpoint timeline from the log has as many checkpoints as
the counters say; volumes are bytes at the build's block size; missing views are
reported as missing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab import proc
from blocklab.execution.overhead import context_for
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster
from blocklab.postgres.installation import Installation
from blocklab.probes import Instrumentation, ProbeContext, ProbeResult
from blocklab.probes.provenance import collect_provenance
from blocklab.storage.devices import SECTOR_BYTES

SETTINGS = {
    "shared_buffers": "16MB",
    "max_wal_size": "32MB",
    "min_wal_size": "32MB",
    "checkpoint_timeout": "1h",  # no timed checkpoints: every one is counted below
    "autovacuum": "off",
    "synchronous_commit": "off",
}
RECORD_LOGS = os.environ.get("BLOCKLAB_RECORD_LOGS")  # a directory: keep the server logs


def make_cluster(paths: Paths, inst: Installation, settings: dict[str, str]) -> Cluster:
    c = scratch_cluster(paths, inst, "test-probes")
    c.initdb(data_checksums=False)
    c.write_settings(settings)
    c.start()
    return c


@pytest.fixture(params=["pg15", "pg18_4k", "pg18_wal4k"])
def server(request: pytest.FixtureRequest, paths: Paths) -> Iterator[Cluster]:
    inst: Installation = request.getfixturevalue(
        "pg15_system" if request.param == "pg15" else request.param
    )
    c = make_cluster(paths, inst, SETTINGS)
    try:
        pgbench(c, ["-i", "-s", "2", "-q"])
        # as a dataset would have it: begin() then creates nothing (no WAL outside the run)
        c.psql("CREATE EXTENSION pgstattuple")
        # nor is a checkpoint under way when it begins: the initialisation's WAL can
        # request one that, spread over the 1 h timeout, is still running then; before
        # PostgreSQL 17 its counter shows once it completes (in the window), its
        # "starting" line before it (outside), and a CI run saw 8 counted, 7 logged
        # (VACUUM first: the catalogs' dead rows pruned then, not on access in begin(),
        # where after the checkpoint their pruning would log full pages, 7 kB here)
        c.psql("VACUUM")
        c.psql("CHECKPOINT")
        wal_settled(c)  # the checkpointer's WAL counted before the run's window opens
        yield c
    finally:
        c.kill()
        if RECORD_LOGS:
            name = f"{request.param}-{c.data_dir.parent.name}.log"
            shutil.copy(c.log_path, Path(RECORD_LOGS) / name)
        remove_cluster(c)


def pgbench(c: Cluster, args: list[str]) -> proc.Result:
    return proc.run([str(c.inst.bin("pgbench")), *c.conn_args(), *args, "postgres"], timeout_s=600)


def context(c: Cluster) -> ProbeContext:
    return context_for(c, measure_space=True)


def wal_bytes(c: Cluster) -> float:
    """pg_stat_wal.wal_bytes once every other session has gone (and flushed its stats)."""
    with psycopg.connect(c.conninfo, autocommit=True) as conn:
        for _ in range(500):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.01)
        row = conn.execute("SELECT wal_bytes::float8 FROM pg_stat_wal").fetchone()
    assert row is not None
    return float(row[0])


def wal_settled(c: Cluster, quiet_s: float = 0.5, limit_s: float = 20.0) -> None:
    """Wait until pg_stat_wal.wal_bytes holds still for `quiet_s`: the checkpointer
    reports the WAL of a checkpoint after the CHECKPOINT that asked for it returned
    (8 kB here on PostgreSQL 15: counted in the test's window, not the run's)."""
    deadline = time.monotonic() + limit_s
    last = None
    with psycopg.connect(c.conninfo, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT wal_bytes::float8 FROM pg_stat_wal").fetchone()
            if row is not None and row[0] == last:
                return
            last = None if row is None else row[0]
            time.sleep(quiet_s)
    raise AssertionError(f"pg_stat_wal.wal_bytes still moving after {limit_s} s")


def checkpoints_during(
    c: Cluster, n: int, every_s: float, stop: threading.Event
) -> threading.Thread:
    def loop() -> None:
        with psycopg.connect(c.conninfo, autocommit=True) as conn:
            for _ in range(n):
                if stop.wait(every_s):
                    return
                conn.execute("CHECKPOINT")

    t = threading.Thread(target=loop)
    t.start()
    return t


def instrumented_run(c: Cluster, seconds: int) -> tuple[ProbeResult, float, float, int]:
    wal_before = wal_bytes(c)
    inst = Instrumentation(context(c))
    inst.begin()
    stop = threading.Event()
    t = checkpoints_during(c, 2, 1.5, stop)
    started = time.monotonic()
    try:
        out = pgbench(c, ["-n", "-c", "2", "-j", "2", "-T", str(seconds)]).stdout
    finally:
        stop.set()
        t.join()
    duration = time.monotonic() - started
    with psycopg.connect(c.conninfo, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # whatever was running is done before end()
    line = next(x for x in out.splitlines() if "actually processed" in x)
    xacts = int(line.split(":")[1].split("/")[0])
    wal_after = wal_bytes(c)  # before end(): pgstattuple's on-access pruning writes WAL
    result = inst.end(xacts, duration)
    return result, wal_before, wal_after, xacts


def integral(points: list[tuple[float, float | None]]) -> float:
    total, prev_t = 0.0, 0.0
    for t, v in points:
        assert v is not None
        total += v * (t - prev_t)
        prev_t = t
    return total


def test_instrumented_run(server: Cluster) -> None:
    res, wal_before, wal_after, xacts = instrumented_run(server, 6)
    m, s = res.metrics, res.series
    bs = server.inst.block_size_bytes

    # WAL: the per-second series and the final flush add up to the counter difference
    assert m["wal_bytes"] is not None and m["wal_bytes"] > 0
    (_, final), *_ = s["wal_bytes_final_flush"]
    assert integral(s["wal_bytes_per_s"]) + final == pytest.approx(m["wal_bytes"], rel=1e-9)
    assert abs((wal_after - wal_before) - m["wal_bytes"]) <= 1024  # bgwriter's xl_running_xacts
    assert len(s["wal_bytes_per_s"]) >= 5  # ~1 Hz over 6+ s
    stamps = [t for t, _ in s["wal_bytes_per_s"]]
    assert max(b - a for a, b in zip([0.0, *stamps], stamps, strict=False)) < 2.5

    # checkpoints: timeline from the log == counters' difference, volumes in bytes
    assert m["checkpoints_counted"] == m["checkpoints_logged"] >= 3
    assert res.facts["checkpoint_count_matches"] is True
    done = [c for c in res.checkpoints if not c["incomplete"]]
    assert done and all(c["bytes_written"] == c["buffers_written"] * bs for c in done)
    assert {"immediate"} <= {c["trigger"] for c in res.checkpoints}
    assert m["checkpoint_overlap"] == 1.0
    assert s["checkpoints_done"][-1][1] == m["checkpoints_counted"]

    # derived, in bytes
    assert m["wal_bytes_per_xact"] == pytest.approx(m["wal_bytes"] / xacts)
    assert 0 < (m["checkpointer_write_bytes"] or 0)
    assert (m["checkpointer_write_bytes"] or 0) % bs == 0
    assert m["n_tup_upd"] == pytest.approx(3 * xacts, rel=0.01)  # tpcb: 3 updates per xact
    assert m["hot_update_ratio"] is not None and 0 < m["hot_update_ratio"] <= 1
    assert m["cache_hit_ratio"] is not None and 0.5 < m["cache_hit_ratio"] <= 1
    assert m["server_cpu_s"] is not None and m["server_cpu_s"] > 0
    # other processes' CPU (blocklab.probes.disturbance): measured, a share of the machine
    share = m["disturbance_cpu_share"]
    assert share is not None and 0 <= share <= 1 and m["disturbance_cpu_s"] is not None
    assert res.facts["disturbance_basis"].startswith("/proc/stat busy")
    # a plain directory: the host's device, shared, under one name
    assert res.facts["devices"][0]["counted_as"] == "host_device"
    assert not any(k.startswith("device_") for k in m)
    assert (m["host_device_write_bytes"] or 0) % SECTOR_BYTES == 0
    assert m["pgbench_accounts.table_bytes"] is not None
    assert m["pgbench_accounts.table_bytes"] % bs == 0
    assert m["pgbench_accounts.table_free_bytes"] is not None
    assert 0 <= m["pgbench_accounts.table_free_bytes"] < m["pgbench_accounts.table_bytes"]
    assert all(k in s for k in ("cpu_user_pct", "cpu_iowait_pct", "mem_used_bytes"))

    # version-aware: what is missing is listed, never zero
    if server.inst.major >= 18:
        assert res.facts["counter_basis"]["wal_write"].startswith("pg_stat_io")
        assert (m["wal_write_bytes"] or 0) >= (m["wal_bytes"] or 0) * 0.9  # WAL is written
        assert (m["wal_write_bytes"] or 0) % server.inst.wal_block_size_bytes == 0
        assert "pg_stat_io" in res.facts["counter_basis"]["backend_write_bytes"]
        assert m["newpage_update_ratio"] is not None
    else:
        assert "pg_stat_io" in res.missing
        assert "pg_stat_user_tables.n_tup_newpage_upd" in res.missing
        assert m["newpage_update_ratio"] is None
        assert "wal_write_per_s" in s and "wal_write_bytes" not in res.facts["counter_basis"]
    assert res.facts["sample_errors"] == [] and res.facts["sampler_failure"] is None


def test_io_metrics_request_sizes_and_per_transaction_figures(server: Cluster) -> None:
    """pg_stat_io bytes per object and context (16+; 15 has no pg_stat_io: none, listed
    missing, never 0), the device's bytes per request, FPI and CPU per transaction."""
    res, _, _, xacts = instrumented_run(server, 4)
    m, s, bs = res.metrics, res.series, server.inst.block_size_bytes
    assert m["server_cpu_s_per_xact"] is not None and m["server_cpu_s_per_xact"] > 0
    assert m["wal_fpi_per_xact"] is not None and m["wal_fpi_per_xact"] > 0  # checkpoints ran
    assert m["wal_fpi_bytes_per_xact"] is None  # pg_stat_wal.wal_fpi_bytes is 19+
    written, requests = m["host_device_write_bytes"], m["host_device_write_bytes_per_request"]
    if written:  # the host's block device is readable here and was written to
        assert requests is not None and requests >= SECTOR_BYTES
        assert all(v is None or v >= 0 for _, v in s["host_device_write_ios_per_s"])
        assert any(v for _, v in s["host_device_write_ios_per_s"])
    io = {k: v for k, v in m.items() if k.startswith("io_")}
    if server.inst.major < 16:
        assert io == {} and "pg_stat_io" in res.missing
        assert res.facts["stat_io_basis"].startswith("no pg_stat_io")
        return
    sizes = {k: v for k, v in io.items() if "_bytes_per_" in k and not k.endswith("_per_xact")}
    assert all(v is None or v >= SECTOR_BYTES for v in sizes.values())  # None: no requests
    assert all(v is not None and v >= 0 for k, v in io.items() if k not in sizes)
    assert (m["io_write_bytes_relation_normal"] or 0) % bs == 0  # checkpoints wrote pages
    assert (m["io_write_bytes_relation_normal"] or 0) > 0
    assert m["io_write_bytes_relation_normal_per_xact"] == pytest.approx(
        (m["io_write_bytes_relation_normal"] or 0) / xacts
    )
    if server.inst.major >= 18:
        assert (m["io_write_bytes_wal_normal"] or 0) > 0
        assert (m["io_write_bytes_per_write_wal"] or 0) >= server.inst.wal_block_size_bytes
        assert "requests counted" in res.facts["stat_io_basis"]


TOTALS_SQL = (
    "SELECT d.blks_hit, d.xact_commit,"
    " (SELECT sum(n_tup_hot_upd) FROM pg_stat_user_tables) AS n_tup_hot_upd"
    " FROM pg_stat_database d WHERE d.datname = current_database()"
)


def view_totals(c: Cluster) -> dict[str, float]:
    """The counters as the views hold them once every other session has exited."""
    wal_bytes(c)  # waits for the other sessions to go
    with psycopg.connect(c.conninfo, autocommit=True) as conn:
        cur = conn.execute(TOTALS_SQL)
        row = cur.fetchone()
        assert row is not None and cur.description is not None
        return {d.name: float(v) for d, v in zip(cur.description, row, strict=True)}


def test_last_second_is_not_the_exit_flush(paths: Paths, pg18_8k: Installation) -> None:
    """Backends flush their statistics at most once a second and as they exit: that exit
    backlog is the run's final flush, never its last second, also when 1 Hz ticks fall
    after the clients have gone (the test waits for one), and the series plus the final
    flush still add up to the views' differences."""
    c = make_cluster(paths, pg18_8k, SETTINGS)
    try:
        pgbench(c, ["-i", "-s", "1", "-q"])
        before = view_totals(c)
        inst = Instrumentation(context_for(c, measure_space=False))
        begun = time.time()
        inst.begin()
        out = pgbench(c, ["-n", "-c", "4", "-j", "2", "-T", "6"]).stdout
        exited_s = time.time() - begun
        time.sleep(1.3)  # at least one tick after the clients left, as on a loaded machine
        res = inst.end(1, 6.0)
        after = view_totals(c)
    finally:
        remove_cluster(c)
    assert "tps" in out
    s = res.series
    for counter in ("blks_hit", "xact_commit", "n_tup_hot_upd"):
        points = s[f"{counter}_per_s"]
        values = [v or 0.0 for _, v in points]
        assert len(values) >= 5, values
        median = statistics.median(values[1:-1])
        (t_final, final), *rest = s[f"{counter}_final_flush"]
        assert rest == [] and final is not None and final > 0
        # The series ends at a tick taken while the clients were there (derived.while_clients):
        # the ticks after pgbench's exit, which read the exit flush, are not seconds of it.
        # Their magnitude is no test: beside a build, one run's seconds read 20,606 to
        # 51,164 blocks hit (a flush a backend could not take its lock for comes a second
        # later), so an exit flush drawn as a second would look like a busy one. Where the
        # backlog went is the test: a final flush without it would hold only the probes'
        # own session (a few blocks, no HOT update), not a tenth of a second of the run.
        assert points[-1][0] < exited_s, (counter, points[-1][0], exited_s)
        assert final >= 0.1 * median, (counter, values, final)  # the flush is here
        assert t_final > exited_s
        total = integral(points) + final
        view_delta = after[counter] - before[counter]
        if counter == "n_tup_hot_upd":  # only pgbench updates rows: exact
            assert total == pytest.approx(view_delta, rel=1e-9)
        else:  # the probe's own session adds a little after the end snapshot: about 1 % of
            # the workload's blocks hit (1.04 % in a CI run on a loaded machine, where the
            # workload hits fewer); a lost second or flush would be a whole second's worth
            allowed = max(0.01 * view_delta, 0.25 * median)
            assert 0 <= view_delta - total < allowed, (counter, total, view_delta, median)
    assert res.metrics["n_tup_hot_upd"] == pytest.approx(
        after["n_tup_hot_upd"] - before["n_tup_hot_upd"]
    )


def test_provenance(server: Cluster) -> None:
    prov = collect_provenance(
        server.conninfo, server.inst, storage_facts={"kind": "dir"}, commands=[["pgbench", "-i"]]
    )
    assert prov["errors"] == {}
    assert int(prov["settings"]["block_size"]["setting"]) == server.inst.block_size_bytes
    assert prov["pg_config"]["VERSION"].startswith(f"PostgreSQL {server.inst.major}")
    assert prov["host"]["kernel"] and prov["host"]["mem_total_bytes"] > 0
    assert prov["storage"] == {"kind": "dir"} and prov["commands"] == [["pgbench", "-i"]]


def test_begin_fails_cleanly_without_server(paths: Paths, pg15_system: Installation) -> None:
    from blocklab.errors import RunError

    ctx = ProbeContext(
        conninfo=f"host={paths.work} port=1 user=blocklab dbname=postgres",
        data_dir=paths.work,
        server_log=paths.work / "nothing.log",
        devices=[],
        block_size_bytes=8192,
        wal_block_size_bytes=8192,
        server_pid=1,
        server_version_num=150000,
    )
    with pytest.raises(RunError, match="cannot connect"):
        Instrumentation(ctx).begin()


def test_unreadable_log_is_missing_not_zero(server: Cluster) -> None:
    ctx = context(server)
    ctx.server_log = server.data_dir.parent / "no-such.log"
    ctx.measure_space = False
    inst = Instrumentation(ctx)
    inst.begin()
    out = pgbench(server, ["-n", "-c", "1", "-T", "2"]).stdout
    res = inst.end(1, 2.0)
    assert "tps" in out
    assert "server_log" in res.missing and res.checkpoints == []
    assert "checkpoints_logged" not in res.metrics  # absent, never 0
    assert "pgstattuple" not in res.missing  # not asked for
    assert res.metrics["wal_bytes"] is not None

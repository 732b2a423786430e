"""Pure parts of the probes: the version-aware counter plan, /proc and /sys parsers,
series and per-run metrics from snapshots. Real servers are in test_probes.py."""

from __future__ import annotations

import pytest

from blocklab import proc
from blocklab.analysis.metrics import metric_info
from blocklab.probes import Device, derived, views
from blocklab.probes.provenance import parse_pg_config
from blocklab.probes.sampler import (
    CLK_TCK,
    DeviceCounters,
    Snapshot,
    parse_block_stat,
    parse_meminfo,
    parse_proc_stat_cpu,
    pid_cpu,
    tree_cpu_s,
)

# Columns per version (PostgreSQL docs, monitoring-stats, versions 15-18).
WAL15 = {"wal_records", "wal_fpi", "wal_bytes", "wal_buffers_full", "wal_write", "wal_sync"}
WAL18 = {"wal_records", "wal_fpi", "wal_bytes", "wal_buffers_full", "stats_reset"}
BGW15 = {
    "checkpoints_timed",
    "checkpoints_req",
    "buffers_checkpoint",
    "buffers_clean",
    "buffers_backend",
    "buffers_alloc",
}
BGW17 = {"buffers_clean", "maxwritten_clean", "buffers_alloc", "stats_reset"}
IO16 = {"backend_type", "object", "context", "reads", "writes", "extends", "op_bytes", "hits"}
IO18 = {"backend_type", "object", "context", "reads", "read_bytes", "writes", "write_bytes"}
IO18 |= {"extends", "extend_bytes", "hits", "fsyncs"}
CK17 = {"num_timed", "num_requested", "restartpoints_done", "buffers_written"}
DB = {"xact_commit", "xact_rollback", "blks_read", "blks_hit", "temp_bytes"}
TAB15 = {"n_tup_ins", "n_tup_upd", "n_tup_del", "n_tup_hot_upd"}
TAB16 = TAB15 | {"n_tup_newpage_upd"}


def cols(**views_: set[str]) -> dict[str, frozenset[str]]:
    return {f"pg_stat_{k}": frozenset(v) for k, v in views_.items()}


PG15 = cols(wal=WAL15, bgwriter=BGW15, database=DB, user_tables=TAB15)
PG16 = cols(wal=WAL15, bgwriter=BGW15, io=IO16, database=DB, user_tables=TAB16)
PG17 = cols(wal=WAL15, bgwriter=BGW17, checkpointer=CK17, io=IO16, database=DB, user_tables=TAB16)
PG18 = cols(
    wal=WAL18,
    bgwriter=BGW17,
    checkpointer=CK17 | {"num_done", "slru_written"},
    io=IO18,
    database=DB,
    user_tables=TAB16,
)


def test_pg15_plan_uses_bgwriter_buffers_times_the_build_block_size() -> None:
    plan = views.plan_counters(PG15, block_size_bytes=4096)
    assert "checkpoints_done" not in plan.names
    assert {"checkpoints_timed", "checkpoints_requested", "wal_write"} <= set(plan.names)
    assert "buffers_checkpoint * 4096" in plan.sql() and "8192" not in plan.sql()
    assert "pg_stat_io" in plan.missing
    assert "pg_stat_user_tables.n_tup_newpage_upd" in plan.missing
    assert plan.basis["backend_write_bytes"].startswith("pg_stat_bgwriter.buffers_backend")


def test_pg16_and_17_take_role_writes_from_pg_stat_io_op_bytes() -> None:
    for columns in (PG16, PG17):
        plan = views.plan_counters(columns, block_size_bytes=4096)
        sql = plan.sql()
        assert "writes * op_bytes" in sql and "buffers_backend" not in sql
        assert plan.basis["backend_write_bytes"] == "pg_stat_io (writes * op_bytes)"
        assert "n_tup_newpage_upd" in plan.names
    p17 = views.plan_counters(PG17, block_size_bytes=8192)
    assert p17.basis["checkpoints_timed"] == "pg_stat_checkpointer.num_timed"
    assert "pg_stat_checkpointer.num_done" in p17.missing


def test_pg18_uses_byte_columns_and_num_done_and_has_no_wal_write() -> None:
    plan = views.plan_counters(PG18, block_size_bytes=4096)
    sql = plan.sql()
    assert "sum(write_bytes)" in sql and "op_bytes" not in sql
    assert "checkpoints_done" in plan.names
    # WAL I/O moved to pg_stat_io (object 'wal'); pg_stat_wal.wal_write is not missing
    assert plan.basis["wal_sync"] == "pg_stat_io (sum(fsyncs) FILTER (WHERE object = 'wal'))"
    assert "wal_write_bytes" in plan.names
    assert not any("wal_write" in m for m in plan.missing)
    assert plan.missing == ()


def test_wal_fpi_bytes_is_read_where_it_exists_and_never_missing_before() -> None:
    assert "wal_fpi_bytes" not in views.plan_counters(PG18, block_size_bytes=8192).names
    pg19 = {**PG18, "pg_stat_wal": frozenset(WAL18 | {"wal_fpi_bytes"})}
    plan = views.plan_counters(pg19, block_size_bytes=8192)
    assert plan.basis["wal_fpi_bytes"] == "pg_stat_wal.wal_fpi_bytes" and plan.missing == ()


def test_unknown_server_reports_missing_never_zero() -> None:
    plan = views.plan_counters(cols(database=DB), block_size_bytes=8192)
    assert {"pg_stat_wal", "pg_stat_io", "pg_stat_checkpointer"} <= set(plan.missing)
    assert "wal_bytes" not in plan.names
    before = snap(0.0, {"xact_commit": 0.0})
    after = snap(10.0, {"xact_commit": 100.0})
    m = derived.derive_metrics(
        before, after, transactions=100, duration_s=10, block_size_bytes=8192, scopes={}
    )
    assert m["wal_bytes"] is None and m["wal_bytes_per_xact"] is None
    assert m["checkpointer_write_bytes"] is None and m["hot_update_ratio"] is None


def test_sql_shape_and_row_conversion() -> None:
    plan = views.plan_counters(PG18, block_size_bytes=8192)
    assert plan.sql().startswith("SELECT w.wal_records")
    assert "%(relations)s" in plan.sql()
    row = views.row_to_counters(["a", "b"], [1, None])
    assert row == {"a": 1.0, "b": None}
    assert views.row_to_counters(["a"], None) == {"a": None}


def test_block_stat_is_sectors_of_512_bytes() -> None:
    text = "   1000   20   8000   50   300   7   6000   90   0   120   140   0 0 0 0 0 0\n"
    c = parse_block_stat(text)
    assert c == DeviceCounters(
        read_bytes=8000 * 512, write_bytes=6000 * 512, read_ios=1000, write_ios=300, busy_ms=120
    )


def test_proc_parsers() -> None:
    cpu = parse_proc_stat_cpu("cpu  10 2 5 100 7 1 1 0 0 0\ncpu0 5 1 2 50 3 0 0 0 0 0\n")
    assert cpu == {
        "user": 10, "nice": 2, "system": 5, "idle": 100,
        "iowait": 7, "irq": 1, "softirq": 1, "steal": 0,
    }  # fmt: skip
    mem = parse_meminfo("MemTotal:        2000 kB\nMemAvailable:     500 kB\nHugePages_Total: 0\n")
    assert mem == {"MemTotal": 2048000, "MemAvailable": 512000, "HugePages_Total": 0}
    stat = "42 (postgres: x) S 7 42 42 0 -1 4194560 1 0 0 0 300 100 50 25 20 0 1 0 5 0 0"
    ppid, cpu_s = pid_cpu(proc.parse_pid_stat(stat))
    assert ppid == 7 and cpu_s == pytest.approx((300 + 100 + 50 + 25) / CLK_TCK)
    assert tree_cpu_s({1: (0, 2.0), 2: (1, 0.5), 3: (1, 0.25), 4: (2, 9.0)}, 1) == 2.75
    assert tree_cpu_s({}, 1) is None


def snap(epoch: float, pg: dict[str, float | None], **kw: object) -> Snapshot:
    return Snapshot(
        epoch=epoch,
        pg=pg,
        devices=kw.get("devices", {}),  # type: ignore[arg-type]
        cpu_ticks=kw.get("cpu", None),  # type: ignore[arg-type]
        mem=kw.get("mem", None),  # type: ignore[arg-type]
        server_cpu_s=kw.get("server_cpu_s", None),  # type: ignore[arg-type]
        io=kw.get("io", None),  # type: ignore[arg-type]
    )


def dev(w: int, r: int = 0, rio: int = 0, wio: int = 0) -> DeviceCounters:
    return DeviceCounters(read_bytes=r, write_bytes=w, read_ios=rio, write_ios=wio, busy_ms=0)


def test_series_rates_add_up_and_are_per_role() -> None:
    s = [
        snap(100.0, {"wal_bytes": 0.0, "checkpoints_done": 5.0}, devices={"loop1": dev(0)}),
        snap(101.0, {"wal_bytes": 1000.0, "checkpoints_done": 5.0}, devices={"loop1": dev(4096)}),
        snap(102.5, {"wal_bytes": 4000.0, "checkpoints_done": 6.0}, devices={"loop1": dev(8192)}),
        snap(103.0, {"wal_bytes": None, "checkpoints_done": 6.0}, devices={"loop1": None}),
    ]
    series = derived.build_series(s, {"loop1": "device_wal"}, "checkpoints_done")
    # WAL is flushed by backends: the line ends at the last 1 Hz sample, the rest is apart
    assert series["wal_bytes_per_s"] == [(1.0, 1000.0), (2.5, 2000.0)]
    assert series["wal_bytes_final_flush"] == [(3.0, None)]
    assert series["device_wal_write_bytes_per_s"][:2] == [(1.0, 4096.0), (2.5, 4096 / 1.5)]
    assert series["device_wal_write_bytes_per_s"][2] == (3.0, None)
    assert [v for _, v in series["checkpoints_done"]] == [0.0, 1.0, 1.0]
    assert series["mem_used_bytes"][0] == (1.0, None)


def integral(points: list[tuple[float, float | None]]) -> float:
    stamps = [0.0] + [t for t, _ in points]
    return sum((v or 0.0) * (t - t0) for (t, v), t0 in zip(points, stamps, strict=False))


def test_the_exit_flush_is_kept_apart_from_the_per_second_line() -> None:
    # 1000 blocks a second; at 3.0 s the backends still hold 600 unflushed; they exit
    # and flush them (plus 20 ms of work) before the end-of-run snapshot at 3.02 s
    hits = [0.0, 1000.0, 2000.0, 3000.0, 3620.0]
    stamps = [0.0, 1.0, 2.0, 3.0, 3.02]
    disk = [dev(w) for w in (0, 4096, 8192, 12288, 12288 + 80)]
    s = [
        snap(t, {"blks_hit": h, "checkpointer_write_bytes": h}, devices={"sda": d})
        for t, h, d in zip(stamps, hits, disk, strict=True)
    ]
    series = derived.build_series(s, {"sda": "host_device"}, None)
    assert series["blks_hit_per_s"] == [(1.0, 1000.0), (2.0, 1000.0), (3.0, 1000.0)]
    assert series["blks_hit_final_flush"] == [(3.02, 620.0)]  # an amount, not a rate
    assert integral(series["blks_hit_per_s"]) + 620.0 == pytest.approx(3620.0)
    # the checkpointer flushes its own counters, not at the workload's exit: the few
    # milliseconds at the end fold into the last second, as the device's do
    ck = series["checkpointer_write_bytes_per_s"]
    assert "checkpointer_write_bytes_final_flush" not in series
    assert ck[-1] == (3.02, pytest.approx(1620.0 / 1.02))
    assert integral(ck) == pytest.approx(3620.0)
    wr = series["host_device_write_bytes_per_s"]
    assert wr[-1] == (3.02, pytest.approx(4176 / 1.02)) and len(wr) == 3
    assert integral(wr) == pytest.approx(12288 + 80)


def test_a_tick_after_the_clients_left_is_not_the_last_second() -> None:
    """The 1 Hz tick at 3.0 s fell after pgbench's 2 clients had exited (it counted
    none) and read their exit flush: 1,600 blocks in that second. The series ends at the
    2.0 s tick, the last that saw them, and the flush is the final amount, as it is when
    no tick falls there; totals stay exact."""
    hits, stamps = [0.0, 1000.0, 2000.0, 3600.0, 3610.0], [0.0, 1.0, 2.0, 3.0, 3.2]
    clients: list[float | None] = [0.0, 2.0, 2.0, 0.0, 0.0]
    s = [
        snap(t, {"blks_hit": h, views.CLIENTS: n}, devices={"sda": dev(int(h))})
        for t, h, n in zip(stamps, hits, clients, strict=True)
    ]
    series = derived.build_series(s, {"sda": "host_device"}, None)
    assert series["blks_hit_per_s"] == [(1.0, 1000.0), (2.0, 1000.0)]
    assert series["blks_hit_final_flush"] == [(3.2, 1610.0)]
    wr = series["host_device_write_bytes_per_s"]  # the device's rate over the rest
    assert wr[-1] == (3.2, pytest.approx(1610.0 / 1.2)) and integral(wr) == pytest.approx(3610)
    # a tick whose count failed (None) is kept, as is every tick of a run none was seen in
    clients[3] = None
    unknown = [snap(t, {views.CLIENTS: n}) for t, n in zip(stamps, clients, strict=True)]
    assert derived.while_clients(unknown) == unknown
    never = [snap(t, {views.CLIENTS: 0.0}) for t in stamps]
    assert derived.while_clients(never) == never


def test_a_tick_while_the_clients_were_leaving_is_not_the_last_second() -> None:
    """CI saw it: 4 clients, and the 6 s tick read 5,322 HOT updates against a median of
    3,085 a second, for three of them had exited (and flushed up to a second each) before
    it. A sample that saw fewer clients than the one before is dropped after the last that
    saw any, whether or not a later tick saw none; a rise or a steady count is kept."""
    stamps = [0.0, 1.0, 2.0, 3.0, 4.0, 4.1]

    def kept(clients: list[float | None]) -> list[float]:
        s = [snap(t, {views.CLIENTS: n}) for t, n in zip(stamps, clients, strict=True)]
        return [x.epoch for x in derived.while_clients(s)]

    assert kept([0.0, 4.0, 4.0, 4.0, 1.0, 0.0]) == [0.0, 1.0, 2.0, 3.0, 4.1]
    assert kept([0.0, 4.0, 4.0, 1.0, 0.0, 0.0]) == [0.0, 1.0, 2.0, 4.1]
    assert kept([0.0, 4.0, 3.0, 2.0, 1.0, 0.0]) == [0.0, 1.0, 4.1]  # a ramp down: all of it
    assert kept([0.0, 2.0, 4.0, 4.0, 4.0, 0.0]) == stamps  # steady to the end: all kept
    assert kept([0.0, 4.0, 2.0, 3.0, 2.0, 0.0]) == [0.0, 1.0, 2.0, 3.0, 4.1]  # -C flaps
    assert kept([0.0, 4.0, None, 1.0, 1.0, 0.0]) == stamps  # no count to judge a fall by
    hits = [0.0, 3000.0, 6000.0, 9000.0, 13_500.0, 13_600.0]
    clients = [0.0, 4.0, 4.0, 4.0, 1.0, 0.0]
    s = [
        snap(t, {"blks_hit": h, views.CLIENTS: n})
        for t, h, n in zip(stamps, hits, clients, strict=True)
    ]
    series = derived.build_series(s, {}, None)
    assert series["blks_hit_per_s"] == [(1.0, 3000.0), (2.0, 3000.0), (3.0, 3000.0)]
    assert series["blks_hit_final_flush"] == [(4.1, 4600.0)]  # totals stay exact


def test_without_samples_the_whole_window_is_the_final_flush() -> None:
    s = [snap(0.0, {"xact_commit": 10.0}), snap(0.5, {"xact_commit": 60.0})]
    series = derived.build_series(s, {}, None)
    assert "xact_commit_per_s" not in series
    assert series["xact_commit_final_flush"] == [(0.5, 50.0)]


def test_device_scopes_name_what_the_counters_cover() -> None:
    loop = lambda n, r: Device(n, r, shared=False)  # noqa: E731
    host = lambda n, r: Device(n, r, shared=True)  # noqa: E731
    scopes = derived.device_scopes
    assert scopes([loop("loop1", "data"), loop("loop2", "wal")]) == {
        "loop1": "device_data",
        "loop2": "device_wal",
    }
    # data and WAL in two directories on one disk: one device, counted once, never "wal"
    assert scopes([host("sda1", "data"), host("sda1", "wal")]) == {"sda1": "host_device"}
    assert scopes([host("sda1", "data")]) == {"sda1": "host_device"}
    assert scopes([loop("loop1", "data"), host("sda1", "wal")]) == {
        "loop1": "device_data",
        "sda1": "host_device",
    }
    assert scopes([host("sda1", "data"), host("sdb1", "wal")]) == {
        "sda1": "host_device_data",
        "sdb1": "host_device_wal",
    }


def test_two_roles_on_one_host_device_are_counted_once() -> None:
    before = snap(0.0, {}, devices={"sda1": dev(0, 0)})
    after = snap(2.0, {}, devices={"sda1": dev(1 << 20, 4096, rio=1, wio=8)})
    scopes = derived.device_scopes([Device("sda1", "data"), Device("sda1", "wal")])
    m = derived.derive_metrics(
        before, after, transactions=256, duration_s=2, block_size_bytes=8192, scopes=scopes
    )
    devices = {k: v for k, v in m.items() if "device" in k}
    assert devices == {
        "host_device_read_bytes": 4096.0,
        "host_device_write_bytes": float(1 << 20),
        "host_device_read_bytes_per_xact": 16.0,
        "host_device_write_bytes_per_xact": 4096.0,
        "host_device_read_bytes_per_request": 4096.0,
        "host_device_write_bytes_per_request": 131072.0,
    }


def test_device_metric_labels_say_shared_for_the_host_device() -> None:
    assert metric_info("host_device_write_bytes_per_xact").label == (
        "host device (shared) bytes written per transaction"
    )
    assert (
        metric_info("host_device_wal_write_bytes").label
        == "host device (shared, WAL) bytes written"
    )
    assert metric_info("device_wal_write_bytes_per_xact").label == (
        "WAL device bytes written per transaction"
    )
    assert metric_info("device_data_write_bytes").label == "data device bytes written"
    assert metric_info("device_data_write_bytes").unit == "bytes"


def test_cpu_percentages() -> None:
    a = {"user": 100, "nice": 0, "system": 50, "idle": 800, "iowait": 50}
    b = {"user": 130, "nice": 10, "system": 60, "idle": 880, "iowait": 70}  # 150 ticks
    s = derived.build_series([snap(0, {}, cpu=a), snap(1, {}, cpu=b)], {}, None)
    assert s["cpu_user_pct"] == [(1.0, pytest.approx(100 * 40 / 150))]
    assert s["cpu_system_pct"] == [(1.0, pytest.approx(100 * 10 / 150))]
    assert s["cpu_iowait_pct"] == [(1.0, pytest.approx(100 * 20 / 150))]


def test_run_metrics_in_bytes() -> None:
    before = snap(
        0.0,
        {
            "wal_bytes": 1e6, "wal_fpi": 10.0, "wal_records": 100.0,
            "checkpointer_write_bytes": 0.0, "bgwriter_write_bytes": 0.0,
            "backend_write_bytes": 0.0, "n_tup_upd": 0.0, "n_tup_hot_upd": 0.0,
            "n_tup_newpage_upd": 0.0, "blks_hit": 0.0, "blks_read": 0.0,
        },
        devices={"loop1": dev(0), "loop2": dev(0)},
        server_cpu_s=1.0,
        cpu={"user": 0, "system": 0, "idle": 0, "iowait": 0},
    )  # fmt: skip
    after = snap(
        10.0,
        {
            "wal_bytes": 3e6, "wal_fpi": 110.0, "wal_records": 1100.0,
            "checkpointer_write_bytes": 4096 * 50, "bgwriter_write_bytes": 4096.0,
            "backend_write_bytes": 0.0, "n_tup_upd": 300.0, "n_tup_hot_upd": 240.0,
            "n_tup_newpage_upd": 30.0, "blks_hit": 990.0, "blks_read": 10.0,
        },
        devices={"loop1": dev(1 << 20), "loop2": dev(3 << 20)},
        server_cpu_s=3.0,
        cpu={"user": 5 * CLK_TCK, "system": 1 * CLK_TCK, "idle": 100, "iowait": 100},
    )  # fmt: skip
    m = derived.derive_metrics(
        before,
        after,
        transactions=100,
        duration_s=10,
        block_size_bytes=4096,
        scopes={"loop1": "device_data", "loop2": "device_wal"},
    )
    assert m["wal_bytes"] == 2e6 and m["wal_bytes_per_xact"] == 2e4
    assert m["wal_fpi_per_record"] == pytest.approx(0.1)
    assert m["fpi_bytes_share_of_wal_max"] == pytest.approx(100 * 4096 / 2e6)
    assert m["checkpointer_write_bytes_per_xact"] == 4096 * 50 / 100
    assert m["hot_update_ratio"] == 0.8 and m["newpage_update_ratio"] == 0.1
    assert m["cache_hit_ratio"] == 0.99
    assert m["device_data_write_bytes"] == 1 << 20
    assert m["device_wal_write_bytes_per_xact"] == (3 << 20) / 100
    assert m["server_cpu_s_per_xact"] == pytest.approx(0.02)
    assert m["host_cpu_busy_s"] == pytest.approx(6.0)


def test_fpi_share_is_capped() -> None:
    m = derived.derive_metrics(
        snap(0, {"wal_bytes": 0.0, "wal_fpi": 0.0, "wal_records": 0.0}),
        snap(1, {"wal_bytes": 8000.0, "wal_fpi": 2.0, "wal_records": 2.0}),
        transactions=0,
        duration_s=1,
        block_size_bytes=8192,
        scopes={},
    )
    assert m["fpi_bytes_share_of_wal_max"] == 1.0
    assert m["wal_bytes_per_xact"] is None  # no transactions: no per-xact figure


def test_space_totals() -> None:
    rows = [
        {"relation": "a", "table_bytes": 100.0, "table_free_bytes": 10.0, "index_bytes": 50.0,
         "index_free_bytes": None, "table_dead_tuple_bytes": 0.0},
        {"relation": "b", "table_bytes": 200.0, "table_free_bytes": 20.0, "index_bytes": 0.0,
         "index_free_bytes": 0.0, "table_dead_tuple_bytes": 1.0},
    ]  # fmt: skip
    m = derived.space_metrics(rows)
    assert m["table_bytes"] == 300 and m["table_free_bytes"] == 30
    assert m["index_free_bytes"] is None  # one unknown makes the total unknown
    assert m["a.index_bytes"] == 50


def test_pg_config_parser() -> None:
    out = parse_pg_config("BINDIR = /usr/bin\nCONFIGURE =  '--with-blocksize=4'\nnoise\n")
    assert out == {"BINDIR": "/usr/bin", "CONFIGURE": "'--with-blocksize=4'"}


def test_request_sizes_iops_fpi_bytes_and_stat_io_from_snapshots() -> None:
    io_before = {"io_read_bytes.relation.normal": 0.0, "io_reads.relation.normal": 0.0}
    io_after = {"io_read_bytes.relation.normal": 1048576.0, "io_reads.relation.normal": 8.0}
    pg0 = {"wal_bytes": 0.0, "wal_fpi": 0.0, "wal_fpi_bytes": 0.0}
    pg1 = {"wal_bytes": 100000.0, "wal_fpi": 10.0, "wal_fpi_bytes": 40000.0}
    s = [
        snap(0.0, pg0, devices={"loop1": dev(0, 0)}, io=io_before, server_cpu_s=1.0),
        snap(1.0, pg0, devices={"loop1": dev(8192, 262144, rio=2, wio=1)}),
        snap(2.0, pg1, devices={"loop1": dev(16384, 524288, rio=6, wio=2)}, io=io_after),
    ]
    s[-1].server_cpu_s = 3.0
    scopes = derived.device_scopes([Device("loop1", "data", shared=False)])
    m = derived.derive_metrics(
        s[0], s[-1], transactions=100, duration_s=2, block_size_bytes=8192, scopes=scopes
    )
    assert m["device_data_read_bytes_per_request"] == 524288 / 6
    assert m["device_data_write_bytes_per_request"] == 8192
    assert m["wal_fpi_bytes_per_xact"] == 400 and m["fpi_bytes_share_of_wal"] == 0.4
    assert m["io_read_bytes_relation_normal_per_xact"] == 10485.76
    assert m["io_read_bytes_per_read_relation"] == 131072
    assert m["server_cpu_s_per_xact"] == 0.02
    series = derived.build_series(s, scopes, None)
    assert series["device_data_read_ios_per_s"] == [(1.0, 2.0), (2.0, 4.0)]
    assert series["device_data_write_ios_per_s"] == [(1.0, 1.0), (2.0, 1.0)]


def test_without_fpi_bytes_or_ios_the_metrics_are_none_not_zero() -> None:
    before = snap(0.0, {"wal_bytes": 0.0}, devices={"loop1": dev(0)})
    after = snap(1.0, {"wal_bytes": 10.0}, devices={"loop1": dev(0)})
    scopes = derived.device_scopes([Device("loop1", "data", shared=False)])
    m = derived.derive_metrics(
        before, after, transactions=5, duration_s=1, block_size_bytes=8192, scopes=scopes
    )
    assert m["wal_fpi_bytes_per_xact"] is None and m["fpi_bytes_share_of_wal"] is None
    assert m["device_data_read_bytes_per_request"] is None  # no requests: no size
    assert not any(k.startswith("io_") for k in m)  # no pg_stat_io snapshot


def test_a_sample_is_one_round_trip_and_reads_no_process() -> None:
    """The 1 Hz sampler's snapshot, on the workload's hot path: one statement over the
    probes' connection; the server's CPU, pg_stat_io and the CPU account wait for the
    begin and end snapshots."""
    import os
    from pathlib import Path
    from typing import Any

    from blocklab.probes import Instrumentation, ProbeContext

    sent: list[str] = []

    class _Conn:
        def execute(self, sql: str, params: Any = None, prepare: Any = None) -> Any:
            sent.append(sql)
            return self

        def fetchone(self) -> None:
            return None

    ctx = ProbeContext(
        conninfo="",
        data_dir=Path("/"),
        server_log=Path("/nonexistent"),
        devices=[],
        block_size_bytes=8192,
        wal_block_size_bytes=8192,
        server_pid=os.getpid(),
        server_version_num=180000,
    )
    probes = Instrumentation(ctx)
    plan = views.plan_counters(PG18, block_size_bytes=8192)
    probes._conn, probes._plan, probes._sql = _Conn(), plan, plan.sql()  # type: ignore[assignment]
    snap = probes.sample()
    assert sent == [plan.sql()]
    assert snap.server_cpu_s is None and snap.io is None and snap.cpu_account is None

"""pg_stat_io of PostgreSQL 18 (byte columns) parsed into bytes per object and context,
on tests/data/stat_io/pg_stat_io_18.csv (recorded from a PostgreSQL 18.6 server: see its
README). The expected totals are summed here with the csv module alone, and the main ones
are also stated as the recorded rows' numbers."""

from __future__ import annotations

import csv
from pathlib import Path

from blocklab.analysis.metrics import metric_info
from blocklab.probes import stat_io

FIXTURE = Path(__file__).parents[1] / "data" / "stat_io" / "pg_stat_io_18.csv"


def csv_sum(column: str, obj: str, context: str) -> tuple[int, int]:
    """(sum of the column over backend types, how many of its cells are not NULL)."""
    with FIXTURE.open(newline="") as f:
        cells = [
            r[column] for r in csv.DictReader(f) if (r["object"], r["context"]) == (obj, context)
        ]
    return sum(int(c) for c in cells if c), sum(1 for c in cells if c)


def test_parse_reads_every_row_and_the_recorded_columns() -> None:
    rows = stat_io.parse(FIXTURE.read_text())
    assert len(rows) == 79  # every backend type x object x context the server tracks
    assert {"read_bytes", "write_bytes", "extend_bytes"} <= set(rows[0])
    assert "op_bytes" not in rows[0]  # dropped in 18
    ckpt = [r for r in rows if r["backend_type"] == "checkpointer" and r["object"] == "relation"]
    assert [(r["context"], r["reads"], r["writes"]) for r in ckpt] == [
        ("init", "", "0"),
        ("normal", "", "1288"),
    ]
    assert rows[0]["stats_reset"] == "2026-11-25 17:40:05.270768+00"


def test_bytes_per_object_and_context_sum_backend_types() -> None:
    found = stat_io.bytes_by_object_context(stat_io.parse(FIXTURE.read_text()))
    # client backend 158072832 + background worker 34234368 (the others 0)
    assert found["io_read_bytes.relation.bulkread"] == 192307200
    # client 106815488 + background worker 40960 (checkpointer's and bgwriter's NULL left out)
    assert found["io_read_bytes.relation.normal"] == 106856448
    # client 47947776 + background writer 45637632 + checkpointer 10551296
    assert found["io_write_bytes.relation.normal"] == 104136704
    assert found["io_extend_bytes.relation.bulkwrite"] == 95453184
    assert found["io_read_bytes.relation.vacuum"] == 195993600
    assert found["io_write_bytes.temp_relation.normal"] == 10878976
    assert found["io_write_bytes.wal.init"] == 117440512  # 7 new 16 MiB segments
    # client 188342272 + walwriter 1630208 + checkpointer 8192
    assert found["io_write_bytes.wal.normal"] == 189980672
    for op in stat_io.OPS:
        for obj, context in [
            ("relation", "bulkread"),
            ("relation", "bulkwrite"),
            ("relation", "normal"),
            ("relation", "vacuum"),
            ("temp relation", "normal"),
            ("wal", "normal"),
            ("wal", "init"),
        ]:
            total, tracked = csv_sum(f"{op}_bytes", obj, context)
            key = f"io_{op}_bytes.{obj.replace(' ', '_')}.{context}"
            assert found.get(key) == (total if tracked else None), key
    assert "io_read_bytes.wal.init" not in found  # every cell NULL: not tracked, not 0
    assert "io_extend_bytes.wal.normal" not in found
    assert found["io_read_bytes.wal.normal"] == 0  # tracked and 0: a zero, not absent


def test_pg16_op_bytes_rows_and_delta() -> None:
    text = (
        "backend_type,object,context,reads,writes,extends,op_bytes\n"
        "client backend,relation,normal,10,2,,8192\n"
        "checkpointer,relation,normal,,5,,8192\n"
    )
    before = stat_io.bytes_by_object_context(stat_io.parse(text))
    assert before == {
        "io_read_bytes.relation.normal": 81920,
        "io_write_bytes.relation.normal": 57344,
    }
    after = {
        **before,
        "io_read_bytes.relation.normal": 81920 + 8192,
        "io_read_bytes.wal.normal": 5.0,
    }
    assert stat_io.delta(before, after) == {
        "io_read_bytes.relation.normal": 8192,
        "io_read_bytes.wal.normal": 5.0,
        "io_write_bytes.relation.normal": 0,
    }


def test_requests_are_counted_only_where_bytes_are_columns() -> None:
    rows = stat_io.parse(FIXTURE.read_text())
    found = stat_io.requests_by_object_context(rows)
    # client backend 6613 + background worker 1588 (the others 0)
    assert found["io_reads.relation.bulkread"] == 8201
    assert csv_sum("reads", "relation", "bulkread") == (8201, 9)  # 9 backend types
    assert found["io_writes.wal.init"] == 7
    # reads combined up to io_combine_limit: more than one 8 kB block per request
    assert 192307200 / 8201 > 8192
    assert "io_reads.wal.init" not in found  # NULL count
    pg16 = "backend_type,object,context,reads,op_bytes\nclient backend,relation,normal,10,8192\n"
    assert stat_io.requests_by_object_context(stat_io.parse(pg16)) == {}  # blocks, not requests


def test_rows_of_driver_rows_read_like_psql_csv() -> None:
    rows = stat_io.rows_of(
        ["backend_type", "object", "context", "reads", "read_bytes", "writes", "write_bytes"],
        [("client backend", "relation", "normal", 0, 0, None, None)],
    )
    assert rows == [
        {
            "backend_type": "client backend",
            "object": "relation",
            "context": "normal",
            "reads": "0",
            "read_bytes": "0",
            "writes": "",
            "write_bytes": "",
        }
    ]
    # a zero is a zero (counted), a NULL is not tracked (absent)
    assert stat_io.bytes_by_object_context(rows) == {"io_read_bytes.relation.normal": 0.0}


def totals(text: str) -> dict[str, float]:
    rows = stat_io.parse(text)
    return stat_io.bytes_by_object_context(rows) | stat_io.requests_by_object_context(rows)


def test_run_metrics_bytes_per_transaction_and_request_sizes() -> None:
    header = "backend_type,object,context,reads,read_bytes,writes,write_bytes\n"
    before = totals(header + "client backend,relation,bulkread,10,81920,0,0\n")
    after = totals(
        header
        + "client backend,relation,bulkread,110,13189120,0,0\n"  # 100 reads of 128 KiB
        + "io worker,relation,normal,50,409600,,\n"  # 50 reads of 8 KiB, new since before
        + "client backend,wal,normal,0,0,20,163840\n"
    )
    m = stat_io.run_metrics(before, after, transactions=50)
    assert m["io_read_bytes_relation_bulkread"] == 100 * 131072
    assert m["io_read_bytes_relation_bulkread_per_xact"] == 2 * 131072
    assert m["io_read_bytes_relation_normal"] == 409600
    assert m["io_write_bytes_wal_normal_per_xact"] == 163840 / 50
    assert "io_write_bytes_relation_normal" not in m  # NULL: not tracked, never 0
    # (100 x 128 KiB + 50 x 8 KiB) / 150 requests over the relation's contexts
    assert m["io_read_bytes_per_read_relation"] == (13107200 + 409600) / 150
    assert m["io_write_bytes_per_write_wal"] == 8192
    assert m["io_read_bytes_per_read_wal"] is None  # no reads: no size, not 0
    assert not any(k.startswith("io_reads") for k in m)  # counts stay internal
    assert stat_io.run_metrics(None, after, 50) == {}
    assert stat_io.run_metrics(before, after, 0)["io_read_bytes_relation_normal_per_xact"] is None


def test_pg16_run_metrics_have_bytes_but_no_request_sizes() -> None:
    header = "backend_type,object,context,reads,writes,extends,op_bytes\n"
    before = totals(header + "client backend,relation,normal,10,2,,8192\n")
    after = totals(header + "client backend,relation,normal,30,2,,8192\n")
    m = stat_io.run_metrics(before, after, transactions=4)
    assert m == {
        "io_read_bytes_relation_normal": 20 * 8192,
        "io_read_bytes_relation_normal_per_xact": 5 * 8192,
        "io_write_bytes_relation_normal": 0,
        "io_write_bytes_relation_normal_per_xact": 0,
    }


def test_catalogue_labels_units_and_directions() -> None:
    total = metric_info("io_read_bytes_temp_relation_normal")
    assert (total.label, total.unit, total.higher_is_better) == (
        "temp relation bytes read, normal (pg_stat_io)",
        "bytes",
        None,
    )
    per = metric_info("io_write_bytes_wal_init_per_xact")
    assert per.label == "WAL bytes written, init, per transaction (pg_stat_io)"
    assert per.higher_is_better is False
    size = metric_info("io_extend_bytes_per_extend_relation")
    assert size.label == "relation bytes per extend request (pg_stat_io)"
    assert size.unit == "bytes" and size.higher_is_better is None
    dev = metric_info("device_data_read_bytes_per_request")
    assert dev.label == "data device bytes per read request" and dev.unit == "bytes"
    shared = metric_info("host_device_write_bytes_per_request")
    assert shared.label == "host device (shared) bytes per write request"
    assert metric_info("wal_fpi_bytes_per_xact").higher_is_better is False

"""pg_stat_io of PostgreSQL 18 (byte columns) parsed into bytes per object and context,
on tests/data/stat_io/pg_stat_io_18.csv (constructed from the documented columns: see
its README)."""

from __future__ import annotations

from pathlib import Path

from blocklab.probes import stat_io

FIXTURE = Path(__file__).parents[1] / "data" / "stat_io" / "pg_stat_io_18.csv"


def test_parse_reads_every_row_and_the_documented_columns() -> None:
    rows = stat_io.parse(FIXTURE.read_text())
    assert len(rows) == 18
    assert {"read_bytes", "write_bytes", "extend_bytes"} <= set(rows[0])
    assert "op_bytes" not in rows[0]  # dropped in 18
    assert rows[12]["backend_type"] == "checkpointer" and rows[12]["reads"] == ""


def test_bytes_per_object_and_context_sum_backend_types() -> None:
    found = stat_io.bytes_by_object_context(stat_io.parse(FIXTURE.read_text()))
    # client backend 157286400 + io worker 39321600 + autovacuum 0
    assert found["io_read_bytes.relation.bulkread"] == 196608000
    # autovacuum 98304 + client 40960000 + io worker 6553600 (checkpointer's NULL left out)
    assert found["io_read_bytes.relation.normal"] == 47611904
    # client 1474560 + checkpointer 16777216 + background writer 3276800
    assert found["io_write_bytes.relation.normal"] == 21528576
    assert found["io_extend_bytes.relation.bulkwrite"] == 2539520
    assert found["io_write_bytes.temp_relation.normal"] == 131072
    assert found["io_write_bytes.wal.init"] == 67108864
    assert found["io_write_bytes.wal.normal"] == 16384 + 24576000 + 491520
    assert found["io_read_bytes.wal.normal"] == 163840
    assert "io_read_bytes.wal.init" not in found  # every cell NULL: not tracked, not 0
    assert "io_extend_bytes.wal.normal" not in found


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

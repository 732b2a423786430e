"""The experiment page's "PostgreSQL I/O by context (pg_stat_io)" table, built from a
results database whose pg18 worker variant holds the metrics blocklab.probes.stat_io
makes from the RECORDED tests/data/stat_io/pg_stat_io_18.csv (as the run's end snapshot,
from zero, over 20000 transactions); the io_uring variant's numbers are SYNTHETIC, and
the pg15 variant has none (no pg_stat_io)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from blocklab.analysis.metrics import metric_info
from blocklab.probes import stat_io
from blocklab.report import build_site, data, shape
from blocklab.report.io_contexts import io_table
from blocklab.store import ResultsDB, RunRecord

FIXTURE = Path(__file__).parents[1] / "data" / "stat_io" / "pg_stat_io_18.csv"
MIXED = "io-contexts"
PG15 = "io-contexts-pg15"
XACTS = 20000
BULKREAD = "io_read_bytes_relation_bulkread_per_xact"
WAL_INIT = "io_write_bytes_wal_init_per_xact"


def _recorded_metrics() -> dict[str, float | None]:
    rows = stat_io.parse(FIXTURE.read_text())
    after = stat_io.bytes_by_object_context(rows) | stat_io.requests_by_object_context(rows)
    return stat_io.run_metrics({}, after, XACTS)


def _metrics(vid: str, rnd: int) -> dict[str, float | None]:
    if vid == "worker":
        return _recorded_metrics()
    if vid == "io_uring":  # SYNTHETIC: 3000, 3100, 3200 bulkread bytes; WAL init 0
        return {BULKREAD: 2900.0 + 100 * rnd, WAL_INIT: 0.0}
    return {}  # pg15: no pg_stat_io


def _write(results: Path, name: str, vids: list[str]) -> None:
    variants = [(v, v, f'{{"label": "{v}"}}', {"io_method": v}) for v in vids]
    with ResultsDB(results) as db:
        db.upsert_experiment(
            name,
            description="pg_stat_io per context",
            spec={"name": name},
            seed=1,
            reference=vids[0],
            created_at="2026-11-25T12:00:00+00:00",
            host={"hostname": "synthetic-host"},
            variants=variants,
        )
        for rnd in (1, 2, 3):
            db.record_round(name, rnd, rnd, vids)
            for pos, vid in enumerate(vids):
                at = f"2026-11-25T12:{rnd:02d}:{pos:02d}+00:00"
                db.record_run(
                    RunRecord(
                        experiment=name,
                        variant_id=vid,
                        round=rnd,
                        position=pos,
                        status="ok",
                        started_at=at,
                        ended_at=at,
                        tps=1000.0 + pos + rnd,
                        latency_avg_ms=2.0,
                        transactions=XACTS,
                        metrics=_metrics(vid, rnd),
                    )  # fmt: skip
                )
        db.set_experiment_state(name, "done", "rounds reached")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    _write(results, MIXED, ["worker", "io_uring", "pg15"])
    _write(results, PG15, ["pg15", "pg15b"])
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(results, out)
    return out


def _table(page: str) -> dict[str, list[str]]:
    """metric -> the row's cells as text."""
    out = {}
    for metric, body in re.findall(r'<tr data-metric="([^"]+)">(.*?)</tr>', page, re.S):
        out[metric] = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", body)]
    return out


def test_the_page_shows_bytes_per_transaction_by_object_and_context(site: Path) -> None:
    page = (site / "e" / data.slug(MIXED) / "index.html").read_text()
    assert "PostgreSQL I/O by context (pg_stat_io)" in page
    assert 'id="io-none"' not in page
    rows = _table(page)
    # recorded: client backend 158072832 + background worker 34234368 = 192307200 bytes
    # over 20000 transactions = 9615.36 B = 9.39 kB; synthetic (3000 + 3100 + 3200) / 3
    assert rows[BULKREAD] == ["relation", "bulkread", "read", "9.39 kB", "3.03 kB", "–"]
    # 7 new 16 MiB WAL segments = 117440512 bytes / 20000 = 5872.03 B; io_uring tracked, 0
    assert rows[WAL_INIT] == ["WAL", "init", "written", "5.73 kB", "0 B", "–"]
    # the recorded run's vacuum reads: 195993600 / 20000 = 9799.68 B
    vacuum = rows["io_read_bytes_relation_vacuum_per_xact"]
    assert vacuum == ["relation", "vacuum", "read", "9.57 kB", "–", "–"]
    bulkwrite = rows["io_extend_bytes_relation_bulkwrite_per_xact"]  # 95453184 / 20000
    assert bulkwrite == ["relation", "bulkwrite", "extended", "4.66 kB", "–", "–"]
    # every object/context/op with bytes in the recording, and none without
    assert sorted(rows) == sorted(
        f"io_{op}_bytes_{obj}_{ctx}_per_xact"
        for op, obj, ctx in [
            ("read", "relation", "bulkread"),
            ("read", "relation", "normal"),
            ("read", "relation", "vacuum"),
            ("read", "temp_relation", "normal"),
            ("write", "relation", "bulkread"),
            ("write", "relation", "bulkwrite"),
            ("write", "relation", "normal"),
            ("write", "relation", "vacuum"),
            ("write", "temp_relation", "normal"),
            ("write", "wal", "init"),
            ("write", "wal", "normal"),
            ("extend", "relation", "bulkwrite"),
            ("extend", "relation", "normal"),
            ("extend", "temp_relation", "normal"),
        ]
    )
    assert "io_read_bytes_wal_normal_per_xact" not in rows  # tracked, but 0 everywhere


def test_an_experiment_without_pg_stat_io_says_so_in_one_line(site: Path) -> None:
    page = (site / "e" / data.slug(PG15) / "index.html").read_text()
    assert "PostgreSQL I/O by context (pg_stat_io)" in page
    line = re.search(r'<p class="muted" id="io-none">(.*?)</p>', page)
    assert line is not None and "No pg_stat_io data" in line.group(1)
    assert 'id="io-contexts"' not in page


def _variant(vid: str, means: dict[str, float]) -> data.VariantView:
    v = data.VariantView(vid, vid, 0, {}, {}, is_reference=False)
    for key, mean in means.items():
        cell = shape.cell_stats({1: mean, 2: mean}, None, metric_info(key))
        assert cell is not None
        v.cells[key] = cell
    return v


def test_io_table_rows_order_zeros_and_untracked() -> None:
    a = _variant(
        "a", {WAL_INIT: 8192.0, BULKREAD: 0.0, "io_read_bytes_relation_normal_per_xact": 1}
    )
    b = _variant("b", {BULKREAD: 0.0, "tps": 5.0})
    table = io_table([a, b])
    assert table is not None and table.variants == ("a", "b")
    got = [(r.object, r.context, r.op, r.bytes_per_xact) for r in table.rows]
    assert got == [
        ("relation", "normal", "read", (1.0, None)),
        ("WAL", "init", "written", (8192.0, None)),
    ]  # bulkread: 0 in both, no row
    assert io_table([_variant("c", {"tps": 1.0})]) is None
    only_zeros = io_table([_variant("d", {BULKREAD: 0.0})])
    assert only_zeros is not None and only_zeros.rows == ()  # tracked, no bytes anywhere

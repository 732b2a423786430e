"""Your own database (issue 32) end to end on real PostgreSQL 18 builds with 4 and 8 kB
pages: a small pg_dump -Fc made by examples/own-database/make_dump.py, restored once per
build, a queries file timed per pass with its plans, a statement that fails on 4 kB pages
only (a division by zero there) recorded as that statement's failure with the server's
message while the others are kept; the per-query comparison in `blocklab summary`."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from helpers import blocklab_wide

from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.store import ResultsDB

pytestmark = pytest.mark.build
EXAMPLE = Path(__file__).parents[2] / "examples" / "own-database"
FAILS_AT_4K = """
-- name: fails_at_4k
SELECT 1 / (current_setting('block_size')::int - 4096);
-- name: by_customer
-- params: customers.csv
SELECT count(*) FROM orders WHERE customer_id = $1 AND status <> $2;
"""
CUSTOMERS_CSV = 'customer_id,status\n77,paid\n4242,"it\'s, \\ odd"\n9999,\n'  # 3 calls per pass
TOML = """[experiment]
name = "own-db"
rounds = 2
reference = { block_size = 8 }
[matrix]
postgres = "18"
block_size = [4, 8]
wal_block_size = 8
storage = { kind = "dir" }
dataset = { dump = "app.dump" }
workload = { driver = "queries", file = "queries.sql", passes = 2 }
duration = 300
"""


def _make_dump_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_dump", EXAMPLE / "make_dump.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_dump_and_queries_compared_across_page_sizes(  # type: ignore[no-untyped-def]
    paths: Paths, pg18_8k, pg18_4k, tmp_path: Path
) -> None:
    exp_dir = paths.home / "own-db"
    exp_dir.mkdir(parents=True)
    _make_dump_module().ensure(paths, exp_dir / "app.dump")
    queries = (EXAMPLE / "queries.sql").read_text() + FAILS_AT_4K
    (exp_dir / "queries.sql").write_text(queries)
    (exp_dir / "customers.csv").write_text(CUSTOMERS_CSV)
    (exp_dir / "customer_ids.csv").write_text((EXAMPLE / "customer_ids.csv").read_text())
    (exp_dir / "own-db.toml").write_text(TOML)
    results = tmp_path / "results"
    # the plan's room: estimated from the dump before it is restored, measured after
    plan = blocklab_wide("plan", str(exp_dir / "own-db.toml"), "--results", str(results))
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "estimated from the dump: 4 tables, 412,000 rows" in plan.stdout, plan.stdout
    run = blocklab_wide("run", str(exp_dir / "own-db.toml"), "--results", str(results), "-q")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    plan = blocklab_wide("plan", str(exp_dir / "own-db.toml"), "--results", str(results))
    assert "room (dir):" in plan.stdout and "measured when the dataset was restored (2 " in (
        " ".join(plan.stdout.split())
    ), plan.stdout
    # restored once per build (and storage): two snapshots, each with the dump's tables
    # this test's dump only: the session's work directory holds other tests' datasets
    metas = sorted((paths.work / "datasets").glob("*/meta.json"))
    dump_file = str((exp_dir / "app.dump").resolve())
    snaps = [
        m for m in metas if json.loads(m.read_text()).get("options", {}).get("dump") == dump_file
    ]
    assert len(snaps) == 2, [json.loads(m.read_text()).get("options") for m in metas]
    for meta in snaps:
        tables = {r["name"] for r in json.loads(meta.read_text())["relations"]}
        assert {"customers", "orders", "order_lines", "products"} <= tables, tables
    with ResultsDB(results, create=False) as db:
        runs = db.runs("own-db")
        assert [r["status"] for r in runs] == ["ok"] * 4, [r["reason"] for r in runs]
        labels = {v["variant_id"]: v["label"] for v in db.variants("own-db")}
        rows = db.run_queries("own-db")
        by_label: dict[str, set[str]] = {}
        for r in rows:
            by_label.setdefault(labels[r["variant_id"]], set()).add(r["query"])
            rows_of = {"by_customer": 3, "customer_orders": 5}  # the CSVs' rows (or 1 call)
            calls = 2 * rows_of.get(r["query"], 1)  # passes x calls per pass
            assert r["calls"] == calls and r["time_ms_mean"] > 0 and r["plan_fingerprint"]
        eight = {q for q in by_label["bs=8k"]}
        assert "fails_at_4k" in eight and "by_customer" in eight and len(eight) == 10
        assert by_label["bs=4k"] == eight - {"fails_at_4k"}
        for r in runs:
            prov = json.loads(r["provenance_json"])
            failed = prov["queries_report"]["failed_queries"]
            if labels[r["variant_id"]] == "bs=4k":
                assert (
                    list(failed) == ["fails_at_4k"] and "division by zero" in failed["fails_at_4k"]
                )
            else:
                assert failed == {}
            assert prov["driver_role"] == "blocklab_workload"
            metrics = db.metrics(r["id"])
            assert metrics["full_count_shared_hit_bytes"] is not None
    summary = blocklab_wide("summary", "--results", str(results), "--metric", "queries_per_hour")
    assert summary.returncode == 0, summary.stderr
    print(summary.stdout)
    assert "revenue_by_country" in summary.stdout and "point_lookup" in summary.stdout
    # the overall figure over the 9 statements both ran; fails_at_4k named as left out
    assert "Overall: geometric mean of the statements' server times over the 9 statement(s)" in (
        " ".join(summary.stdout.split())
    )
    assert "left out where a variant lacks it: fails_at_4k (rounds 1, 2)" in summary.stdout
    overall = summary.stdout.split("Overall: geometric mean", 1)[1].splitlines()
    vs = next(ln for ln in overall if ln.startswith("  bs=4k: "))
    change = r"[+-][\d.]+ % \([+-][\d.]+ to [+-][\d.]+\)"  # the summary's form
    assert re.search(rf"ms \[[\d.]+, [\d.]+\], vs bs=8k: {change}", vs), vs


SUPERUSER_ONLY = """
CREATE TABLE kept (id int PRIMARY KEY);
INSERT INTO kept SELECT generate_series(1, 1000);
CREATE EXTENSION pgstattuple;
CREATE FUNCTION c_function() RETURNS int LANGUAGE c AS '$libdir/pgstattuple', 'pgstattuple';
"""


def test_a_dump_the_workload_role_cannot_restore_leaves_no_dataset(  # type: ignore[no-untyped-def]
    paths: Paths, pg18_8k
) -> None:
    """A C function needs a superuser: pg_restore as the workload role stops at it
    (--exit-on-error), the error names the file and pg_restore's message, and no
    snapshot is left (the next attempt restores from scratch). The extension the dump
    creates is one the build has: created by blocklab's superuser role first."""
    from blocklab import experiment_file as spec
    from blocklab.execution.lab import Lab
    from blocklab.model import BuildRequest
    from blocklab.state import State
    from blocklab.workloads import dataset

    exp_dir = paths.home / "own-db-bad"
    exp_dir.mkdir(parents=True)
    sql = exp_dir / "bad.sql"
    sql.write_text(SUPERUSER_ONLY)
    exp_dir.chmod(0o755)
    _make_dump_module().make_dump(pg18_8k, paths, exp_dir / "app.dump", sql=sql)
    (exp_dir / "queries.sql").write_text("SELECT count(*) FROM kept;")
    (exp_dir / "bad.toml").write_text(TOML.replace("block_size = [4, 8]", "block_size = 8"))
    (v,) = spec.load(exp_dir / "bad.toml").variants()
    state = State(exp_dir / "state.json")
    installs = {BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8): pg18_8k}
    with Lab(paths, state, log=lambda _m: None, installations=installs,
             instrumentation=None) as lab:  # fmt: skip
        try:
            with pytest.raises(UserError) as e:
                lab.prepare(v)
        finally:
            lab.close()
    message = str(e.value)
    assert f"matrix.dataset.dump: {exp_dir / 'app.dump'}: pg_restore failed" in message
    assert "permission denied for language c" in message
    assert dataset.load(paths, v.dataset_key(pg18_8k.key)) is None
    assert state.entries() == []  # the server was stopped

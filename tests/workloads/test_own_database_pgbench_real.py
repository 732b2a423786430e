"""pgbench custom scripts on your own database (issue 32), on a real PostgreSQL 18 build:
the example's dump (examples/own-database/make_dump.py) restored as the dataset, and a
script of the user's that reads and writes its tables run by pgbench for a few seconds,
as the unprivileged workload role, with throughput and latency like any pgbench run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import blocklab_wide
from test_own_database_real import _make_dump_module

from blocklab.paths import Paths
from blocklab.store import ResultsDB

pytestmark = pytest.mark.build
SCRIPT = """\\set customer random(1, 10000)
\\set order random(1, 100000)
SELECT count(*) FROM orders WHERE customer_id = :customer;
UPDATE orders SET status = 'paid' WHERE id = :order;
"""
ALLOW = ("--allow", "scripts")  # a workload script is a trust class of its own
TOML = """[experiment]
name = "own-db-pgbench"
rounds = 1
[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
storage = { kind = "dir" }
dataset = { dump = "app.dump" }
workload = { scripts = ["orders.sql"] }
clients = 2
duration = 3
"""


def test_pgbench_scripts_run_against_the_restored_dump(  # type: ignore[no-untyped-def]
    paths: Paths, pg18_8k, tmp_path: Path
) -> None:
    exp_dir = paths.home / "own-db-pgbench"
    exp_dir.mkdir(parents=True)
    _make_dump_module().ensure(paths, exp_dir / "app.dump")
    (exp_dir / "orders.sql").write_text(SCRIPT)
    (exp_dir / "x.toml").write_text(TOML)
    results = tmp_path / "results"
    plan = blocklab_wide("plan", str(exp_dir / "x.toml"), "--results", str(results), *ALLOW)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "data pg_restore app.dump" in plan.stdout and "orders.sql" in plan.stdout
    run = blocklab_wide("run", str(exp_dir / "x.toml"), "--results", str(results), "-q", *ALLOW)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with ResultsDB(results, create=False) as db:
        (r,) = db.runs("own-db-pgbench")
        assert r["status"] == "ok", r["reason"]
        assert r["tps"] > 0 and r["latency_avg_ms"] > 0 and r["transactions"] > 0
        assert r["failed_transactions"] in (0, None)
        print(f"tps {r['tps']:.1f}, latency {r['latency_avg_ms']:.2f} ms, {r['transactions']} tx")
        prov = json.loads(r["provenance_json"])
        assert prov["driver_role"] == "blocklab_workload"
        argv = r["command"]  # pgbench -f orders.sql ... DBNAME: the restored database
        assert argv.endswith("/orders.sql -M prepared -c 2 -j 1 -T 3 postgres"), argv
    # the dataset is the dump's tables, restored once, not pgbench's
    metas = [json.loads(m.read_text()) for m in (paths.work / "datasets").glob("*/meta.json")]
    dump_file = str((exp_dir / "app.dump").resolve())
    (meta,) = [m for m in metas if m.get("options", {}).get("dump") == dump_file]
    tables = {x["name"] for x in meta["relations"] if x["kind"] == "table"}
    assert tables == {"customers", "orders", "order_lines", "products"}, tables

"""Record real sysbench and go-tpc outputs and EXPLAIN plans for the parser tests
(run as root from the repo root after `make setup`):

    .venv/bin/python tests/data/record_drivers.py /var/lib/blocklab/cache/builds/<pg18 8k build>

One PostgreSQL server (listening only on a private unix socket) serves every run. Writes
NAME.{argv,stdout,stderr,exitcode} under tests/data/sysbench/ and tests/data/go-tpc/, and
EXPLAIN (FORMAT JSON) plans of go-tpc's TPC-H-like queries under tests/data/plans/.
See the README.md files there for what each recording is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import psycopg

from blocklab import proc
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State
from blocklab.workloads import tools

DATA = Path(__file__).parent
BASE = Path("/var/tmp/blocklab-record-drivers")
SYSBENCH_SIZE = ["--tables=2", "--table-size=1000"]
TPCH_SF = "0.01"


def main() -> None:
    inst = Installation.from_manifest(Path(sys.argv[1]))
    shutil.rmtree(BASE, ignore_errors=True)
    c = Cluster(
        inst,
        BASE / "data",
        socket_dir=BASE / "sock",
        user=server_user(),
        state=State(BASE / "state.json"),
        log_path=BASE / "server.log",
    )
    fresh_server(c, first=True)
    try:
        record_sysbench(c)
        record_tpcc(c)
        record_tpch(c)
    finally:
        c.kill()
        shutil.rmtree(BASE, ignore_errors=True)


def fresh_server(c: Cluster, first: bool = False) -> None:
    if not first:
        c.kill()
        c.remove_data()
    c.initdb(data_checksums=False)
    c.write_settings({})
    c.start()
    c.psql("CREATE DATABASE sbtest; CREATE DATABASE tpcc; CREATE DATABASE tpch;")


def sysbench_argv(c: Cluster, test: str, *extra: str) -> list[str]:
    conn = [
        "--db-driver=pgsql",
        f"--pgsql-host={c.socket_dir}",
        f"--pgsql-port={c.port}",
        f"--pgsql-user={c.user.name}",
        "--pgsql-db=sbtest",
    ]
    return ["sysbench", test, *conn, *SYSBENCH_SIZE, *extra]


def go_tpc_argv(c: Cluster, workload: str, db: str, *extra: str) -> list[str]:
    go_tpc = str(tools.tools_bin() / "go-tpc")
    conn = ["-d", "postgres", "-H", '""', "-P", str(c.port), "-U", c.user.name, "-D", db]
    conn += ["--conn-params", f"host={c.socket_dir}&sslmode=disable"]
    return [go_tpc, workload, *conn, *extra]


def record_sysbench(c: Cluster) -> None:
    out = DATA / "sysbench"
    record(out, "oltp_read_write-prepare", sysbench_argv(c, "oltp_read_write", "prepare"))
    run = ["--threads=2", "--report-interval=1"]
    record(out, "oltp_read_write", sysbench_argv(c, "oltp_read_write", *run, "--time=4", "run"))
    record(out, "oltp_write_only", sysbench_argv(c, "oltp_write_only", *run, "--time=3", "run"))
    killed = sysbench_argv(c, "oltp_read_write", *run, "--time=10", "run")
    record(out, "oltp_read_write-killed", killed, kill=c, after_s=3.5)
    fresh_server(c)


def record_tpcc(c: Cluster) -> None:
    out = DATA / "go-tpc"
    wh = ["--warehouses", "1"]
    record(out, "tpcc-prepare", go_tpc_argv(c, "tpcc", "tpcc", *wh, "-T", "2", "prepare"))
    run = [*wh, "-T", "2", "--interval", "1s", "run"]
    record(out, "tpcc", go_tpc_argv(c, "tpcc", "tpcc", *run, "--time", "5s"))
    killed = go_tpc_argv(c, "tpcc", "tpcc", *run, "--time", "10s")
    record(out, "tpcc-killed", killed, kill=c, after_s=3.5)
    fresh_server(c)


def record_tpch(c: Cluster) -> None:
    out = DATA / "go-tpc"
    load_tpch(c)
    run = ["--sf", "1", "-T", "1", "--interval", "1s", "run"]
    record(out, "tpch", go_tpc_argv(c, "tpch", "tpch", *run, "--count", "22"))
    capture_plans(c)
    killed = go_tpc_argv(c, "tpch", "tpch", *run, "--count", "0", "--time", "10s")
    record(out, "tpch-killed", killed, kill=c, after_s=2.5)


def load_tpch(c: Cluster) -> None:
    gen = BASE / "tpch-data"
    tpchgen = Path(sys.executable).parent / "tpchgen-cli"
    proc.run([tpchgen, "csv", "-s", TPCH_SF, "-o", gen])
    schema = Path(tools.__file__).parent / "sql" / "tpch_schema.sql"
    with psycopg.connect(c.conninfo.replace("dbname=postgres", "dbname=tpch")) as conn:
        conn.execute(schema.read_text())
        for table in ("nation", "region", "part", "supplier", "partsupp", "customer"):
            copy_csv(conn, table, gen / f"{table}.csv")
        for table in ("orders", "lineitem"):
            copy_csv(conn, table, gen / f"{table}.csv")
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def copy_csv(conn: psycopg.Connection, table: str, path: Path) -> None:
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") as copy:
        copy.write(path.read_bytes())


def go_tpc_queries() -> dict[str, str]:
    """go-tpc's PostgreSQL TPC-H-like queries, read from its pinned module source."""
    gomodcache = proc.run(["/usr/local/go/bin/go", "env", "GOMODCACHE"]).stdout.strip()
    src = Path(gomodcache) / f"github.com/pingcap/go-tpc@{tools.GO_TPC_VERSION}/tpch/query.go"
    found = re.findall(r"\bq(\d+)pg = `(.*?)`", src.read_text(), re.DOTALL)
    return {f"q{n}": text.replace("/*PLACEHOLDER*/", "") for n, text in found}


PLAN_SETTINGS = {
    "default": {},
    "hashjoin-off": {"enable_hashjoin": "off"},
    "seq-page-cost-1.5": {"seq_page_cost": "1.5"},
}


def capture_plans(c: Cluster) -> None:
    queries = go_tpc_queries()
    out = DATA / "plans"
    out.mkdir(exist_ok=True)
    for name, settings in PLAN_SETTINGS.items():
        plans = {}
        with psycopg.connect(c.conninfo.replace("dbname=postgres", "dbname=tpch")) as conn:
            conn.autocommit = True
            for key, value in settings.items():
                conn.execute(f"SET {key} = {value}")
            for q, text in sorted(queries.items(), key=lambda kv: int(kv[0][1:])):
                row = conn.execute(f"EXPLAIN (FORMAT JSON) {text}").fetchone()
                assert row is not None
                plans[q] = row[0]
        doc = {"settings": settings, "server_version": c.version_num(), "plans": plans}
        (out / f"tpch-sf{TPCH_SF}-{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


def record(out: Path, name: str, argv: list[str], kill: Cluster | None = None, after_s=0.0):
    out.mkdir(exist_ok=True)
    stem = out / name
    paths = {s: Path(f"{stem}.{s}") for s in ("stdout", "stderr")}
    for p in paths.values():
        p.unlink(missing_ok=True)
    p = proc.spawn(argv, stdout_path=paths["stdout"], stderr_path=paths["stderr"])
    if kill is not None:
        time.sleep(after_s)
        assert kill.pid is not None
        os.kill(kill.pid, signal.SIGKILL)
    code = p.wait()
    Path(f"{stem}.exitcode").write_text(f"{code}\n")
    shown = " ".join(argv).replace(str(BASE), "/var/tmp/x").replace(str(tools.tools_bin()), "")
    Path(f"{stem}.argv").write_text(shown.lstrip("/") + "\n")
    print(name, code, flush=True)


if __name__ == "__main__":
    main()

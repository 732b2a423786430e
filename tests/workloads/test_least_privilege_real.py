"""The workload role and the TPC-H-like plan pass against a real server (Debian's
PostgreSQL 15): what a hostile script's SQL or a hostile log_line_prefix can do.

- The workload role owns the database and its tables but is no superuser: COPY ... TO
  PROGRAM, pg_read_file and LOAD are refused to it.
- A log_line_prefix holding a newline and `\\! touch CANARY` puts that line inside the
  statements the plan pass reads back from the server log; they go through psycopg (one
  statement, no meta-command), never psql: the pass fails and no canary appears."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from helpers import running_cluster

from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster
from blocklab.postgres.installation import Installation
from blocklab.workloads import dataset, role, tpch, tpch_log
from blocklab.workloads.base import endpoint, run_endpoint
from blocklab.workloads.pgbench_driver import PgbenchDriver


def _as_role(c: Cluster, options: str = "") -> psycopg.Connection[tuple[object, ...]]:
    ep = endpoint(c)
    return psycopg.connect(
        host=ep.socket_dir, port=ep.port, user=ep.user, dbname=ep.dbname, autocommit=True,
        options=options,
    )  # fmt: skip


def test_the_workload_role_owns_its_database_but_is_no_superuser(
    paths: Paths, pg15_system: Installation
) -> None:
    canary = Path("/tmp") / f"blocklab-canary-{uuid.uuid4().hex[:8]}"
    with running_cluster(paths, pg15_system, "role", {}) as c:
        c.psql("CREATE TABLE loaded (a int); CREATE TABLE serial_t (id serial)")
        for _ in range(2):  # idempotent: after the load, then before every run
            dataset.hand_over(c, PgbenchDriver())
        owners = c.psql(
            "SELECT string_agg(DISTINCT pg_get_userbyid(relowner), ',') FROM pg_class"
            " WHERE relname IN ('loaded', 'serial_t', 'serial_t_id_seq')"
        )
        assert owners.strip() == role.ROLE
        assert c.psql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = "
                      "current_database()").strip() == role.ROLE  # fmt: skip
        assert c.psql(f"SELECT rolsuper FROM pg_roles WHERE rolname = '{role.ROLE}'").strip() == "f"
        assert run_endpoint(c, PgbenchDriver()).user == role.ROLE
        with _as_role(c) as conn:
            conn.execute("INSERT INTO loaded VALUES (1)")  # its own tables: yes
            conn.execute("SET log_min_duration_statement = 0")  # granted on 15+
            for sql in (
                f"COPY (SELECT 1) TO PROGRAM 'touch {canary}'",
                "SELECT pg_read_file('/etc/hostname')",
                "LOAD 'auto_explain'",
                "CREATE ROLE intruder SUPERUSER",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql.encode())
    assert not canary.exists()


def _injected_prefix(canary: Path) -> str:
    """log_line_prefix = '\\n\\\\! touch CANARY\\n%n [%p] ' as postgresql.conf spells it:
    each log entry then starts with a line `\\! touch CANARY`."""
    return "'\\n\\\\! touch " + str(canary) + "\\n%n [%p] '"


def test_a_log_line_prefix_injection_reaches_no_shell(
    paths: Paths, pg15_system: Installation
) -> None:
    canary = Path("/tmp") / f"blocklab-canary-{uuid.uuid4().hex[:8]}"
    settings = {"log_line_prefix": _injected_prefix(canary)}
    with running_cluster(paths, pg15_system, "tpch-log", settings) as c:
        dataset.hand_over(c, tpch.TpchDriver())
        offset = c.log_path.stat().st_size
        with _as_role(c, "-c log_min_duration_statement=0") as conn:  # as go-tpc's sessions
            for n in range(3):
                conn.execute(f"SELECT {n} AS q".encode())
        log_text = c.log_path.read_bytes()[offset:].decode()
        found = tpch_log.statements(log_text)
        assert [s.text.splitlines()[0] for s in found][:2] == ["SELECT 0 AS q", "SELECT 1 AS q"]
        assert f"\\! touch {canary}" in found[0].text  # the injected line is in the text
        with pytest.raises(tpch.PlanPassError, match="cannot be explained"):
            tpch.explain_all(c, [s.text for s in found])
        opts = tpch.RunOptions(tuple(f"q{i + 1}" for i in range(len(found))), 1)
        with pytest.raises(tpch.PlanPassError, match="cannot be explained"):  # the whole pass
            tpch.plan_pass(c, opts, log_text, paths.home)
        plans = tpch.explain_all(c, ["SELECT 1 AS q", "SELECT relname FROM pg_class;"])
        assert [p[0]["Plan"]["Node Type"] for p in plans] == ["Result", "Seq Scan"]
        with pytest.raises(tpch.PlanPassError):  # one statement each, never two
            tpch.explain_all(c, [f"SELECT 1; COPY (SELECT 1) TO PROGRAM 'touch {canary}'"])
    assert not canary.exists()

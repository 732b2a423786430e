"""A statement's parameters from a CSV (blocklab.workloads.queries_params, issue 32): the
file's checks at plan time (UserError naming the file, the line and the statement), the
SQL literal checked against a real server's reading of it (Debian's PostgreSQL 15, the
results store's test server), psql's argv, and the per-row times of a run's output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import psycopg
import pytest

from blocklab import proc
from blocklab.errors import UserError
from blocklab.postgres.cluster import Cluster
from blocklab.workloads import queries, queries_params, queries_psql, statements, tpch
from blocklab.workloads.base import Endpoint

NASTY = ["it's", "back\\slash", "\\'; DROP TABLE x; --", "$$ $1 :x :'y' %s {}", "", "ünï 𝄞",
         "line\nbreak", "\\\\", "'", "E'x'", " lead and trail "]  # fmt: skip
QUERIES = """-- name: by_customer
-- params: customers.csv
SELECT count(*) FROM orders WHERE customer_id = $1 AND note <> $2;
-- name: plain
SELECT 1;
"""


def _files(tmp_path: Path, csv_text: str, queries_sql: str = QUERIES) -> str:
    (tmp_path / "customers.csv").write_text(csv_text)
    (tmp_path / "queries.sql").write_text(queries_sql)
    return str(tmp_path / "queries.sql")


def test_a_csv_gives_one_call_per_row(tmp_path: Path) -> None:
    file = _files(tmp_path, 'customer_id,note\n77,"a, b"\n78,"it\'s ""q"""\n')
    stmts, params = queries.read_statements(file, "matrix.workload.file")
    assert [s.name for s in stmts] == ["by_customer", "plain"] and list(params) == ["by_customer"]
    p = params["by_customer"]
    assert p.columns == ("customer_id", "note") and p.rows == (("77", "a, b"), ("78", 'it\'s "q"'))
    assert queries_params.execute_sql(stmts[0], p.rows[1]) == (
        """EXECUTE "blocklab_by_customer"('78', 'it''s "q"')"""
    )


@pytest.mark.parametrize(
    ("csv_text", "queries_sql", "message"),
    [
        ("id,note\n77\n", QUERIES, r"params customers.csv, line 2: 1 column\(s\); allowed: 2"),
        ("id\n77\n", QUERIES, r"line 1: 1 column\(s\); allowed: 2 \(the statement's \$1..\$2\)"),
        ("id,note\n", QUERIES, "no row of values"),
        ("", QUERIES.replace("customers.csv", "missing.csv"), "params missing.csv: No such file"),
        ("", QUERIES.replace("customers.csv", "../x.csv"), "outside the queries file's dir"),
        ("", "SELECT $1;", r"'q1' uses \$1 but has no `-- params"),
        ("a\n1\n", "-- params: customers.csv\nSELECT 1;", r"has no \$1"),
        ("", "-- params: a.csv\n-- params: b.csv\nSELECT $1;", "bad params line"),
    ],
)
def test_bad_params_are_refused_at_plan_time_naming_file_line_and_statement(
    tmp_path: Path, csv_text: str, queries_sql: str, message: str
) -> None:
    file = _files(tmp_path, csv_text, queries_sql)
    with pytest.raises(UserError, match=message) as e:
        queries.read_keys({"file": file}, "matrix.workload")
    assert str(e.value).startswith(f"matrix.workload.file ({file}): statement ") or (
        "bad params line" in str(e.value)
    )


def test_placeholders_outside_quotes_and_identifiers_only() -> None:
    assert queries_params.placeholders("SELECT $2, '$9', a$7, $$ $5 $$, \"$8\" -- $6") == 2
    assert queries_params.placeholders("SELECT $1 + $12") == 12


def test_literals_are_read_back_by_a_real_server_as_the_same_text(pg_server: Cluster) -> None:
    """The oracle: the server's own reading of the literal, with standard_conforming_strings
    on (the default) and off."""
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        for scs in ("on", "off"):
            conn.execute(f"SET standard_conforming_strings = {scs}")
            for value in NASTY:
                got = conn.execute("SELECT " + queries_params.literal(value)).fetchone()
                assert got is not None and got[0] == value, (scs, value)
    with pytest.raises(ValueError, match="NUL"):
        queries_params.literal("a\0b")


def test_psqls_argv_runs_each_row_with_its_values_on_a_real_server(pg_server: Cluster) -> None:
    """Each row's value reaches the server intact through psql -c and EXECUTE: the statement
    divides by zero unless md5($1) is the md5 Python computed of the value."""
    rows = tuple((v, hashlib.md5(v.encode()).hexdigest()) for v in NASTY)
    stmt = statements.Statement("nasty", "SELECT 1 / (md5($1::text) = $2)::int AS ok")
    params = {"nasty": queries_params.Params("v.csv", ("v", "md5"), rows)}
    ep = Endpoint(str(pg_server.socket_dir), pg_server.port, pg_server.user.name)
    argv = queries_psql.argv(str(pg_server.inst.bin("psql")), ep, [stmt], 2, 0, params)
    res = proc.run(argv, user=pg_server.user, cwd="/", check=False, timeout_s=60)
    doc = queries_psql.document(res.stdout, res.stderr)
    assert doc["failed"] == {}, res.stderr
    (q,) = doc["queries"]
    assert len(q["durations_ms"]) == 2 * len(NASTY)
    assert sorted(q["params_rows_ms"]) == list(range(1, len(NASTY) + 1))
    assert all(len(v) == 2 for v in q["params_rows_ms"].values())  # one per pass
    # the oracle of the mismatch: a wrong md5 is a division by zero, named with its row
    bad = {"nasty": queries_params.Params("v.csv", ("v", "md5"), (("x", "0" * 32),))}
    argv = queries_psql.argv(str(pg_server.inst.bin("psql")), ep, [stmt], 1, 0, bad)
    res = proc.run(argv, user=pg_server.user, cwd="/", check=False, timeout_s=60)
    failed = queries_psql.document(res.stdout, res.stderr)["failed"]
    assert failed == {"nasty": "pass 1, params row 1: ERROR:  division by zero"}


def test_the_argv_prepares_once_per_pass_and_shows_the_rows() -> None:
    stmts = statements.read("-- name: a\nSELECT $1::int;\n-- name: b\nSELECT 2", "k")
    params = {"a": queries_params.Params("a.csv", ("x",), (("1",), ("2",), ("3",)))}
    argv = queries_psql.argv("/b/psql", Endpoint("/s", 5432, "u"), stmts, 2, 1000, params)
    commands = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert commands.count('PREPARE "blocklab_a" AS SELECT $1::int') == 2
    assert commands.count('DEALLOCATE "blocklab_a"') == 2
    assert commands.count("SET plan_cache_mode = force_custom_plan") == 1
    executes = [c for c in commands if "EXECUTE" in c]
    assert executes == [queries_psql.EXPLAIN + f"EXECUTE \"blocklab_a\"('{i}')" for i in "123"] * 2
    assert {c.split()[0] for c in commands if c.startswith("\\")} == {"\\echo", "\\warn"}
    assert commands.count("SET LOCAL statement_timeout = 1000") == 2 * (3 + 1)
    shown = queries_psql.shown(argv)
    assert "2 pass(es) of 2 statement(s) (a, b)" in shown and "a: once per row" in shown
    big = {"a": queries_params.Params("a.csv", ("x",), (("1",),) * 10)}
    assert queries_psql.argv_bytes(stmts, 2, big) > queries_psql.argv_bytes(stmts, 2, params)


def test_the_statements_time_is_the_mean_over_rows_and_passes() -> None:
    def plan(ms: float) -> str:
        return json.dumps([{"Plan": {"Node Type": "Result"}, "Planning Time": 0.0,
                            "Execution Time": ms}])  # fmt: skip

    m = queries_psql.MARKER
    out = "8192\n" + "".join(
        f"{m} a {p} {r}\n{plan(ms)}\n" for p, r, ms in [(1, 1, 1.0), (1, 2, 3.0), (2, 1, 2.0),
                                                        (2, 2, 6.0)]
    )  # fmt: skip
    doc = queries_psql.document(out, "")
    (q,) = doc["queries"]
    assert q["params_rows_ms"] == {1: [1.0, 2.0], 2: [3.0, 6.0]}
    (row,) = tpch.query_records(doc)
    assert row.time_ms_mean == pytest.approx(3.0) and row.calls == 4  # (1 + 3 + 2 + 6) / 4


def test_blocklab_plan_exits_2_on_a_csv_with_a_wrong_column_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_own_database import TOML, _experiment

    from blocklab.cli import main

    path = _experiment(tmp_path, TOML, QUERIES)
    (tmp_path / "customers.csv").write_text("customer_id,note\n77,a\n78\n")
    assert main(["plan", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "statement 'by_customer': params customers.csv, line 3: 1 column(s); allowed: 2" in err

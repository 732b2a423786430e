"""Your own database (issue 32) without a server: the queries file's statements, the
dump's checks, psql's argv and its recorded output (tests/data/queries_psql: a real run
on a 4 kB build, trimmed to three statements), and the experiment file's keys."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.experiment_file import trust
from blocklab.workloads import dump, queries, queries_psql, statements
from blocklab.workloads.base import Endpoint

DATA = Path(__file__).parents[1] / "data" / "queries_psql"
TOML = """[experiment]
name = "own"
rounds = 2
reference = { block_size = 8 }
[matrix]
block_size = [4, 8]
dataset = { dump = "app.dump" }
workload = { driver = "queries", file = "queries.sql", passes = 3 }
"""


def test_statements_split_on_semicolons_outside_quotes_comments_and_dollar_quotes() -> None:
    text = """-- name: a
SELECT ';' AS x, 'it''s;' AS y;  -- trailing; comment
/* a; block */ SELECT $$;$$, $tag$ ; $tag$;
-- name: c-3
SELECT "we;ird" FROM t;
-- only a comment;
"""
    got = statements.read(text, "k")
    assert [s.name for s in got] == ["a", "q2", "c-3"]
    assert got[0].text == "SELECT ';' AS x, 'it''s;' AS y"
    assert got[1].text.endswith("SELECT $$;$$, $tag$ ; $tag$")
    assert got[2].text == 'SELECT "we;ird" FROM t'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1;\n\\! id\n", "backslash outside quotes"),
        ("SELECT 1 \\gexec", "backslash"),
        ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;", "given twice"),
        ("-- name: a b\nSELECT 1;", "bad name"),
        ("-- nothing\n;;", "no statement"),
    ],
)
def test_bad_queries_files_are_refused_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        statements.read(text, "matrix.workload.file")
    assert "matrix.workload.file" in str(e.value)


def test_a_dump_is_checked_and_hashed_by_content(tmp_path: Path) -> None:
    a, b = tmp_path / "a.dump", tmp_path / "b.dump"
    a.write_bytes(b"PGDMP\x01\x10rest")
    b.write_bytes(a.read_bytes())
    assert dump.inspect(a, "k") == dump.inspect(b, "k")  # the name is not the identity
    assert dump.inspect(a, "k")[0] == "custom"
    b.write_bytes(b"PGDMP\x01\x10resT")
    assert dump.inspect(a, "k")[1] != dump.inspect(b, "k")[1]
    d = tmp_path / "dir"
    d.mkdir()
    (d / "toc.dat").write_bytes(b"PGDMP...")
    (d / "3001.dat.gz").write_bytes(b"x")
    assert dump.inspect(d, "k")[0] == "directory"


def test_plain_tar_missing_and_odd_dumps_are_refused_naming_the_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sql"
    plain.write_text("--\n-- PostgreSQL database dump\n--\n\\! id\nCREATE TABLE t ();\n")
    with pytest.raises(UserError, match=r"k: .*plain.sql is not a pg_dump archive.*plain SQL"):
        dump.inspect(plain, "k")
    tar = tmp_path / "x.tar"
    with tarfile.open(tar, "w") as t:
        t.add(plain, arcname="toc.dat")
    with pytest.raises(UserError, match="tar archive"):
        dump.inspect(tar, "k")
    with pytest.raises(UserError, match="nope.dump: No such file"):
        dump.inspect(tmp_path / "nope.dump", "k")
    with pytest.raises(UserError, match="neither a file nor a directory"):
        dump.inspect(Path("/dev/zero"), "k")  # never read: it has no end
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="without a pg_dump toc.dat"):
        dump.inspect(empty, "k")


def test_extensions_of_a_restore_listing() -> None:
    listing = (
        ";\n; Archive created at 2026-11-27\n;\n"
        "2; 3079 16385 EXTENSION - pg_trgm \n"
        "3; 0 0 COMMENT - EXTENSION pg_trgm \n"
        "4; 3079 16390 EXTENSION - hstore blocklab\n"
        "220; 1259 16400 TABLE public customers blocklab\n"
    )
    assert dump.extensions(listing) == ["pg_trgm"]  # an owner-less line only
    assert dump.missing_extensions(["pg_trgm", "postgis"], ["pg_trgm", "plpgsql"]) == ["postgis"]


def test_psql_argv_sends_each_statement_as_one_explain_string() -> None:
    stmts = statements.read("SELECT 1;\n-- name: two\nSELECT 2", "k")
    ep = Endpoint("/sock", 5432, "blocklab_workload")
    argv = queries_psql.argv("/b/psql", ep, stmts, passes=2, timeout_ms=5000)
    explains = [a for a in argv if a.startswith("EXPLAIN")]
    assert explains == [queries_psql.EXPLAIN + "SELECT 1", queries_psql.EXPLAIN + "SELECT 2"] * 2
    commands = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    # psql reads a -c string as a meta-command only when it begins with a backslash:
    # blocklab's markers only, never a statement
    assert {c.split()[0] for c in commands if c.startswith("\\")} == {"\\echo", "\\warn"}
    assert commands.count("SET LOCAL statement_timeout = 5000") == 4
    assert argv[argv.index("-U") + 1] == "blocklab_workload"
    assert "ON_ERROR_STOP=0" in argv


def test_a_real_runs_output_gives_times_bytes_plans_and_the_failure() -> None:
    out = (DATA / "bs4k.stdout").read_text()
    err = (DATA / "bs4k.stderr").read_text()
    doc = queries_psql.document(out, err)
    assert doc["block_size_bytes"] == 4096
    assert doc["failed"] == {"fails_at_4k": "ERROR:  division by zero"}
    by = {q["query"]: q for q in doc["queries"]}
    assert list(by) == ["point_lookup", "full_count"]
    # the oracle: the plans' own numbers, read here with json, not the parser's regexes
    plans = _plans(out)
    times = [p[0]["Planning Time"] + p[0]["Execution Time"] for p in plans]
    assert by["point_lookup"]["durations_ms"] == pytest.approx([times[0], times[2]])
    assert by["full_count"]["durations_ms"] == pytest.approx([times[1], times[3]])
    hit = plans[3][0]["Plan"]["Shared Hit Blocks"] * 4096
    assert by["full_count"]["shared_hit_bytes"][1] == hit
    result = queries.parse(out, err)
    assert result.failed == 1 and result.errors == ("fails_at_4k: ERROR:  division by zero",)
    assert queries.verdict(0, result, server_alive=True) == ""
    assert "no statement ran" in queries.verdict(0, queries.parse("4096\n", ""), server_alive=True)
    assert "exited with code 2" in queries.verdict(2, result, server_alive=True)


def _plans(out: str) -> list[object]:
    chunks = out.split("@@blocklab-statement ")[1:]
    return [json.loads(c.split("\n", 1)[1]) for c in chunks if c.split("\n", 1)[1].strip()]


def _experiment(tmp_path: Path, toml: str = TOML, queries_sql: str = "SELECT 1;") -> Path:
    (tmp_path / "app.dump").write_bytes(b"PGDMP\x01\x10 a tiny stand-in")
    (tmp_path / "queries.sql").write_text(queries_sql)
    (tmp_path / "own.toml").write_text(toml)
    return tmp_path / "own.toml"


def test_the_experiment_file_reads_a_dump_and_queries(tmp_path: Path) -> None:
    path = _experiment(tmp_path)
    variants = spec.load(path).variants()
    assert [v.label for v in variants] == ["bs=4k", "bs=8k"]
    v = variants[0]
    assert v.dataset.driver == "queries" and v.workload.driver == "queries"
    assert v.dataset.option("dump") == str(tmp_path / "app.dump")
    sha = dump.inspect(tmp_path / "app.dump", "k")[1]
    assert v.dataset.option("dump_sha256") == sha
    assert dict(v.workload.options) == {"file": str(tmp_path / "queries.sql"), "passes": 3,
                                        "timeout": 0}  # fmt: skip
    key = v.dataset_key("build")
    (tmp_path / "app.dump").write_bytes(b"PGDMP another content")
    assert spec.load(path).variants()[0].dataset_key("build") != key  # restored again
    assert trust.refused(spec.load(path), frozenset(), tmp_path) == []  # files beside it


def test_pgbench_scripts_run_on_the_restored_dump(tmp_path: Path) -> None:
    """The dump is restored by the queries driver's load; pgbench runs the user's script
    (tests/workloads/test_own_database_pgbench_real.py runs one)."""
    (tmp_path / "mine.sql").write_text("SELECT 1;\n")
    toml = TOML.replace('{ driver = "queries", file = "queries.sql", passes = 3 }',
                        '{ scripts = ["mine.sql"] }')  # fmt: skip
    v = spec.load(_experiment(tmp_path, toml)).variants()[0]
    assert v.dataset.driver == "queries" and v.workload.driver == "pgbench"
    assert v.workload.scripts == (str(tmp_path / "mine.sql"),)
    assert v.dataset.option("dump") == str(tmp_path / "app.dump")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('dataset = { dump = "app.dump" }\n', "", "matrix.workload.driver: the queries driver"),
        ('workload = { driver = "queries", file = "queries.sql", passes = 3 }\n',
         'workload = "select-only"\n', "matrix.dataset: a dump is restored for the queries"),
        ('workload = { driver = "queries", file = "queries.sql", passes = 3 }\n',
         'workload = { driver = "sysbench", test = "oltp_read_only" }\n',
         "matrix.dataset: a dump is restored for the queries driver and pgbench custom"),
        ('"app.dump"', '"queries.sql"', "matrix.dataset.dump: .*queries.sql is not a pg_dump"),
        ('"app.dump"', '"gone.dump"',
         "matrix.dataset.dump: dump .*gone.dump.* does not exist: make it first with pg_dump -Fc"),
        ("passes = 3", "passes = 0", "passes: 0 is not a whole number from 1 to 100"),
        ("passes = 3", "passes = 3, scale = 2", "unknown key; allowed: file, passes, timeout"),
        ('file = "queries.sql"', 'file = "nope.sql"', "matrix.workload.file: .*does not exist"),
    ],
)  # fmt: skip
def test_bad_keys_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    path = _experiment(tmp_path, TOML.replace(old, new))
    with pytest.raises(UserError, match=message):
        spec.load(path)
    assert main(["plan", str(path)]) == 2
    assert "error" in capsys.readouterr().err


def test_a_missing_dump_beside_its_script_names_the_script(tmp_path: Path) -> None:
    """The shipped example's dump is made, not kept in git: its error says how."""
    path = _experiment(tmp_path, TOML.replace('"app.dump"', '"example/app.dump"'))
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "make_dump.py").write_text("")
    with pytest.raises(UserError, match=r"make it first with sudo .*example/make_dump\.py"):
        spec.load(path)


def test_a_dump_or_queries_outside_the_experiments_directory_needs_allow_paths(
    tmp_path: Path,
) -> None:
    inner = tmp_path / "exp"
    inner.mkdir()
    _experiment(tmp_path)  # app.dump and queries.sql one level up
    toml = TOML.replace('"app.dump"', '"../app.dump"').replace('"queries.sql"', '"../queries.sql"')
    (inner / "own.toml").write_text(toml)
    exp = spec.load(inner / "own.toml")
    keys = {r.key: r.cls for r in trust.refused(exp, frozenset(), inner)}
    assert keys == {"matrix.dataset.dump": "paths", "matrix.workload.file": "paths"}
    assert trust.refused(exp, frozenset({"paths"}), inner) == []

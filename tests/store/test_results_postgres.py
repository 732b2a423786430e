"""The results store on PostgreSQL (a real server: Debian's postgresql-15, private unix
socket, run as the unprivileged server user) against the same contract as SQLite: runs,
uniqueness, device profiles, migrations from version 1, `blocklab export --to` and
`summary` over the same stored runs, and the password kept out of output and children."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_results import SECRET, _pwuser_uris, _register, _run, _uri  # noqa: F401
from report_fixture import write_synthetic_results

from blocklab import proc
from blocklab.errors import UserError
from blocklab.postgres.cluster import Cluster
from blocklab.postgres.installation import Installation
from blocklab.store import SCHEMA_VERSION, ResultsDB, ResultsStore, RunRecord
from blocklab.store.base import DevicePoint, DeviceProfileHead, RunsKept
from blocklab.store.factory import open_store
from blocklab.store.postgres import pg_ddl
from blocklab.store.sqlite import MIGRATIONS
from blocklab.store.uri import parse_pg

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_store_contract(store: ResultsStore) -> None:
    _register(store)
    _register(store)  # the same definition again: accepted, no duplicate
    store.record_round("e1", 1, 3, ["b", "a"])
    store.record_round("e1", 1, 3, ["b", "a"])
    rid = store.record_run(_run("a", 1))
    store.record_run(_run("b", 1, None))
    with pytest.raises(Exception, match="(?i)unique"):
        store.record_run(_run("a", 1))  # (experiment, variant, round) is unique
    assert [r["variant_id"] for r in store.variants("e1")] == ["a", "b"]
    assert len(store.rounds("e1")) == 1
    assert store.run_keys("e1") == {("a", 1, 0), ("b", 1, 0)}
    run = store.run(rid)
    assert (run["tps"], run["transactions"], run["status"]) == (1234.5, 2**40, "ok")
    assert json.loads(run["settings_json"]) == {"shared_buffers": ["16384", "8kB"]}
    assert store.runs("e1", "b")[0]["tps"] is None
    assert store.metrics(rid) == {"wal_bytes_per_xact": 0.1 + 0.2, "missing": None}
    assert store.series(rid) == {"tps": [(0.0, 1.5), (1.0, None)]}
    assert store.checkpoints(rid)[0]["bytes_written"] == 2**35
    assert store.metric_names("e1") == ["missing", "wal_bytes_per_xact"]
    store.set_experiment_state("e1", "done", "rounds done")
    assert store.experiment("e1")["state"] == "done"
    with pytest.raises(UserError, match="already exists"):
        store.upsert_experiment(
            "e1", description="", spec={"other": 1}, seed=3, reference=None,
            created_at="x", host={}, variants=[],
        )  # fmt: skip


def test_device_profile_contract(store: ResultsStore) -> None:
    head = DeviceProfileHead(
        "p", "2026-11-23T10:00:00Z", {"kind": "dir"}, {}, "fio-3", "libaio", 1.0, 2**30
    )
    pid = store.create_device_profile(head)
    values = {"iops": 100.0}
    for status in ("ok", "failed"):  # the same point again replaces it
        store.record_device_point(
            pid, DevicePoint("randread", 4096, 1, status, "", values, "fio", "{}")
        )
    store.record_device_point(pid, DevicePoint("randread", 8192, 1, "ok", "", values, "fio", "{}"))
    (row,) = store.device_profiles()
    assert (row["points"], row["failed_points"]) == (2, 1)
    pid2 = store.create_device_profile(head)  # replaces the stored one
    assert store.device_points(pid2) == []
    assert store.device_profile_exists("p") and not store.device_profile_exists("q")


def _v1_sqlite(directory: Path) -> None:
    import sqlite3

    directory.mkdir(parents=True)
    conn = sqlite3.connect(directory / "blocklab.sqlite")
    conn.executescript(resources.files("blocklab.store").joinpath("schema.sql").read_text())
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.execute(
        "INSERT INTO experiments (name, spec_json, seed, created_at) VALUES ('old','{}',1,'t')"
    )
    conn.execute(V1_RUN)
    conn.execute("INSERT INTO metrics VALUES (7, 'wal_bytes', 1024)")
    conn.executemany("INSERT INTO series VALUES (?,?,?,?)", V1_SERIES)
    conn.commit()
    conn.close()


# its per-second series as point rows (versions 1 to 6), stored out of order: the
# upgrade to version 7 packs them, NULL (not measured) kept as None
V1_SERIES = [
    (7, "tps", 2.0, 12.5), (7, "tps", 1.0, None), (7, "latency_ms", 1.0, 0.25),
    (7, "tps", 3.0, 13.0),
]  # fmt: skip
V1_SERIES_READ = {"latency_ms": [(1.0, 0.25)], "tps": [(1.0, None), (2.0, 12.5), (3.0, 13.0)]}

# a run as version 1 stored it (before host and copy_index)
V1_RUN = (
    "INSERT INTO runs (id, experiment, variant_id, round, position, status, started_at,"
    " ended_at, tps, provenance_json) VALUES (7, 'old', 'a', 1, 0, 'ok', 't0', 't1', 100.5,"
    """ '{"version": "15.1", "build_key": "k7", "dataset": {"key": "d", "n": 1}, "x": NaN}')"""
)


def _v1_postgres(uri: str) -> None:
    target = parse_pg(uri)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(pg_ddl("schema.sql").encode())  # as blocklab wrote version 1
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute(
            "INSERT INTO experiments (name, spec_json, seed, created_at) VALUES ('old','{}',1,'t')"
        )
        conn.execute(V1_RUN)
        conn.execute("INSERT INTO metrics VALUES (7, 'wal_bytes', 1024)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO series VALUES (%s,%s,%s,%s)", V1_SERIES)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_from_version_1(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        spec = str(tmp_path / "old")
        _v1_sqlite(tmp_path / "old")
    else:
        spec = request.getfixturevalue("pg_uri")
        _v1_postgres(spec)
    with open_store(spec, create=False) as db:
        assert [r["name"] for r in db.experiments()] == ["old"]  # data kept
        assert db.device_profiles() == []  # version 2's tables exist
        # version 3: the old run keeps its id, numbers and metrics, on host "" copy 0
        (run,) = db.runs("old")
        assert (run["id"], run["tps"], run["host"], run["copy_index"]) == (7, 100.5, "", 0)
        assert db.metrics(7) == {"wal_bytes": 1024}
        assert db.run_keys("old") == {("a", 1, 0)}
        # version 6: its provenance's facts kept (NaN elsewhere in it: json.dumps wrote it)
        db.read_ahead("old")
        (lean,) = db.runs("old")
        assert "provenance_json" not in lean and "settings_json" not in lean
        facts = {"version": "15.1", "build_key": "k7", "dataset": {"key": "d"}}
        assert json.loads(lean["facts_json"]) == facts
        # version 7: its series packed, read back as they were stored, names in order
        assert db.series(7) == V1_SERIES_READ and list(db.series(7)) == ["latency_ms", "tps"]
        assert dict(db.series_of_runs([7], names=["tps"])) == {7: {"tps": V1_SERIES_READ["tps"]}}
        # the identity is (experiment, host, variant, round, copy): other hosts and copies
        # of the same variant and round are new runs, the same key twice is refused
        db.record_run(replace(_run("a", 1), experiment="old", host="h2"))
        db.record_run(replace(_run("a", 1), experiment="old", copy_index=1))
        assert db.run_keys("old", "h2") == {("a", 1, 0)}
        assert db.run_keys("old") == {("a", 1, 0), ("a", 1, 1)}
        with pytest.raises(Exception, match="(?i)unique"):
            db.record_run(replace(_run("a", 1), experiment="old", host="h2"))
    with open_store(spec, create=False) as db:  # opening again changes nothing
        conn: Any = getattr(db, "conn")  # noqa: B009  (both back ends' connection)
        versions = [r["version"] for r in conn.execute("SELECT version FROM schema_version")]
        # the point rows' table is gone with its rows (version 7)
        tables = "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?"
        if backend == "sqlite":
            tables = "SELECT count(*) AS n FROM sqlite_master WHERE name = ?"
        assert [r["n"] for r in conn.execute(tables, ("series",))] == [0]
    assert versions == [1, *sorted(MIGRATIONS)] and max(versions) == SCHEMA_VERSION


def _blocklab(
    *args: str, env: dict[str, str] | None = None, timeout_s: int = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_export_to_postgres_twice_and_same_summary(tmp_path: Path, pg_uri: str) -> None:
    results = tmp_path / "results"
    write_synthetic_results(results, rounds=3, seconds=5)
    with ResultsDB(results) as db:
        n_runs = len(db.runs("synthetic-geometry"))
    first = _blocklab("export", "--results", str(results), "--to", pg_uri)
    assert first.returncode == 0, first.stderr
    assert f"copied {n_runs} runs, skipped 0" in first.stdout
    second = _blocklab("export", "--results", str(results), "--to", pg_uri)
    assert f"copied 0 runs, skipped {n_runs}" in second.stdout, second.stderr
    on_sqlite = _blocklab("summary", "--results", str(results), "--metric", "wal_bytes_per_xact")
    on_pg = _blocklab("summary", "--results", pg_uri, "--metric", "wal_bytes_per_xact")
    assert on_sqlite.returncode == on_pg.returncode == 0, on_pg.stderr
    assert "synthetic-geometry" in on_pg.stdout and on_sqlite.stdout == on_pg.stdout
    tps_sqlite = _blocklab("summary", "--results", str(results))
    tps_pg = _blocklab("summary", "--results", pg_uri)
    assert tps_sqlite.stdout == tps_pg.stdout
    with open_store(pg_uri) as db:  # the raw files are where the database says
        raw = db.runs("synthetic-geometry")[0]["raw_dir"]
        assert Path(raw).is_absolute() and Path(raw).is_dir()


def test_password_only_from_environment_and_never_shown(
    pg_server: Cluster, pg_uri: str, tmp_path: Path
) -> None:
    with_pw, no_pw = _pwuser_uris(pg_server, pg_uri)
    assert SECRET in with_pw
    refused = _blocklab("summary", env={"BLOCKLAB_RESULTS": no_pw, "PGPASSFILE": "/dev/null"})
    assert refused.returncode == 2 and "password" in refused.stderr  # the server asks for it
    argv = _blocklab("summary", "--results", with_pw)
    assert argv.returncode == 2 and "--results" in argv.stderr and "password" in argv.stderr
    assert SECRET not in argv.stdout + argv.stderr
    results = tmp_path / "results"
    write_synthetic_results(results, rounds=2, seconds=3)
    export = _blocklab(
        "export", "--results", str(results), "--to", no_pw, env={"PGPASSWORD": SECRET}
    )
    assert export.returncode == 0, export.stderr
    assert SECRET not in export.stdout + export.stderr
    env = {"BLOCKLAB_RESULTS": with_pw}
    for args in (("summary",), ("report", "--out", str(tmp_path / "site"))):
        r = _blocklab(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert SECRET not in r.stdout + r.stderr
    site = b"".join(p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file())
    assert SECRET.encode() not in site and b"postgresql: " in site
    os.environ["BLOCKLAB_RESULTS"], os.environ["PGPASSWORD"] = with_pw, SECRET
    try:  # a child of blocklab inherits neither
        out = proc.run(["env"], timeout_s=10).stdout
    finally:
        del os.environ["BLOCKLAB_RESULTS"], os.environ["PGPASSWORD"]
    assert SECRET not in out
    assert SECRET not in parse_pg(with_pw).conninfo + parse_pg(with_pw).display


@pytest.mark.parametrize(
    "uri,ok",
    [
        ("postgresql://u@db.example.org/r", False),
        ("postgresql://u@10.0.0.7:5432/r?sslmode=disable", False),
        ("postgresql://u@db.example.org/r?sslmode=require", True),
        ("postgresql://u@db.example.org/r?sslmode=verify-full", True),
        ("postgresql://u@127.0.0.1/r", True),
        ("postgresql://u@[::1]/r", True),
        ("postgresql:///r?host=/run/postgresql", True),
    ],
)
def test_remote_host_needs_tls(uri: str, ok: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BLOCKLAB_RESULTS_INSECURE", raising=False)
    if ok:
        parse_pg(uri)
    else:
        with pytest.raises(UserError, match="--results: host .* without TLS"):
            parse_pg(uri)
        monkeypatch.setenv("BLOCKLAB_RESULTS_INSECURE", "1")
        parse_pg(uri)


def test_remote_plain_tcp_refused_by_the_cli() -> None:
    r = _blocklab("summary", "--results", "postgresql://u@db.example.org/r")
    assert r.returncode == 2 and "--results-insecure" in r.stderr
    r = _blocklab("summary", "--results", "mysql://u@h/r")
    assert r.returncode == 2 and "--results" in r.stderr


@pytest.mark.build
@pytest.mark.root
def test_an_experiment_runs_into_postgres(
    pg_server: Cluster, pg_uri: str, tmp_path: Path, pg18_8k: Installation
) -> None:
    """A small experiment end to end into a password-protected PostgreSQL results
    database: every run stored, its raw files where runs.raw_dir says, the password
    nowhere. (The demo measures whole 30 s checkpoint cycles: test_make_demo runs it.)"""
    with_pw, no_pw = _pwuser_uris(pg_server, pg_uri)
    raw = tmp_path / "raw"
    env = {"BLOCKLAB_RESULTS": with_pw, "BLOCKLAB_RAW_DIR": str(raw)}
    small = ("--rounds", "1", "--scale", "1", "--duration", "2", "--quiet")  # 2 runs
    r = _blocklab("run", str(EXAMPLES / "fillfactor.toml"), *small, env=env, timeout_s=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SECRET not in r.stdout + r.stderr and "postgresql: " in r.stdout
    with psycopg.connect(parse_pg(no_pw).conninfo, password=SECRET) as conn:
        runs = conn.execute("SELECT status, raw_dir, provenance_json, settings_json FROM runs")
        rows = runs.fetchall()
    assert [s for s, *_ in rows] == ["ok"] * 2  # fillfactor 100 and 75, one round
    for _, raw_dir, provenance, settings in rows:
        assert (
            Path(raw_dir).parent.parent == raw / "runs" and Path(raw_dir, "pgbench.argv").is_file()
        )
        assert SECRET not in provenance + settings
    assert not [p for p in raw.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    summary = _blocklab("summary", env=env)
    assert summary.returncode == 0 and "ff=75" in summary.stdout, summary.stderr


def _queries_run(vid: str, rnd: int, plan_file: str) -> RunRecord:
    """A run with per-query rows whose plans are recorded real ones (tests/data/plans)."""
    from blocklab.store.base import QueryRow
    from blocklab.workloads import plans

    recorded = json.loads((Path(__file__).parents[1] / "data" / "plans" / plan_file).read_text())
    rows = []
    for i, (q, explain) in enumerate(sorted(recorded["plans"].items())):
        node = plans.normalise(explain)
        rows.append(
            QueryRow(q, 2, 10.0 + i + rnd, 2 * (10.0 + i + rnd), plans.fingerprint(node),
                     json.dumps(node.to_json(), sort_keys=True))
        )  # fmt: skip
    run = _run(vid, rnd, tps=3600.0)
    run.queries = rows
    run.raw_dir = ""
    run.provenance = {"tpch_report": {"label": "TPC-H-derived, not comparable"}}
    return run


def test_query_rows_and_plans_on_both_back_ends(store: ResultsStore, tmp_path: Path) -> None:
    """Schema version 4: per-query times and plans are stored, read back, summarised
    (hash joins off in variant B: its 20 changed plans are found) and exported."""
    from blocklab.analysis.query_summary import summarize_queries
    from blocklab.store.copy_results import copy_results

    _register(store)
    for rnd in (1, 2):
        store.record_run(_queries_run("a", rnd, "tpch-sf0.01-default.json"))
        store.record_run(_queries_run("b", rnd, "tpch-sf0.01-hashjoin-off.json"))
    rows = store.run_queries("e1")
    assert len(rows) == 4 * 22 and {r["calls"] for r in rows} == {2}
    qs = summarize_queries(store, "e1")
    assert qs is not None and qs.reference_label == "A" and qs.label.startswith("TPC-H-derived")
    changed = [q.query for q in qs.changed]
    assert len(changed) == 20 and "q1" not in changed and "q6" not in changed
    q3 = next(q for q in qs.queries if q.query == "q3")
    assert [v.label for v in q3.differing] == ["B"]
    a = q3.variants[0].summary
    assert a is not None and a.n == 2 and a.ci95_low is not None
    assert not qs.diff(q3, q3.differing[0]).same
    with ResultsDB(tmp_path / "copy") as dest:
        copy_results(store, dest, "e1")
        again = summarize_queries(dest, "e1")
        assert again is not None and [q.query for q in again.changed] == changed


def test_read_ahead_trends_and_named_series_contract(store: ResultsStore) -> None:
    """read_ahead answers runs(), metrics() and metric_names() as the queries do (and
    later runs are not seen: one snapshot); series_of_runs reads only the series named;
    kept trend rows come back as the floats they were (inf too), per method, replaced
    whole (schema 5)."""
    _register(store)
    a = store.record_run(_run("a", 1))
    b = store.record_run(_run("b", 1, None))
    runs, metrics = [dict(r) for r in store.runs("e1")], store.metrics(a)
    names = store.metric_names("e1")
    store.read_ahead("e1")
    # every column but the two texts, which run_texts reads; the provenance's facts instead
    texts = ("settings_json", "provenance_json")
    lean = [
        {k: v for k, v in r.items() if k not in texts} | {"facts_json": '{"build_key": "k"}'}
        for r in runs
    ]
    assert [dict(r) for r in store.runs("e1")] == lean
    assert store.run_texts([b, a, b + 99]) == {r["id"]: (r[texts[0]], r[texts[1]]) for r in runs}
    assert store.metric_names("e1") == names and len(names) > 1
    assert [r["id"] for r in store.runs("e1", "b")] == [b]
    assert store.metrics(a) == metrics == store.metrics(b)
    later = store.record_run(_run("a", 2))
    assert [r["id"] for r in store.runs("e1")] == [a, b]
    assert store.metrics(later) == metrics  # not read ahead: read now
    assert dict(store.series_of_runs([a, b], names=["tps"])) == {
        a: {"tps": [(0.0, 1.5), (1.0, None)]},
        b: {"tps": [(0.0, 1.5), (1.0, None)]},
    }
    assert dict(store.series_of_runs([a], names=["other"])) == {a: {}}
    rows = [
        (a, "", 60, None, None, None, None, None, None),
        (a, "tps", 60, 1234.5678901234567, 0.1 + 0.2, 1e-300, math.inf, 0.049, 1),
    ]
    store.keep_run_trends("m1", rows)
    assert store.run_trends([a, b], "m1") == {a: [r[1:] for r in rows]}  # a range's scan
    assert store.run_trends([a, a + 10], "m1") == {a: [r[1:] for r in rows]}  # sparse: IN
    assert store.run_trends([a], "m2") == {}
    store.keep_run_trends("m2", rows[:1])  # the run's rows of any method replaced
    assert store.run_trends([a], "m1") == {}
    assert store.run_trends([a], "m2") == {a: [rows[0][1:]]}


def test_read_ahead_gives_the_facts_of_a_run_stored_without_them_contract(
    store: ResultsStore,
) -> None:
    """A run whose kept facts are missing (stored by a blocklab that did not keep them,
    after this one upgraded the store) is read ahead with its facts made from its
    provenance; a run whose are kept is read with them as kept."""
    _register(store)
    a = store.record_run(_run("a", 1))
    b = store.record_run(replace(_run("b", 1), provenance={"version": "18.6", "x": [1]}))
    conn: Any = getattr(store, "conn")  # noqa: B009  (both back ends' connection)
    with store.tx():
        conn.execute("DELETE FROM run_facts WHERE run_id = ?", (b,))
    store.read_ahead("e1")
    facts = {r["id"]: json.loads(r["facts_json"]) for r in store.runs("e1")}
    assert facts == {a: {"build_key": "k"}, b: {"version": "18.6"}}


def test_read_ahead_with_kept_reads_only_the_runs_it_does_not_hold_contract(
    store: ResultsStore,
) -> None:
    """read_ahead with `kept` (report --watch keeps it between updates) answers as a whole
    read does, reads again only the runs `kept` does not hold as they are (their key
    columns: a run id given again comes with other ones), and is left holding the
    experiment's runs now."""
    _register(store)
    a = store.record_run(_run("a", 1))
    b = store.record_run(_run("b", 1, None))
    kept: RunsKept = {}
    store.read_ahead("e1", kept)
    first = {r["id"]: r for r in store.runs("e1")}
    assert list(kept["e1"]) == [a, b]
    c = store.record_run(_run("a", 2))
    kept["e1"][b] = ((b, "another start", None), *kept["e1"][b][1:])  # b's id given again
    kept["e1"][999_999] = ((999_999, "", ""), {}, {})  # a run gone since
    store.read_ahead("e1", kept)
    got = store.runs("e1")
    assert [r["id"] for r in got] == [a, b, c] and list(kept["e1"]) == [a, b, c]
    assert got[0] is first[a] and got[1] is not first[b]  # a kept, b read again
    whole = store.reopen()
    try:
        whole.read_ahead("e1")
        assert [dict(r) for r in whole.runs("e1")] == [dict(r) for r in got]
        assert [whole.metrics(i) for i in (a, b, c)] == [store.metrics(i) for i in (a, b, c)]
        assert store.metric_names("e1") == whole.metric_names("e1")
    finally:
        whole.close()


def test_change_marker_differs_after_each_write_the_report_reads(store: ResultsStore) -> None:
    """change_marker (blocklab report --watch polls it) differs after every write the
    report's pages are made from, seen from another connection too, and is equal while
    nothing is written or only kept trends are (equal to judging the series again)."""
    other = store.reopen()  # the watcher's own connection
    try:
        seen = [other.change_marker()]

        def changed() -> bool:
            seen.append(other.change_marker())
            return seen[-1] != seen[-2]

        assert not changed()
        _register(store)
        assert changed()
        store.record_round("e1", 1, 5, ["a", "b"])
        assert changed()
        a = store.record_run(_run("a", 1))
        assert changed() and not changed()
        store.keep_run_trends("m1", [(a, "", 60, None, None, None, None, None, None)])
        assert not changed()
        store.set_experiment_state("e1", "finished", "all rounds ran")
        assert changed()
        head = DeviceProfileHead("p", "2026-11-23T10:00:00Z", {}, {}, "fio-3", "libaio", 1.0, 1)
        pid = store.create_device_profile(head)
        assert changed()
        store.record_device_point(pid, DevicePoint("read", 4096, 1, "ok", "", {}, "fio", "{}"))
        assert changed()
        store.set_device_profile_state(pid, "done")
        assert changed() and not changed()
    finally:
        other.close()

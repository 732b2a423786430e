"""A corrupt or foreign results database, or one from a newer blocklab: `summary`,
`report` and `run` exit 2 with a message naming the file, and leave its bytes alone."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from helpers import tiny_experiment_toml
from report_fixture import write_synthetic_results

from blocklab.cli import main
from blocklab.store import RESULTS_DB_NAME, SCHEMA_VERSION

TINY = tiny_experiment_toml("hostile-results")


def _random_bytes(db: Path) -> None:
    db.write_bytes(os.urandom(64 * 1024))


def _foreign_sqlite(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org/')")
    conn.close()


def _newer_schema(db: Path) -> None:
    write_synthetic_results(db.parent)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")  # one file, so its bytes say it all
        conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.close()


KINDS = {"random-bytes": _random_bytes, "foreign-sqlite": _foreign_sqlite, "newer": _newer_schema}
# What blocklab/store/sqlite.py did before store.sqlite.check_existing() looked at the header
# and the tables read-only before anything writes.
STORE_FIX = {
    "random-bytes": "sqlite3.DatabaseError 'file is not a database' escapes as a traceback",
    "foreign-sqlite": "blocklab writes its schema into the other application's database "
    "(and `run` then stores runs in it, exit 0)",
    "newer": "PRAGMA journal_mode = WAL runs before the version check: the header changes "
    "and -wal/-shm files appear, although the error itself is clear",
}


def _digest(directory: Path) -> dict[str, str]:
    """Every file in the results directory and its SHA-256: nothing may appear or change."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


@pytest.fixture(
    params=sorted(KINDS),
    ids=[f"{k} (was: {STORE_FIX[k][:40]})" for k in sorted(KINDS)],
)
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    KINDS[request.param](results / RESULTS_DB_NAME)
    return results


def _argv(command: str, results: Path, tmp_path: Path) -> list[str]:
    if command == "report":
        return ["report", "--results", str(results), "--out", str(tmp_path / "site")]
    if command == "run":
        experiment = tmp_path / "tiny.toml"
        experiment.write_text(TINY)
        return ["run", str(experiment), "--results", str(results), "--quiet"]
    return ["summary", "--results", str(results)]


@pytest.mark.parametrize("command", ["summary", "report", "run"])
def test_a_hostile_results_database_is_exit_2_and_left_alone(
    command: str, hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digest(hostile)
    try:
        rc = main(_argv(command, hostile, tmp_path))
    except Exception as e:  # noqa: BLE001 - a traceback is the finding
        rc = f"crash: {type(e).__name__}: {e}"  # type: ignore[assignment]
    err = " ".join(capsys.readouterr().err.split())
    assert _digest(hostile) == before, f"the results directory changed; rc={rc} {err[:300]}"
    assert rc == 2, (rc, err)
    assert RESULTS_DB_NAME in err, err

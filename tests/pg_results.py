"""A real PostgreSQL results server and stored-run fixtures shared by the store, fleet and
summary tests (PostgreSQL 15, Debian's binaries, on a private socket)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import running_cluster

from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster
from blocklab.postgres.installation import Installation
from blocklab.store import ResultsStore, RunRecord
from blocklab.store.factory import open_store

SECRET = "s3cret-Pw-42"


@pytest.fixture(scope="session")
def pg_server(paths: Paths, pg15_system: Installation) -> Iterator[Cluster]:
    """The shared database server; role `pwuser` must log in with SECRET (scram)."""
    with running_cluster(paths, pg15_system, "pgstore", {}) as c:
        hba = c.data_dir / "pg_hba.conf"
        hba.write_text("local all pwuser scram-sha-256\n" + hba.read_text())
        with psycopg.connect(c.conninfo, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE pwuser LOGIN PASSWORD '{SECRET}'")
            conn.execute("SELECT pg_reload_conf()")
        yield c


def _uri(c: Cluster, db: str, password: str | None = None) -> str:
    auth = f"{c.user.name}:{password}" if password else c.user.name
    return f"postgresql://{auth}@/{db}?host={c.socket_dir}&port={c.port}"


@pytest.fixture
def pg_uri(pg_server: Cluster) -> str:
    """A fresh database of its own on the shared test server."""
    name = "r_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return _uri(pg_server, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ResultsStore]:
    spec = str(tmp_path / "results")
    if request.param == "postgresql":
        spec = request.getfixturevalue("pg_uri")
    with open_store(spec) as db:
        yield db


def _register(db: ResultsStore, name: str = "e1") -> None:
    db.upsert_experiment(
        name,
        description="contract",
        spec={"name": name, "rounds": 2},
        seed=3,
        reference="a",
        created_at="2026-11-23T10:00:00.000Z",
        host={"cpu": "x"},
        variants=[("a", "A", '{"v": 1}', {"bs": 4}), ("b", "B", '{"v": 2}', {"bs": 8})],
    )


def _run(vid: str, rnd: int, tps: float | None = 1234.5) -> RunRecord:
    return RunRecord(
        experiment="e1",
        variant_id=vid,
        round=rnd,
        position=0,
        status="ok" if tps is not None else "failed",
        started_at="2026-11-23T10:00:00.000Z",
        ended_at="2026-11-23T10:00:02.000Z",
        reason="" if tps is not None else "pgbench exit 2",
        tps=tps,
        transactions=2**40,  # wider than a 32-bit integer
        raw_dir="runs/e1/x",
        settings={"shared_buffers": ["16384", "8kB"]},
        provenance={"build_key": "k", "phases_s": {"run": 2.0}},
        metrics={"wal_bytes_per_xact": 0.1 + 0.2, "missing": None},
        series={"tps": [(0.0, 1.5), (1.0, None)]},
        checkpoints=[{"start_s": -1.0, "end_s": None, "trigger": "wal", "bytes_written": 2**35}],
    )


def _pwuser_uris(pg_server: Cluster, pg_uri: str) -> tuple[str, str]:
    """The database handed to `pwuser`: its URI with the password, and without."""
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {pg_uri.split('/')[3].split('?')[0]} OWNER TO pwuser")
    with_pw = pg_uri.replace(f"//{pg_server.user.name}@", f"//pwuser:{SECRET}@")
    return with_pw, pg_uri.replace(f"//{pg_server.user.name}@", "//pwuser@")

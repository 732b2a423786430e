"""`blocklab run` with PostgreSQL 18's asynchronous I/O and WAL compression on a real
build: the run's provenance shows the settings in effect as the server reports them
(pg_settings, what SHOW shows), not what the experiment file wrote. Written for CI's
build/root job; not run on the shared development machine."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from blocklab.paths import Paths, ensure_dir
from blocklab.postgres import io_settings

pytestmark = [pytest.mark.build, pytest.mark.root]

EXPERIMENT = """
[experiment]
name = "{name}"
rounds = 1

[matrix]
postgres = "18"
scale = 1
workload = "select-only"
clients = 2
duration = 2

[matrix.settings]
{setting} = "{value}"
"""


def _run_with(paths: Paths, name: str, setting: str, value: str) -> list[dict[str, Any]]:
    """Each stored run's effective settings (pg_settings read back from the server) and
    where each came from (the provenance's settings_source)."""
    d = ensure_dir(paths.home / "exp" / name)
    f = d / "x.toml"
    f.write_text(EXPERIMENT.format(name=name, setting=setting, value=value))
    results = paths.home / f"results-{name}"
    done = subprocess.run(
        [sys.executable, "-m", "blocklab.cli", "run", str(f), "--results", str(results), "--quiet"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        rows = c.execute("SELECT settings_json, provenance_json FROM runs").fetchall()
    return [
        {"settings": json.loads(s), "source": json.loads(p)["collected"]["settings_source"]}
        for s, p in rows
    ]


def test_io_method_io_uring_is_in_effect(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    if io_settings.read_io_uring_refusal():
        pytest.skip(f"this kernel cannot: {io_settings.read_io_uring_refusal()}")
    assert "liburing" in (pg18_8k.features or ())
    runs = _run_with(paths, "io-uring", "io_method", "io_uring")
    assert len(runs) == 1
    assert runs[0]["settings"]["io_method"]["setting"] == "io_uring"
    assert runs[0]["source"]["io_method"] == "configuration file"


def test_wal_compression_lz4_is_in_effect(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    assert "lz4" in (pg18_8k.features or ())
    runs = _run_with(paths, "wal-lz4", "wal_compression", "lz4")
    assert len(runs) == 1
    assert runs[0]["settings"]["wal_compression"]["setting"] == "lz4"
    assert runs[0]["source"]["wal_compression"] == "configuration file"

"""Provenance of one run: what ran, built how, configured how, on what.

`collect_provenance()` is the one call the runner makes (with the server up). Each part
that cannot be gathered is recorded under "errors" instead of failing the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from blocklab import proc
from blocklab.errors import CommandError
from blocklab.host import host_facts
from blocklab.postgres.installation import Installation

SETTINGS_SQL = "SELECT name, setting, unit, source FROM pg_catalog.pg_settings ORDER BY name"


def parse_pg_config(text: str) -> dict[str, str]:
    """`pg_config` output ("KEY = value" lines) as a dict (pure)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def pg_config(inst: Installation) -> dict[str, str]:
    return parse_pg_config(proc.run([str(inst.bin("pg_config"))], timeout_s=60).stdout)


def server_settings(conninfo: str) -> dict[str, dict[str, Any]]:
    """pg_settings (what SHOW ALL shows, with units and where each value came from)."""
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=30) as conn:
        version = conn.execute("SELECT version()").fetchone()
        rows = conn.execute(SETTINGS_SQL).fetchall()
    out = {r[0]: {"setting": r[1], "unit": r[2], "source": r[3]} for r in rows}
    out["__version__"] = {"setting": version[0] if version else None}
    return out


def collect_provenance(
    conninfo: str,
    inst: Installation,
    *,
    storage_facts: Mapping[str, Any] | None = None,
    commands: Sequence[Sequence[str]] = (),
) -> dict[str, Any]:
    """pg_config, pg_settings, the build manifest, host (kernel, CPU, memory, blocklab
    version), storage facts and every command line of the run."""
    errors: dict[str, str] = {}
    prov: dict[str, Any] = {
        "installation": {
            "key": inst.key,
            "version": inst.version,
            "prefix": str(inst.prefix),
            "block_size_bytes": inst.block_size_bytes,
            "wal_block_size_bytes": inst.wal_block_size_bytes,
        },
        "build_manifest": dict(inst.manifest),
        "host": host_facts(),
        "storage": dict(storage_facts or {}),
        "commands": [list(map(str, c)) for c in commands],
    }
    try:
        prov["pg_config"] = pg_config(inst)
    except (CommandError, OSError) as e:
        errors["pg_config"] = str(e)
    try:
        prov["settings"] = server_settings(conninfo)
    except psycopg.Error as e:
        errors["settings"] = str(e)
    prov["errors"] = errors
    return prov

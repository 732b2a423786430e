"""The facts of a run's provenance that every summary reads (schema version 6): what the
setting line and the mixed-inputs check need (the server's version, the build's and the
dataset's keys), kept in their own small row when the run is stored, so that reading an
experiment's runs in bulk (read_ahead) need not read their 35 kB of settings and
provenance."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

# the provenance's keys kept: "dataset" as {"key": ...} only
FACTS = ("version", "build_key", "dataset", "session")
FILL_CHUNK = 500  # runs read at once when an upgrade fills the facts of older runs


def facts_of(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """FACTS of a run's provenance, those it has."""
    out = {k: provenance[k] for k in FACTS if k in provenance}
    if isinstance(out.get("dataset"), Mapping):
        out["dataset"] = {"key": out["dataset"].get("key")}
    return out


def facts_json(provenance: Mapping[str, Any]) -> str:
    """facts_of as the stored text."""
    return json.dumps(facts_of(provenance), sort_keys=True, default=str)


def parsed(text: str | None) -> dict[str, Any]:
    """A stored JSON object by orjson (0.028 ms for a real run's 12 kB provenance, the
    standard library 0.067 ms); what orjson refuses (NaN, which json.dumps writes) by the
    standard library; {} for anything but an object."""
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        value = json.loads(text or "{}")
    return value if isinstance(value, dict) else {}


def facts_rows(rows: Sequence[tuple[Any, str | None]]) -> Iterator[tuple[Any, str]]:
    """(run id, facts_json) of (run id, provenance_json) rows."""
    for run_id, text in rows:
        yield run_id, facts_json(parsed(text))


def fill(conn: Any) -> int:
    """Keep the facts of every stored run that has none (the runs of a store upgraded
    to version 6), in chunks; returns how many. `conn`: the store's connection, in the
    caller's transaction."""
    done = 0
    while True:
        rows = conn.execute(
            "SELECT id, provenance_json FROM runs WHERE id NOT IN (SELECT run_id FROM run_facts)"
            f" ORDER BY id LIMIT {FILL_CHUNK}"
        ).fetchall()
        if not rows:
            return done
        conn.executemany(
            "INSERT INTO run_facts VALUES (?,?)",
            list(facts_rows([(r["id"], r["provenance_json"]) for r in rows])),
        )
        done += len(rows)

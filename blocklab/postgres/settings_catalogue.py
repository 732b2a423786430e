"""Each build's settings catalogue: pg_settings of a fresh cluster, kept beside the build.

    SQL                  the query (psql -At prints one line of JSON)
    save(inst, text)     keep its answer beside the build (blocklab.postgres.build.verify does)
    stored(inst)         the kept catalogue, or None; starts nothing
    load(inst, paths)    the kept catalogue; a build verified before catalogues were kept
                         gets one now from a throwaway server (a few seconds, once;
                         system binaries get one each time, nothing is written there)
    parse(data)          the file's JSON -> settings_policy.Catalogue (pure)

The bytes settings policy (blocklab.postgres.settings_policy) reads from it which settings count
pages and what their units, limits and defaults are in that build.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from blocklab.paths import Paths
from blocklab.postgres.installation import MANIFEST_NAME, Installation
from blocklab.postgres.settings_policy import Catalogue, Guc
from blocklab.postgres.throwaway import fresh_cluster_answers

CATALOGUE_NAME = "blocklab-settings.json"
COLUMNS = (
    "name", "unit", "vartype", "context", "min_val", "max_val", "boot_val", "reset_val", "source",
    "enumvals",
)  # fmt: skip
# enumvals (an enum's allowed values: io_method, wal_compression) as one comma-separated
# string; catalogues kept before it was recorded have "" (unknown) there.
_EXPRESSIONS = {"enumvals": "array_to_string(enumvals, ',')"}
SQL = (
    "SELECT json_agg(json_build_object("
    + ", ".join(f"'{c}', coalesce({_EXPRESSIONS.get(c, c)}, '')" for c in COLUMNS)
    + ") ORDER BY name) FROM pg_settings"
)


def parse(data: dict[str, Any]) -> Catalogue:
    """The catalogue file's JSON as a Catalogue (ValueError/KeyError if malformed)."""
    rows = data["settings"]
    if not isinstance(rows, list) or not rows:
        raise ValueError("a settings catalogue needs a non-empty list of settings")
    gucs = {str(r["name"]): Guc(**{c: str(r.get(c, "")) for c in COLUMNS}) for r in rows}
    return Catalogue(
        block_size_bytes=int(data["block_size_bytes"]),
        wal_block_size_bytes=int(data["wal_block_size_bytes"]),
        gucs=gucs,
        version=str(data.get("version", "")),
        key=str(data.get("key", "")),
    )


def _file_data(inst: Installation, answer: str) -> dict[str, Any]:
    return {
        "key": inst.key,
        "version": inst.version,
        "block_size_bytes": inst.block_size_bytes,
        "wal_block_size_bytes": inst.wal_block_size_bytes,
        "settings": json.loads(answer),
    }


def save(inst: Installation, answer: str) -> Catalogue:
    """Keep the answer to SQL beside the build (atomically) and return it parsed."""
    data = _file_data(inst, answer)
    catalogue = parse(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{CATALOGUE_NAME}.", dir=inst.prefix)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, inst.prefix / CATALOGUE_NAME)
    except BaseException:
        os.unlink(tmp)
        raise
    return catalogue


def stored(inst: Installation) -> Catalogue | None:
    """The catalogue kept beside the build, or None (missing or unreadable)."""
    try:
        return parse(json.loads((inst.prefix / CATALOGUE_NAME).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(inst: Installation, paths: Paths) -> Catalogue:
    """The build's catalogue; read from a throwaway server and kept if there is none."""
    found = stored(inst)
    if found is not None:
        return found
    _control, (answer,) = fresh_cluster_answers(inst, paths, [SQL])
    if not (inst.prefix / MANIFEST_NAME).is_file():  # system binaries: not ours to write
        return parse(_file_data(inst, answer))
    return save(inst, answer)

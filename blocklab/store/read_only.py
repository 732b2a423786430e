"""Reading a results database in a directory blocklab cannot write (a read-only mount, a
published copy): `summary` and `report` read it as they read a writable one."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from blocklab.errors import UserError


def read_uri(path: Path) -> str:
    """The URI that reads `path` without writing: in a directory blocklab cannot write, a
    cleanly closed database (no -wal file, or an empty one) is read as immutable, for
    SQLite could not make the -shm file WAL mode needs (connect)."""
    wal = path.with_name(path.name + "-wal")
    closed = not wal.exists() or wal.stat().st_size == 0
    immutable = closed and not os.access(path.parent, os.W_OK)
    return f"{path.as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def connect(path: Path, schema_version: int) -> sqlite3.Connection:
    """A results database in a directory blocklab cannot write (a read-only mount, a
    published copy), for reading. SQLite in WAL mode needs its -shm file beside the
    database: from a cleanly closed database (no -wal file left, or an empty one) it is
    read as immutable; otherwise its WAL holds rows the file alone does not, and it is
    read through the -wal and -shm left beside it, or refused. Its schema must be this
    blocklab's (`schema_version`): nothing can be upgraded in place."""
    try:
        conn = sqlite3.connect(read_uri(path), uri=True, timeout=30.0)
        found = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    except sqlite3.DatabaseError as e:
        raise UserError(
            f"--results: {path.parent} cannot be written, and its database cannot be read "
            f"as it is ({e}): copy the directory to a writable place"
        ) from None
    if found != schema_version:
        conn.close()
        raise UserError(
            f"--results: {path.parent} cannot be written, and its database has schema "
            f"version {found}, which this blocklab ({schema_version}) would upgrade: copy "
            "the directory to a writable place"
        )
    return conn

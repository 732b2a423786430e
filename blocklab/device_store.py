"""Device profiles in the results database (tables of schema version 2).

A profile is created before its first point runs and each point is written as soon as
fio returns (one transaction per point), so an interrupted profile keeps what it measured.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blocklab import fio
from blocklab.errors import UserError
from blocklab.store import ResultsDB

POINT_COLUMNS = (
    "iops",
    "bw_bytes_per_s",
    "lat_mean_us",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p999_us",
    "runtime_s",
)


@dataclass(frozen=True)
class ProfileHead:
    name: str
    created_at: str
    target: Mapping[str, Any]
    host: Mapping[str, Any]
    fio_version: str
    ioengine: str
    runtime_s: float
    size_bytes: int


def create(db: ResultsDB, head: ProfileHead, *, replace: bool = False) -> int:
    """Insert a profile (state 'running'); UserError if the name exists and not `replace`."""
    if not replace:
        check_name_free(db, head.name)
    with db.tx() as c:
        row = c.execute("SELECT id FROM device_profiles WHERE name=?", (head.name,)).fetchone()
        if row is not None:
            c.execute("DELETE FROM device_profiles WHERE id=?", (row["id"],))
        cur = c.execute(
            "INSERT INTO device_profiles (name, created_at, target_json, host_json, fio_version,"
            " ioengine, runtime_s, size_bytes) VALUES (?,?,?,?,?,?,?,?)",
            (
                head.name,
                head.created_at,
                json.dumps(head.target, sort_keys=True, default=str),
                json.dumps(head.host, sort_keys=True, default=str),
                head.fio_version,
                head.ioengine,
                head.runtime_s,
                head.size_bytes,
            ),
        )
    return int(cur.lastrowid or 0)


def check_name_free(db: ResultsDB, name: str) -> None:
    """UserError when a profile of that name is stored."""
    if db.conn.execute("SELECT 1 FROM device_profiles WHERE name=?", (name,)).fetchone():
        raise UserError(
            f"--name: a device profile {name!r} exists in {db.path}; "
            "choose another name or pass --replace"
        )


def record_point(
    db: ResultsDB,
    profile_id: int,
    point: fio.Point,
    *,
    result: fio.Result | None,
    reason: str,
    command: list[str],
    raw_json: str,
) -> None:
    """One point: numbers when `result`, else failed with `reason` and no numbers."""
    values = [getattr(result, k) if result else None for k in POINT_COLUMNS]
    with db.tx() as c:
        c.execute(
            "INSERT OR REPLACE INTO device_profile_points (profile_id, pattern, request_bytes,"
            " iodepth, status, reason, " + ", ".join(POINT_COLUMNS) + ", command, fio_json)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                profile_id,
                point.pattern,
                point.request_bytes,
                point.iodepth,
                "ok" if result else "failed",
                reason,
                *values,
                " ".join(command),
                raw_json,
            ),
        )


def set_state(db: ResultsDB, profile_id: int, state: str) -> None:
    with db.tx() as c:
        c.execute("UPDATE device_profiles SET state=? WHERE id=?", (state, profile_id))


def profiles(db: ResultsDB) -> list[sqlite3.Row]:
    return list(
        db.conn.execute(
            "SELECT p.*, count(q.profile_id) AS points,"
            " sum(q.status = 'failed') AS failed_points"
            " FROM device_profiles p LEFT JOIN device_profile_points q ON q.profile_id = p.id"
            " GROUP BY p.id ORDER BY p.created_at"
        )
    )


def profile(db: ResultsDB, name: str, flag: str = "NAME") -> sqlite3.Row:
    row = db.conn.execute("SELECT * FROM device_profiles WHERE name=?", (name,)).fetchone()
    if row is None:
        known = ", ".join(r["name"] for r in profiles(db)) or "none"
        raise UserError(f"{flag}: no device profile {name!r} in {db.path} (known: {known})")
    return row


def points(db: ResultsDB, profile_id: int) -> list[sqlite3.Row]:
    return list(
        db.conn.execute(
            "SELECT * FROM device_profile_points WHERE profile_id=?"
            " ORDER BY pattern, iodepth, request_bytes",
            (profile_id,),
        )
    )


def iops_by_size(
    results: Path, name: str, *, pattern: str, iodepth: int, flag: str
) -> dict[int, float]:
    """Request bytes -> IOPS of a stored profile's ok points at one pattern and depth."""
    with ResultsDB(results, create=False) as db:
        head = profile(db, name, flag)
        got = {
            r["request_bytes"]: r["iops"]
            for r in points(db, head["id"])
            if r["pattern"] == pattern and r["iodepth"] == iodepth and r["status"] == "ok"
        }
    if not got:
        raise UserError(
            f"{flag}: profile {name!r} has no successful {pattern} points at queue depth "
            f"{iodepth}; choose --pattern/--depth it has (blocklab device show {name})"
        )
    return got

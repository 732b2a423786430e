"""The device profiles' rows (schema version 2) of a SQLite results store: a part of
ResultsDB (blocklab.store.sqlite), which PostgreSQL's store inherits too."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager

from blocklab.store.base import POINT_COLUMNS, DevicePoint, DeviceProfileHead

# a device point measured again replaces these columns of the stored one
POINT_UPDATED = ("status", "reason", *POINT_COLUMNS, "command", "fio_json")


class DeviceProfiles:
    """create_device_profile ... device_points of the store (base.ResultsStore)."""

    conn: sqlite3.Connection  # the store's (PostgreSQL's store puts its wrapper there)

    def tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # the store's (ResultsDB.tx)

    def create_device_profile(self, head: DeviceProfileHead) -> int:
        """Insert a profile (state 'running'), replacing a stored one of the same name."""
        with self.tx() as c:
            row = c.execute("SELECT id FROM device_profiles WHERE name=?", (head.name,)).fetchone()
            if row is not None:
                c.execute("DELETE FROM device_profiles WHERE id=?", (row["id"],))
            cur = c.execute(
                "INSERT INTO device_profiles (name, created_at, target_json, host_json,"
                " fio_version, ioengine, runtime_s, size_bytes) VALUES (?,?,?,?,?,?,?,?)"
                " RETURNING id",
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
            profile_id = int(cur.fetchone()["id"])
        return profile_id

    def device_profile_exists(self, name: str) -> bool:
        sql = "SELECT 1 FROM device_profiles WHERE name=?"
        return self.conn.execute(sql, (name,)).fetchone() is not None

    def record_device_point(self, profile_id: int, point: DevicePoint) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT INTO device_profile_points (profile_id, pattern,"
                " request_bytes, iodepth, status, reason, " + ", ".join(POINT_COLUMNS) + ","
                " command, fio_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT (profile_id, pattern, request_bytes, iodepth) DO UPDATE SET "
                + ", ".join(f"{k} = excluded.{k}" for k in POINT_UPDATED),
                (
                    profile_id,
                    point.pattern,
                    point.request_bytes,
                    point.iodepth,
                    point.status,
                    point.reason,
                    *(point.values.get(k) for k in POINT_COLUMNS),
                    point.command,
                    point.fio_json,
                ),
            )

    def set_device_profile_state(self, profile_id: int, state: str) -> None:
        with self.tx() as c:
            c.execute("UPDATE device_profiles SET state=? WHERE id=?", (state, profile_id))

    def device_profiles(self) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT p.*, count(q.profile_id) AS points,"
                " sum(CASE WHEN q.status = 'failed' THEN 1 ELSE 0 END) AS failed_points"
                " FROM device_profiles p LEFT JOIN device_profile_points q"
                " ON q.profile_id = p.id GROUP BY p.id ORDER BY p.created_at"
            )
        )

    def device_profile(self, name: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM device_profiles WHERE name=?", (name,)
        ).fetchone()
        return row

    def device_points(self, profile_id: int) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT * FROM device_profile_points WHERE profile_id=?"
                " ORDER BY pattern, iodepth, request_bytes",
                (profile_id,),
            )
        )

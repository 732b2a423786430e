"""Device profiles in the results database (tables of schema version 2).

A profile is created before its first point runs and each point is written as soon as
fio returns (one transaction per point), so an interrupted profile keeps what it measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from blocklab.economics import fio
from blocklab.errors import UserError
from blocklab.store import ResultsStore, Row
from blocklab.store.base import POINT_COLUMNS, DevicePoint
from blocklab.store.base import DeviceProfileHead as ProfileHead
from blocklab.store.factory import open_store

__all__ = ["POINT_COLUMNS", "ProfileHead"]


def create(db: ResultsStore, head: ProfileHead, *, replace: bool = False) -> int:
    """Insert a profile (state 'running'); UserError if the name exists and not `replace`."""
    if not replace:
        check_name_free(db, head.name)
    return db.create_device_profile(head)


def check_name_free(db: ResultsStore, name: str) -> None:
    """UserError when a profile of that name is stored."""
    if db.device_profile_exists(name):
        raise UserError(
            f"--name: a device profile {name!r} exists in {db.location}; "
            "choose another name or pass --replace"
        )


def record_point(
    db: ResultsStore,
    profile_id: int,
    point: fio.Point,
    *,
    result: fio.Result | None,
    reason: str,
    command: list[str],
    raw_json: str,
) -> None:
    """One point: numbers when `result`, else failed with `reason` and no numbers."""
    stored = DevicePoint(
        pattern=point.pattern,
        request_bytes=point.request_bytes,
        iodepth=point.iodepth,
        status="ok" if result else "failed",
        reason=reason,
        values={k: getattr(result, k) if result else None for k in POINT_COLUMNS},
        command=" ".join(command),
        fio_json=raw_json,
    )
    db.record_device_point(profile_id, stored)


def set_state(db: ResultsStore, profile_id: int, state: str) -> None:
    db.set_device_profile_state(profile_id, state)


def profiles(db: ResultsStore) -> list[Row]:
    return list(db.device_profiles())


def profile(db: ResultsStore, name: str, flag: str = "NAME") -> Row:
    row = db.device_profile(name)
    if row is None:
        known = ", ".join(r["name"] for r in profiles(db)) or "none"
        raise UserError(f"{flag}: no device profile {name!r} in {db.location} (known: {known})")
    return row


def points(db: ResultsStore, profile_id: int) -> Sequence[Row]:
    return db.device_points(profile_id)


def iops_by_size(
    results: str, name: str, *, pattern: str, iodepth: int, flag: str
) -> dict[int, float]:
    """Request bytes -> IOPS of a stored profile's ok points at one pattern and depth."""
    with open_store(results, create=False) as db:
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

"""A run's per-second series as the store keeps them since schema version 7: one row a
(run, series), its seconds and its values each a little-endian array of float64 (a value
not measured, NULL before, is NaN there and None again when read).

Until version 6 each point was a row (run_id, name, t_s, value). A report reads every
run's series: at 10,000 runs of 8 series of 60 seconds, 4.8 million rows, and SQLite
made a Python tuple of each: reading them all back took 4.7 s of CPU here, 1.8 s packed.
Packed, 200 runs are 1,600 rows of two short blobs each."""

from __future__ import annotations

import array
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any

Points = list[tuple[float, float | None]]
FILL_RUNS = 500  # runs packed at once when an upgrade packs the rows stored before it
_SWAP = sys.byteorder != "little"  # the blobs are little-endian on every host


def _blob(values: Iterable[float]) -> bytes:
    a = array.array("d", values)
    if _SWAP:
        a.byteswap()
    return a.tobytes()


def _floats(blob: bytes | memoryview) -> list[float]:
    a = array.array("d")
    a.frombytes(blob)
    if _SWAP:
        a.byteswap()
    return a.tolist()


def rows(
    run_id: int, series: Mapping[str, Iterable[tuple[float, float | None]]]
) -> list[tuple[int, str, bytes, bytes]]:
    """(run_id, name, seconds, values) of each series that has points: its seconds
    ascending, a second given twice holding its last value (as the point rows' ON
    CONFLICT did)."""
    out = []
    for name, pts in series.items():
        by_t = {float(t): v for t, v in pts}
        if not by_t:
            continue
        ts = sorted(by_t)
        vs = (math.nan if (v := by_t[t]) is None else float(v) for t in ts)
        out.append((run_id, name, _blob(ts), _blob(vs)))
    return out


def points(
    t_blob: bytes | memoryview,
    value_blob: bytes | memoryview,
    seconds: dict[bytes, list[float]] | None = None,
) -> Points:
    """A stored series' points, (second, value or None). `seconds`: the seconds already
    read, by their blob (a run's series mostly share theirs), to take and to add to."""
    if seconds is None:
        ts = _floats(t_blob)
    else:
        key = bytes(t_blob)
        ts = seconds.get(key) or seconds.setdefault(key, _floats(key))
    values = [None if v != v else v for v in _floats(value_blob)]  # NaN: not measured
    if len(ts) != len(values):
        raise ValueError(f"a stored series has {len(ts)} seconds and {len(values)} values")
    return list(zip(ts, values, strict=False))  # checked above: strict=True took twice the time


def as_stored(
    series: Mapping[str, Iterable[tuple[float, float | None]]], names: Iterable[str]
) -> dict[str, Points]:
    """The series `names` of a run not yet stored as reading them back will give them
    (rows, then points; by name in code point order, those without points left out): what
    its trends are judged from before its row is written (analysis.kept_trends.judged)."""
    wanted = set(names)
    got = {name: points(t, v) for _, name, t, v in rows(0, series) if name in wanted}
    return {name: got[name] for name in sorted(got)}


def fill(conn: Any) -> int:
    """Pack the point rows of every run (the `series` table of versions 1 to 6) into
    run_series, then drop that table; returns how many runs. `conn`: the store's
    connection, in the caller's transaction."""
    done, last = 0, -1
    while True:
        ids = [
            r["run_id"]
            for r in conn.execute(
                "SELECT DISTINCT run_id FROM series WHERE run_id > ? ORDER BY run_id"
                f" LIMIT {FILL_RUNS}",
                (last,),
            ).fetchall()
        ]
        if not ids:
            break
        got: dict[int, dict[str, Points]] = {}
        for r in conn.execute(
            "SELECT run_id, name, t_s, value FROM series WHERE run_id BETWEEN ? AND ?",
            (ids[0], ids[-1]),
        ).fetchall():
            got.setdefault(r["run_id"], {}).setdefault(r["name"], []).append((r["t_s"], r["value"]))
        conn.executemany(
            "INSERT INTO run_series VALUES (?,?,?,?)",
            [row for run_id in ids for row in rows(run_id, got.get(run_id, {}))],
        )
        done, last = done + len(ids), ids[-1]
    conn.execute("DROP TABLE series")
    return done

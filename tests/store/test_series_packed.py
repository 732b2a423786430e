"""The packed per-second series (schema version 7): what record_run wrote as point rows
is what a packed row gives back."""

from __future__ import annotations

import math
import struct

import pytest

from blocklab.store import series_packed


def test_rows_read_back_as_the_point_rows_were() -> None:
    series = {
        "tps": [(2, 12.5), (1.0, None), (3.0, math.nan), (2.0, 14)],  # a second twice
        "empty": [],
        "latency_ms": [(0.5, math.inf), (1.5, -0.0)],
    }
    rows = series_packed.rows(7, series)
    assert [(r[0], r[1]) for r in rows] == [(7, "tps"), (7, "latency_ms")]  # none: no row
    got = {name: series_packed.points(t, v) for _, name, t, v in rows}
    # seconds ascending, the last value of a second given twice, NaN and None as None
    # (SQLite stored NaN as NULL), numbers as floats
    assert got == {"tps": [(1.0, None), (2.0, 14.0), (3.0, None)],
                   "latency_ms": [(0.5, math.inf), (1.5, -0.0)]}  # fmt: skip
    assert all(isinstance(t, float) and isinstance(v, float | None)
               for pts in got.values() for t, v in pts)  # fmt: skip


def test_blobs_are_little_endian_float64() -> None:
    ((_, _, t, v),) = series_packed.rows(1, {"tps": [(1.0, 2.5), (2.0, None)]})
    assert t == struct.pack("<2d", 1.0, 2.0)
    assert struct.unpack("<2d", v)[0] == 2.5 and math.isnan(struct.unpack("<2d", v)[1])


def test_seconds_read_once_for_the_series_that_share_them() -> None:
    rows = series_packed.rows(1, {"a": [(1.0, 1.0), (2.0, 2.0)], "b": [(1.0, 3.0), (2.0, None)]})
    seconds: dict[bytes, list[float]] = {}
    got = [series_packed.points(t, v, seconds) for _, _, t, v in rows]
    assert got == [[(1.0, 1.0), (2.0, 2.0)], [(1.0, 3.0), (2.0, None)]]
    assert list(seconds.values()) == [[1.0, 2.0]]  # one blob, read once
    with pytest.raises(ValueError, match="2 seconds and 1 values"):
        series_packed.points(rows[0][2], struct.pack("<d", 1.0))

"""blocklab.execution.interleaved's pure parts: a variant's round from its slices."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from blocklab.execution import interleaved as il
from blocklab.execution.interleaved import SliceRun


def test_totals_are_total_transactions_over_total_seconds() -> None:
    slices = [SliceRun(0, "a", 1000, 5.0, 2.0), SliceRun(3, "a", 3000, 10.0, 4.0)]
    t = il.totals(slices)
    assert (t.transactions, t.seconds) == (4000, 15.0)
    assert t.tps == pytest.approx(4000 / 15)  # not 250, the mean of 200 and 300 tps
    assert t.latency_avg_ms == pytest.approx((2.0 * 1000 + 4.0 * 3000) / 4000)


def test_totals_refuse_a_failed_slice_and_first_failure_names_it() -> None:
    slices = [SliceRun(0, "a", 10, 1.0), SliceRun(3, "a", reason="exit code 2")]
    with pytest.raises(ValueError):
        il.totals(slices)
    assert il.first_failure(slices) == "slice 3: exit code 2"
    assert il.first_failure(slices[:1]) == ""


def test_latency_is_none_when_a_slice_lacks_it() -> None:
    assert (
        il.totals([SliceRun(0, "a", 10, 1.0, None), SliceRun(1, "a", 10, 1.0, 3.0)]).latency_avg_ms
        is None
    )


def test_slices_csv(tmp_path: Path) -> None:
    path = tmp_path / "slices.csv"
    il.write_slices_csv(path, [SliceRun(1, "b", 500, 2.0), SliceRun(2, "b", reason="x")])
    rows = list(csv.DictReader(path.open()))
    assert [r["position"] for r in rows] == ["1", "2"]
    assert float(rows[0]["tps"]) == 250.0 and rows[1]["tps"] == ""


def test_machine_wide_metrics_are_left_out() -> None:
    got = il.server_metrics({"wal_bytes": 1.0, "host_cpu_busy_s": 2.0, "server_cpu_s": 3.0})
    assert got == {"wal_bytes": 1.0, "server_cpu_s": 3.0}

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


# A round of 8 slices per variant: Thue-Morse over 16 positions, written out by hand
ORDER_16 = list("ABBABAABBAABABBA")
A_POSITIONS = [0, 3, 5, 6, 9, 10, 12, 15]
B_POSITIONS = [1, 2, 4, 7, 8, 11, 13, 14]
A_XACTS = [50, 120, 80, 200, 60, 90, 110, 70]
A_SECONDS = [0.5, 1.0, 1.0, 2.0, 0.5, 1.0, 1.0, 0.5]


def _a_slices() -> list[SliceRun]:
    return [SliceRun(p, "A", x, s) for p, x, s in zip(A_POSITIONS, A_XACTS, A_SECONDS, strict=True)]


def test_aa_halves_take_the_kth_own_slice_by_thue_morse() -> None:
    assert [i for i, v in enumerate(ORDER_16) if v == "A"] == A_POSITIONS
    # k 0 3 5 6 -> half 0: (50 + 200 + 90 + 110) / (0.5 + 2 + 1 + 1) = 450 / 4.5
    # k 1 2 4 7 -> half 1: (120 + 80 + 60 + 70) / (1 + 1 + 0.5 + 0.5) = 330 / 3
    assert il.halves_tps(_a_slices()) == pytest.approx((100.0, 110.0))
    # the order the slices are given in does not matter: k counts in round order
    assert il.halves_tps(list(reversed(_a_slices()))) == pytest.approx((100.0, 110.0))


def test_aa_halves_need_a_multiple_of_4_slices() -> None:
    assert il.halves_tps(_a_slices()[:6]) is None
    assert il.halves_tps(_a_slices()[:2]) is None
    assert il.halves_tps([]) is None
    # 4 slices: k 0 3 against k 1 2
    assert il.halves_tps(_a_slices()[:4]) == pytest.approx((250 / 2.5, 200 / 2.0))


def test_after_switch_and_after_repeat_follow_the_previous_position() -> None:
    # A at 3 5 9 12 15 follows B (switch), at 6 10 follows A (repeat), 0 follows none
    switch = (120 + 80 + 60 + 110 + 70) / (1 + 1 + 0.5 + 1 + 0.5)
    repeat = (200 + 90) / (2 + 1)
    assert il.switch_repeat_tps(_a_slices(), ORDER_16) == pytest.approx((switch, repeat))
    # B: repeats at 2 8 14 ran 80 per second, switches at 1 4 7 11 13 100
    b = [SliceRun(p, "B", 80 if p in (2, 8, 14) else 100, 1.0) for p in B_POSITIONS]
    assert il.switch_repeat_tps(b, ORDER_16) == pytest.approx((100.0, 80.0))


def test_slice_metrics_leave_out_what_cannot_be_computed() -> None:
    order = list("ABBA")  # two slices each: A at 0 (no previous) and 3 (after a switch)
    a = [SliceRun(0, "A", 100, 1.0), SliceRun(3, "A", 300, 2.0)]
    assert il.slice_metrics(a, order) == {"tps_after_switch": pytest.approx(150.0)}
    b = [SliceRun(1, "B", 100, 1.0), SliceRun(2, "B", 90, 1.0)]
    assert il.slice_metrics(b, order) == {
        "tps_after_switch": pytest.approx(100.0),
        "tps_after_repeat": pytest.approx(90.0),
    }
    got = il.slice_metrics(_a_slices(), ORDER_16)
    assert sorted(got) == sorted(
        ["aa_tps_half0", "aa_tps_half1", "tps_after_switch", "tps_after_repeat"]
    )
    assert (got["aa_tps_half0"], got["aa_tps_half1"]) == pytest.approx((100.0, 110.0))


def test_aligned_servers_get_a_checkpoint_timeout_no_round_reaches() -> None:
    written = {"checkpoint_timeout": "30s", "max_wal_size": "1GB"}
    assert il.written_settings(written, aligned=False) == written
    assert il.written_settings(written, aligned=True) == {
        "checkpoint_timeout": "1d",
        "max_wal_size": "1GB",
    }


def test_unplanned_checkpoints_count_the_servers_own_inside_the_window() -> None:
    cps = [
        {"trigger": "immediate", "started_in_run": False},  # blocklab's, before the window
        {"trigger": "immediate", "started_in_run": True},  # a requested one: not the server's
        {"trigger": "wal", "started_in_run": True},  # max_wal_size reached inside
        {"trigger": "time", "started_in_run": True},
        {"trigger": "time", "started_in_run": False},  # running when the window opened
    ]
    assert il.unplanned_checkpoints(cps) == 2
    assert il.unplanned_checkpoints([]) == 0


def test_a_variant_s_disturbance_is_that_of_its_own_slices() -> None:
    """Other processes' CPU seconds and the capacity are summed over the variant's slices
    (a share of the capacity, not a mean of shares); one unmeasured slice: not measured."""
    slices = [
        SliceRun(0, "a", 10, 5.0, other_cpu_s=1.0, capacity_cpu_s=10.0),
        SliceRun(3, "a", 10, 5.0, other_cpu_s=0.0, capacity_cpu_s=30.0),
    ]
    got = il.slices_disturbance(slices)
    assert got == {"disturbance_cpu_s": 1.0, "disturbance_cpu_share": pytest.approx(0.025)}
    none = {"disturbance_cpu_s": None, "disturbance_cpu_share": None}
    assert il.slices_disturbance([*slices, SliceRun(5, "a", 10, 5.0)]) == none
    assert il.slices_disturbance([]) == none


def test_slices_csv_gives_each_slice_s_disturbance(tmp_path: Path) -> None:
    path = tmp_path / "slices.csv"
    measured = SliceRun(1, "b", 500, 2.0, other_cpu_s=0.5, capacity_cpu_s=4.0)
    il.write_slices_csv(path, [measured, SliceRun(2, "b", 1, 1.0)])
    rows = list(csv.DictReader(path.open()))
    assert [r["disturbance_cpu_share"] for r in rows] == ["0.125000", ""]

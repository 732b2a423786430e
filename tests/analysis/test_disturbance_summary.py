"""The summary's line on disturbed runs (blocklab.analysis.disturbance): the pure lines,
and the summary and its printed table on a synthetic results database."""

from __future__ import annotations

import io
from pathlib import Path

from helpers import small_experiment
from rich.console import Console

from blocklab.analysis import disturbance
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import print_summary
from blocklab.store import ResultsDB, RunRecord

SHARE = disturbance.CPU_SHARE


def test_disturbed_runs_are_counted_per_variant_with_their_range() -> None:
    got = disturbance.lines(
        {
            "bs=4k": [0.12, 0.01, 0.40, 0.049, 0.20, 0.0, 0.0, 0.0],
            "bs=8k": [0.05, 0.30, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "bs=16k": [0.0] * 8,
        }
    )
    assert got == [
        "disturbed runs: bs=4k 3 of 8 (other processes used 12-40 % of the CPUs), "
        "bs=8k 2 of 8 (other processes used 5-30 % of the CPUs): rerun on a quiet machine"
    ]


def test_quiet_runs_say_so_and_unmeasured_ones_say_nothing_or_are_counted() -> None:
    assert disturbance.lines({"a": [0.01, 0.049], "b": [0.0]}) == [
        "no run disturbed (other processes < 5 % of the CPUs, at most 4.9 %)"
    ]
    assert disturbance.lines({"a": [None, None], "b": []}) == []
    assert disturbance.lines({"a": [0.02, None], "b": [0.5]}) == [
        "disturbed runs: b 1 of 1 (other processes used 50 % of the CPUs): rerun on a quiet "
        "machine; 1 of 3 runs not measured"
    ]
    assert not disturbance.disturbed(None) and not disturbance.disturbed(0.0499)
    assert disturbance.disturbed(disturbance.DISTURBED_CPU_SHARE)


def test_the_device_line_names_the_largest_share_of_other_processes_bytes() -> None:
    cpu = {"a": [0.0], "b": [0.0]}
    assert disturbance.lines(cpu, {"a": [0.02, None], "b": [0.125, 0.0]}) == [
        "no run disturbed (other processes < 5 % of the CPUs, at most 0.0 %)",
        "other processes' I/O on the disk under the loop devices: at most 12.5 % of its bytes (b)",
    ]
    assert disturbance.lines(cpu, {"a": [None], "b": []}) == disturbance.lines(cpu)


def _store(db: ResultsDB, shares: dict[str, list[float | None]]) -> None:
    """Rounds 1..n of two variants, ok, with the given shares; a failed run of `new` in
    an extra round with a large share (failed runs are not judged)."""
    small_experiment(db, "ex", "ref", [("ref", "ref", "{}", {}), ("new", "new", "{}", {})])
    for pos, (vid, values) in enumerate(shares.items()):
        for rnd, share in enumerate(values, start=1):
            metrics = {} if share is None else {SHARE: share, "disturbance_cpu_s": 9.0}
            if vid == "new" and share is not None:
                metrics[disturbance.DEVICE_SHARE] = share / 2
            rec = RunRecord("ex", vid, rnd, pos, "ok", "t0", "t1", tps=1000.0 + rnd)
            rec.metrics = metrics
            db.record_run(rec)
    bad = RunRecord("ex", "new", 99, 1, "failed", "t0", "t1", reason="boom")
    bad.metrics = {SHARE: 0.9}
    db.record_run(bad)


def _printed(db: ResultsDB) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    print_summary(console, summarize_experiment(db, "ex"))
    return " ".join(console.export_text().split())


def test_the_summary_names_disturbed_runs(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "r.db")
    _store(db, {"ref": [0.01, 0.25, 0.02, 0.0], "new": [0.0, 0.08, 0.12, 0.03]})
    expected = (
        "disturbed runs: ref 1 of 4 (other processes used 25 % of the CPUs), "
        "new 2 of 4 (other processes used 8-12 % of the CPUs): rerun on a quiet machine"
    )
    device = "other processes' I/O on the disk under the loop devices: at most 6.0 % of its"
    assert summarize_experiment(db, "ex").disturbance == [expected, device + " bytes (new)"]
    assert expected in _printed(db) and device in _printed(db)


def test_a_quiet_experiment_says_it_was_checked_and_an_unchecked_one_says_nothing(
    tmp_path: Path,
) -> None:
    quiet = ResultsDB(tmp_path / "q.db")
    _store(quiet, {"ref": [0.01, 0.02], "new": [0.0, 0.031]})
    line = "no run disturbed (other processes < 5 % of the CPUs, at most 3.1 %)"
    assert summarize_experiment(quiet, "ex").disturbance[0] == line
    assert line in _printed(quiet)
    old = ResultsDB(tmp_path / "o.db")
    _store(old, {"ref": [None, None], "new": [None, None]})
    assert summarize_experiment(old, "ex").disturbance == []
    assert "disturb" not in _printed(old)

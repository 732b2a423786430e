"""Whole checkpoint cycles (blocklab.execution.cycles) on the recorded server logs of
tests/data/logs: where a window opens, when it is closed, what is recorded; the settings
it reads; the log tail that watches a growing log."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.execution import cycles
from blocklab.probes.checkpoints import Checkpoint, parse_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def _pg18() -> list[Checkpoint]:
    return parse_log((LOGS / "pg18.log").read_text())


def test_guc_seconds() -> None:
    assert cycles.guc_seconds("30s") == 30
    assert cycles.guc_seconds("5min") == 300
    assert cycles.guc_seconds("300") == 300
    assert cycles.guc_seconds("1h") == 3600
    assert cycles.guc_seconds("1500ms") == 1.5
    assert cycles.guc_seconds("'2min'") == 120
    assert cycles.guc_seconds("soon") is None


def test_checkpoint_timeout_default_and_bad_value() -> None:
    assert cycles.checkpoint_timeout_s({}) == 300
    assert cycles.checkpoint_timeout_s({"checkpoint_timeout": "45s"}) == 45
    with pytest.raises(UserError, match="matrix.settings.checkpoint_timeout: 'x'"):
        cycles.checkpoint_timeout_s({"checkpoint_timeout": "x"})


def test_max_timeout_keeps_a_run_within_an_hour() -> None:
    assert cycles.max_timeout_s(1) == 1800
    assert cycles.max_timeout_s(2) == 1200
    assert cycles.max_timeout_s(20) == pytest.approx(171.43, abs=0.01)


def test_the_window_opens_at_the_first_checkpoint_after_the_lead_in_began() -> None:
    cps = _pg18()
    first = cycles.opening(cps, 1795319492.0)
    assert first is not None and first.start_epoch == 1795319493.513
    assert cycles.opening(cps, 1795319541.0) is None  # nothing after the last shutdown


def test_shutdown_and_recovery_checkpoints_open_no_window() -> None:
    cps = _pg18()
    # after 1795319533: a shutdown, a wal one left unfinished by the kill, end-of-recovery
    found = cycles.opening(cps, 1795319533.0)
    assert found is not None and found.start_epoch == 1795319535.764
    assert cycles.opening(cps, 1795319536.0) is None


def test_boundaries_close_cycles_one_checkpoint_start_each() -> None:
    cps, opened = _pg18(), 1795319493.513
    # 496.6 ... 529.4 (8 wal), the immediate one at 530.4 and the wal one at 535.8
    assert cycles.boundaries_seen(cps, opened) == 10
    seen_by_500 = [c for c in cps if c.start_epoch is not None and c.start_epoch < 1795319500]
    assert cycles.boundaries_seen(seen_by_500, opened) == 1


def test_cycles_of_a_recorded_run() -> None:
    cps, opened, origin = _pg18(), 1795319493.513, 1795319493.9
    got = cycles.cycles_of(cps, opened, origin, wanted=2)
    assert got == [
        {
            "start_s": -0.387,
            "end_s": 2.705,
            "length_s": 3.092,
            "checkpoint_end_s": 2.369,
            "trigger": "wal",
            "timed": False,
            "requested_by_wal": True,
        },
        {
            "start_s": 2.705,
            "end_s": 6.41,
            "length_s": 3.705,
            "checkpoint_end_s": 5.879,
            "trigger": "wal",
            "timed": False,
            "requested_by_wal": True,
        },
    ]
    assert cycles.cycle_metrics(got) == {
        "checkpoint_cycles": 2,
        "checkpoint_cycles_timed": 0,
        "checkpoint_cycles_wal": 2,
    }


def test_a_cycle_is_whole_only_when_the_next_checkpoint_started() -> None:
    cps = [c for c in _pg18() if c.start_epoch is not None and c.start_epoch < 1795319497]
    # three starts from 491.03 on: two whole cycles, the third still open
    assert len(cycles.cycles_of(cps, 1795319491.03, 1795319491.0, wanted=5)) == 2


def test_timed_cycles_are_told_apart() -> None:
    cps = [
        Checkpoint("checkpoint", 100.0, 127.0, ("time",)),
        Checkpoint("checkpoint", 130.0, 150.0, ("wal",)),
        Checkpoint("checkpoint", 152.0, None, ("time",)),
    ]
    got = cycles.cycles_of(cps, 100.0, 100.5, wanted=2)
    assert [(c["trigger"], c["timed"], c["length_s"]) for c in got] == [
        ("time", True, 30.0),
        ("wal", False, 22.0),
    ]
    assert cycles.cycle_metrics(got)["checkpoint_cycles_timed"] == 1


def test_log_tail_reads_whole_lines_as_the_log_grows(tmp_path: Path) -> None:
    text = (LOGS / "pg18.log").read_bytes()
    cut = text.index(b"checkpoint starting: wal", 200) + 5  # in the middle of a line
    log = tmp_path / "server.log"
    log.write_bytes(b"before the run\n" + text[:cut])
    tail = cycles.LogTail(log, len(b"before the run\n"))
    before = len(tail.checkpoints())
    with open(log, "ab") as f:
        f.write(text[cut:])
    after = tail.checkpoints()
    assert before < len(after)
    assert [c.start_epoch for c in after] == [c.start_epoch for c in _pg18()]

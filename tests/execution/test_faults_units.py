"""The pure parts of the reliability machinery: kill point specs, grouped failure
reasons, the no-space reason, the run lock and the results-disk guard."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from blocklab import faults
from blocklab.analysis.summary import grouped_reasons
from blocklab.errors import BusyError, ResultsFullError
from blocklab.execution import run_lock
from blocklab.execution.runner import no_space_on
from blocklab.store import results_space


def test_kill_point_specs() -> None:
    assert faults.parse("") is None
    assert faults.parse("measure") == ("measure", 0.0)
    assert faults.parse("warmup+0.5") == ("warmup", 0.5)
    with pytest.raises(ValueError, match="unknown step 'nowhere'.*allowed: build"):
        faults.parse("nowhere")
    with pytest.raises(ValueError, match="must not be negative"):
        faults.parse("measure+-1")


def test_a_step_not_named_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "report")
    faults.step("measure")  # still alive
    monkeypatch.delenv(faults.ENV)
    faults.step("report")


def test_reasons_repeated_over_rounds_are_reported_once() -> None:
    failed = [(3, "not run: x"), (1, "start failed"), (2, "not run: x"), (4, "other")]
    assert grouped_reasons(failed) == [
        "round 1: start failed",
        "rounds 2, 3: not run: x",
        "round 4: other",
    ]


def _target(facts: dict[str, Any]) -> Any:
    return SimpleNamespace(storage_facts=facts, cluster=SimpleNamespace(data_dir=Path("/d")))


def test_no_space_names_the_volume_the_server_wrote_to() -> None:
    facts = {
        "data": {"device": "/dev/loop3", "mount_point": "/m/data"},
        "wal": {"device": "/dev/loop4", "mount_point": "/m/wal"},
    }
    wal_line = (
        '1795441835.793 [17116] PANIC:  could not write to file "pg_wal/xlogtemp.1": '
        "No space left on device"
    )
    assert no_space_on(_target(facts), f"ok\n{wal_line}\n") == (
        "no space left on /dev/loop4 (mounted at /m/wal, the wal volume): PANIC:  could not "
        'write to file "pg_wal/xlogtemp.1": No space left on device'
    )
    heap = 'ERROR:  could not extend file "base/5/16384": No space left on device'
    assert no_space_on(_target(facts), heap).startswith("no space left on /dev/loop3 (")
    assert no_space_on(_target({"data": {}}), wal_line).startswith(
        "no space left on ? (mounted at /d"
    )
    assert no_space_on(_target(facts), "all fine") == ""


def test_a_second_run_of_the_same_experiment_is_refused(tmp_path: Path) -> None:
    with run_lock.held(tmp_path, "exp/1", "here"):
        assert run_lock.lock_path(tmp_path, "exp/1").read_text().strip().isdigit()
        with pytest.raises(BusyError, match=r"'exp/1' in here is being run by another .*PID \d+"):
            with run_lock.held(tmp_path, "exp/1", "here"):
                pass
        with run_lock.held(tmp_path, "another", "here"):  # another experiment: fine
            pass
    with run_lock.held(tmp_path, "exp/1", "here"):  # released with its holder
        pass


def test_the_results_guard_names_a_full_disk(tmp_path: Path) -> None:
    with pytest.raises(ResultsFullError, match="no space left on the results directory"):
        with results_space.guard(tmp_path):
            raise sqlite3.OperationalError("database or disk is full")
    # ENOSPC while the results directory has room: another disk filled, not ours to name
    with pytest.raises(OSError, match="No space left"):
        with results_space.guard(tmp_path):
            raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        with results_space.guard(tmp_path):
            raise sqlite3.OperationalError("database is locked")
    results_space.check(tmp_path)  # the test machine has 8 MiB free


def test_free_space_of_a_raw_directory_not_made_yet(tmp_path: Path) -> None:
    """A PostgreSQL store's raw directory exists only after its first run: the room is
    that of the file system it will be made on (the fleet's agents met this)."""
    from blocklab.store import results_space

    later = tmp_path / "raw" / "not" / "yet"
    assert results_space.free_bytes(later) > 0
    results_space.check(later)  # no FileNotFoundError

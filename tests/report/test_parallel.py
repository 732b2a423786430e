"""blocklab.report.parallel: work begun in a forked process while the caller goes on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.report import parallel


def test_a_begun_job_runs_in_another_process_and_its_result_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    with parallel.begun(lambda forked: (forked, os.getpid())) as result:
        forked, pid = result()
    assert forked and pid != os.getpid()


def test_a_begun_jobs_error_is_raised_where_its_result_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def fails(forked: bool) -> None:
        raise UserError("--results: no such database")

    with parallel.begun(fails) as result, pytest.raises(UserError, match="no such database"):
        result()


@pytest.mark.parametrize("cores, fork", [(1, True), (2, False)])
def test_without_a_second_core_or_fork_the_job_is_done_here_once_when_asked(
    monkeypatch: pytest.MonkeyPatch, cores: int, fork: bool
) -> None:
    monkeypatch.setattr(parallel, "workers", lambda: cores)
    calls = []

    def job(forked: bool) -> int:
        calls.append(forked)
        return os.getpid()

    with parallel.begun(job, fork=fork) as result:
        assert calls == []  # not before it is asked for
        assert result() == os.getpid() and result() == os.getpid()
    assert calls == [False]


def test_workers_take_sigterms_default_whatever_handler_the_caller_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pool.terminate ends the workers with SIGTERM. A CI run hung until pytest's timeout
    when an idle worker outlived it, forked from a pytest worker that had a SIGTERM
    handler of its own; the workers now take the default, whatever they inherit."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def default(*_: object) -> bool:
        return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with parallel.begun(default) as got:
            assert got() is True
        with parallel.started(default, 400) as got:
            assert got() == [True, True]
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # this process's kept
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_leaving_the_block_lets_the_work_end_instead_of_killing_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """begun and started end their workers by close and join once the work is done, not
    by terminate: a worker killed while it held a lock of the pool's queues left the
    pool's exit waiting for that lock (a CI run's report test, 425 s)."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def job(forked: bool) -> None:
        time.sleep(0.5)  # still at work when the block ends
        (tmp_path / "job").write_text(str(os.getpid()))

    def work(k: int, lo: int, hi: int) -> None:
        time.sleep(0.5)
        (tmp_path / f"slice-{k}").write_text(str(os.getpid()))

    with parallel.begun(job):
        pass  # its result never asked for
    with parallel.started(work, 400):
        pass
    written = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert sorted(written) == ["job", "slice-0", "slice-1"]
    assert str(os.getpid()) not in written.values()  # done in the workers, to the end


STOPPED_WHILE_MADE = """
import os, signal, threading
from blocklab import proc
from blocklab.report import parallel
parallel.workers = lambda: 2
start = threading.Thread.start
def stop_as_it_starts(thread):  # the stop comes as the pool's own threads start
    start(thread)
    if "_handle_workers" in repr(getattr(thread, "_target", None)):
        os.kill(os.getpid(), signal.SIGTERM)
threading.Thread.start = stop_as_it_starts
try:
    with proc.interruptible(), parallel.begun(lambda forked: 1) as result:
        result()
except KeyboardInterrupt:
    print("stopped")
"""


def test_a_stop_while_a_pool_is_made_leaves_no_worker_behind(tmp_path: Path) -> None:
    """SIGTERM (as a service manager stops `serve --watch`) while the summaries' pool is
    being made: the process stops and exits, and no process it forked is left after it
    (found by a mark in their environment). Without the stop held until the pool's exit
    is armed, the stopped process did not exit (seven runs of eight), and workers of its
    pool were left waiting on the pool's queue."""
    script, mark = tmp_path / "stopped.py", f"blocklab-test-{os.getpid()}-{time.time_ns()}"
    script.write_text(STOPPED_WHILE_MADE)
    env = {**os.environ, "BLOCKLAB_TEST_MARK": mark}
    try:
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:  # its exit waited for the pool (killed by run)
        done = None
    time.sleep(1.0)  # a worker forked at its exit would be up by now
    left = _marked(mark)
    for pid in left:  # ended by PID whatever the outcome
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert done is not None, "the stopped process had not exited after 60 s"
    assert done.stdout.strip() == "stopped", done.stderr[-2000:]
    assert left == []


def _marked(mark: str) -> list[int]:
    """The PIDs of the processes whose environment holds BLOCKLAB_TEST_MARK=`mark`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"BLOCKLAB_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    return found

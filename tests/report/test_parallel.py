"""blocklab.report.parallel: work begun in a forked process while the caller goes on."""

from __future__ import annotations

import os
import sys

import pytest

from blocklab import proc
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


SCENARIO = """
import os, signal, sys
from blocklab.report import parallel
parallel.workers = lambda: 2
signal.signal(signal.SIGTERM, lambda *_: None)  # a handler that returns (an event loop's)
with parallel.begun(lambda forked: os.getpid()) as got:
    assert got() != os.getpid()
with parallel.started(lambda k, lo, hi: (lo, hi), 400) as got:
    assert got() == [(0, 200), (200, 400)]
print("ended")
"""


def test_workers_end_on_the_pools_exit_whatever_sigterm_handler_the_caller_has() -> None:
    """Pool.terminate ends the workers with SIGTERM: under a handler that returns, which
    they inherit, an idle worker outlived it and the pool's exit waited for it (a CI run
    hung so until pytest's timeout)."""
    got = proc.run([sys.executable, "-c", SCENARIO], timeout_s=60)
    assert got.stdout.strip() == "ended"

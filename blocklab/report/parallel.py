"""Work on contiguous slices of a list in forked worker processes (the report's run pages:
thousands of pages, each rendered in Python, on every core). The work is a closure the
children inherit by fork; only slice bounds and results cross between processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

MAX_WORKERS = 8
STOPS = {signal.SIGINT, signal.SIGTERM}  # a report's stop: Ctrl-C, a service manager's
T = TypeVar("T")
_WORK: Callable[[int, int, int], Any] | None = None


def workers() -> int:
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def slices(n_items: int, n: int) -> list[tuple[int, int, int]]:
    """(k, lo, hi): n contiguous slices covering range(n_items), in order."""
    n = max(1, min(n, n_items))
    bounds = [n_items * k // n for k in range(n + 1)]
    return [(k, bounds[k], bounds[k + 1]) for k in range(n)]


def _default_sigterm() -> None:
    """A worker's first step: SIGTERM ends it, whatever handler the forking process had
    (Pool.terminate ends the workers so). Under a handler inherited from a pytest worker
    (the likeliest: tests/prebuild.main's, which test_prebuild left there until it put the
    caller's back; not proven), an idle worker outlived terminate() and the pool's exit
    waited for it until pytest's timeout."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # held while the pool was made


@contextlib.contextmanager
def _fork_pool(n: int) -> Iterator[Any]:
    """A pool of `n` forked workers, made with Ctrl-C and SIGTERM held (blocked) until
    its block is entered, so that a stop ends it by the block's exit (terminate). A stop
    that comes while the pool is being made raises inside Pool(), after its threads have
    started and before its exit is armed: nothing ends that pool. At the process's exit
    multiprocessing ends its worker, its still running thread forks another in its place
    (Pool._handle_workers, _maintain_pool), and that one waits on the pool's queue for
    good, its parent gone: the likeliest cause of a `serve --watch` worker found so
    after a CI-like test run (its stack, by py-spy, was that one's)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        pool = multiprocessing.get_context("fork").Pool(n, _default_sigterm)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    with pool:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a stop held comes now
        yield pool


def _call(args: tuple[int, int, int]) -> Any:
    assert _WORK is not None
    return _WORK(*args)


def map_slices(
    work: Callable[[int, int, int], Any], n_items: int, *, min_per_worker: int = 200
) -> list[Any]:
    """work(k, lo, hi) for contiguous slices of range(n_items), results in slice order;
    in forked processes when there are cores and items enough, else here."""
    with started(work, n_items, min_per_worker=min_per_worker) as results:
        return results()


@contextlib.contextmanager
def started(
    work: Callable[[int, int, int], Any], n_items: int, *, min_per_worker: int = 200
) -> Iterator[Callable[[], list[Any]]]:
    """map_slices begun now: the worker processes work while this one goes on (the
    report's summary, its CSV files); the call yielded waits for their results. Without
    workers, the work is done here when the results are asked for. Leaving the block waits
    for the work and ends the workers (after an error, ends them, done or not)."""
    global _WORK
    n = min(workers(), n_items // min_per_worker)
    if n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield lambda: [work(*s) for s in slices(n_items, 1)] if n_items else []
        return
    _WORK = work
    try:
        with _fork_pool(n) as pool:
            pending = pool.map_async(_call, slices(n_items, n))
            yield pending.get
            _wind_down(pool, pending)
    finally:
        _WORK = None


@contextlib.contextmanager
def begun(job: Callable[[bool], T], *, fork: bool = True) -> Iterator[Callable[[], T]]:
    """job(forked=True) begun now in one forked process when there is a second core,
    while this one goes on (the report's summary, beside its CSV files and lists); the
    call yielded waits for its result (a raised error is raised there). Without a second
    core, or without `fork`, job(forked=False) is done here when the result is first
    asked for. Leaving the block waits for the job and ends the process (after an
    error, ends it, done or not)."""
    global _WORK
    if not fork or workers() < 2 or "fork" not in multiprocessing.get_all_start_methods():
        done: list[T] = []

        def here() -> T:
            if not done:
                done.append(job(False))
            return done[0]

        yield here
        return

    def forked(k: int, lo: int, hi: int) -> T:
        return job(True)

    _WORK = forked  # before the fork, which happens as the pool is made: the child has it
    try:
        with _fork_pool(1) as pool:
            pending = pool.apply_async(_call, ((0, 0, 1),))
            yield pending.get
            _wind_down(pool, pending)
    finally:
        _WORK = None


def _wind_down(pool: Any, pending: Any) -> None:
    """End a pool whose block ended without an error: its work done, then its workers
    told to stop and waited for (close, join), not killed. Pool.terminate (the block's
    exit, and still the way out after an error) kills the workers, and one killed while
    it held a lock of the pool's queues, writing its result or taking the next task,
    left the pool's exit waiting for that lock: a CI run's report test waited 425 s, the
    exit's task handler blocked on a semaphore of the queue a terminated worker wrote."""
    pending.wait()
    pool.close()
    pool.join()

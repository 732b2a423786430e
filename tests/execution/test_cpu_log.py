"""The placement's CPU log (blocklab.execution.placement.CpuLog, driven by
blocklab.execution.controls.CpuSampler): what it reports, and what each look reads (issue
33: it read every thread's status and stat, and listed task/ twice, 4 times a second).

Most tests use a /proc tree written to disk from this process's own status file (a
recorded fixture, changed look by look) and count, by spying on the real os.open, os.pread,
os.close and open, which files the log opens and reads; the others read the real /proc."""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from blocklab import proc
from blocklab.execution import controls, placement

RECORDED_STATUS = Path("/proc/self/status").read_text()  # a real status file, 1 to 2 kB


def _status(allowed: str, switches: int) -> str:
    lines = []
    for line in RECORDED_STATUS.splitlines():
        key = line.split(":", 1)[0]
        if key == "Cpus_allowed_list":
            line = f"{key}:\t{allowed}"
        elif key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            line = f"{key}:\t{switches if key[0] == 'v' else 0}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _stat(tid: int, comm: str, cpu: int) -> str:
    fields_after = ["S"] + [str(i) for i in range(4, 39)] + [str(cpu)] + ["0"] * 13
    return f"{tid} ({comm}) " + " ".join(fields_after) + "\n"


class FakeProc:
    """/proc/PID/task/TID/{stat,schedstat,status,children} on disk. `ran()` makes a thread
    run (its schedstat and context switches grow) and sets the CPU it last ran on."""

    def __init__(self, root: Path, schedstat: bool = True) -> None:
        self.root, self.schedstat = root, schedstat
        self.runs: Counter[int] = Counter()

    def thread(self, pid: int, tid: int, comm: str, allowed: str, cpu: int) -> None:
        d = self.root / str(pid) / "task" / str(tid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "stat").write_text(_stat(tid, comm, cpu))
        (d / "status").write_text(_status(allowed, self.runs[tid]))
        (d / "children").write_text("")
        if self.schedstat:
            (d / "schedstat").write_text(f"{self.runs[tid] * 1000} 5 {self.runs[tid]}\n")

    def ran(self, pid: int, tid: int, comm: str, allowed: str, cpu: int) -> None:
        self.runs[tid] += 1
        self.thread(pid, tid, comm, allowed, cpu)

    def ended(self, pid: int, tid: int) -> None:
        """Its files read nothing (the real ones fail with ESRCH)."""
        for f in (self.root / str(pid) / "task" / str(tid)).iterdir():
            f.write_text("")


def spy(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], set[int]]:
    """Counts of 'open NAME' and 'pread NAME' by the log, and the descriptors it has open:
    the real calls are made, only recorded."""
    counts: Counter[str] = Counter()
    open_fds: dict[int, str] = {}
    real_open, real_pread, real_close = os.open, os.pread, os.close

    def os_open(path: Any, flags: int, *a: Any, **k: Any) -> int:
        fd = real_open(path, flags, *a, **k)
        open_fds[fd] = Path(path).name
        counts[f"open {open_fds[fd]}"] += 1
        return fd

    def pread(fd: int, n: int, offset: int) -> bytes:
        counts[f"pread {open_fds.get(fd, '?')}"] += 1
        return real_pread(fd, n, offset)

    def close(fd: int) -> None:
        open_fds.pop(fd, None)
        real_close(fd)

    def py_open(path: Any, *a: Any, **k: Any) -> Any:
        counts[f"open {Path(path).name}"] += 1
        return builtins.open(path, *a, **k)

    monkeypatch.setattr(placement.os, "open", os_open)
    monkeypatch.setattr(placement.os, "pread", pread)
    monkeypatch.setattr(placement.os, "close", close)
    monkeypatch.setattr(placement, "open", py_open, raising=False)
    return counts, open_fds.keys()  # type: ignore[return-value]


def test_status_is_read_once_per_thread_not_at_each_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 looks at 3 threads of 2 processes: status (Cpus_allowed_list) is read when a
    thread is first seen and at close(), stat only after the thread ran, each file opened
    once and re-read with pread, and all are closed at the end. Reading status and stat at
    every look (the old log: 60 of each) fails here."""
    fake = FakeProc(tmp_path)
    for pid, tid, comm, allowed in ((7, 7, "postgres", "0"), (9, 9, "pgbench", "0-1")):
        fake.thread(pid, tid, comm, allowed, 0)
    fake.thread(9, 10, "pgbench", "0-1", 0)
    counts, open_fds = spy(monkeypatch)
    log = placement.CpuLog(root=tmp_path)
    for look in range(20):
        if look % 2:  # the postmaster runs every other look, pgbench's second thread at each
            fake.ran(7, 7, "postgres", "0", 0)
        if look:
            fake.ran(9, 10, "pgbench", "0-1", 1 if look > 10 else 0)
        log.sample({7: [7], 9: [9, 10]})
    assert counts["open status"] == 3  # the baselines
    assert counts["pread stat"] == 3 + 10 + 19  # the baselines, then only where it ran
    assert counts["pread schedstat"] == 3 * 20
    assert (counts["open stat"], counts["open schedstat"], counts["open children"]) == (3, 3, 3)
    assert len(open_fds) == 9
    log.close()
    assert counts["open status"] == 6 and not open_fds  # the last look at the allowed lists
    assert log.to_json() == [
        {"pid": 7, "name": "postgres", "allowed_cpus": "0", "ran_on_cpus": "0"},
        {"pid": 9, "name": "pgbench", "allowed_cpus": "0-1", "ran_on_cpus": "0-1"},
    ]


def _pgbench_with_two_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs: Any
) -> tuple[FakeProc, Counter[str], set[int], placement.CpuLog]:
    """pid 9, threads 9 and 10, on CPU 1; the spy; a log of the fake tree, its first look."""
    fake = FakeProc(tmp_path)
    fake.thread(9, 9, "pgbench", "1", 1)
    fake.thread(9, 10, "pgbench", "1", 1)
    counts, open_fds = spy(monkeypatch)
    log = placement.CpuLog(root=tmp_path, **kwargs)
    log.sample({9: [9, 10]})
    return fake, counts, open_fds, log


def test_a_thread_that_ends_has_its_files_closed_at_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, _, open_fds, log = _pgbench_with_two_threads(tmp_path, monkeypatch)
    assert len(open_fds) == 6
    fake.ended(9, 10)  # gone from the listing: its files are closed
    log.sample({9: [9]})
    assert len(open_fds) == 3
    fake.ended(9, 9)  # still listed (a stale walk) but its files read nothing: closed
    log.sample({9: [9]})
    assert not open_fds and not log.seen
    assert log.allowed == {9: (1,)}
    log.sample({})  # gone from the trees: nothing of it is kept but what is reported
    assert not log._tasks and not log._listed and not log._relist


def test_a_process_that_execs_is_logged_under_its_new_name_and_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """taskset starts on any CPU, places itself, then exec()s pgbench under the same PID:
    the log names pgbench and keeps only the CPUs pgbench ran on (CI caught a sample
    taken before the exec: the driver was logged as 'taskset'), with pgbench's allowed
    CPUs, read again after the exec."""
    fake = FakeProc(tmp_path)
    fake.thread(7, 7, "taskset", "0-1", 0)  # the baseline, before it placed itself
    counts, _ = spy(monkeypatch)
    log = placement.CpuLog(root=tmp_path)
    log.sample({7: [7]})
    fake.ran(7, 7, "taskset", "1", 0)  # ran on CPU 0 before the exec
    log.sample({7: [7]})
    assert log.seen == {7: {0}}
    fake.ran(7, 7, "pgbench", "1", 1)  # the new program's baseline
    log.sample({7: [7]})
    fake.ran(7, 7, "pgbench", "1", 1)
    log.sample({7: [7]})
    assert counts["open status"] == 2  # first seen, after the exec
    log.close()
    assert log.to_json() == [{"pid": 7, "name": "pgbench", "allowed_cpus": "1", "ran_on_cpus": "1"}]


def test_a_cpu_outside_the_allowed_list_reads_the_list_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is placed by PID after it started: a thread first seen before that has
    the old list, and the CPU it then runs on is outside it; status is read again."""
    fake = FakeProc(tmp_path)
    fake.thread(5, 5, "postgres", "1", 1)
    counts, _ = spy(monkeypatch)
    log = placement.CpuLog(root=tmp_path)
    log.sample({5: [5]})
    fake.ran(5, 5, "postgres", "0", 0)
    log.sample({5: [5]})
    assert counts["open status"] == 2 and log.allowed == {5: (0,)} and log.seen == {5: {0}}
    fake.ran(5, 5, "postgres", "0", 0)
    log.sample({5: [5]})
    assert counts["open status"] == 2


def test_without_schedstat_the_context_switches_in_status_tell_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeProc(tmp_path, schedstat=False)
    fake.thread(3, 3, "postgres", "0", 0)
    counts, _ = spy(monkeypatch)
    log = placement.CpuLog(root=tmp_path)
    log.sample({3: [3]})
    log.sample({3: [3]})
    assert not log.seen
    fake.ran(3, 3, "postgres", "0", 0)
    log.sample({3: [3]})
    assert log.seen == {3: {0}} and counts["pread stat"] == 2
    assert counts["open status"] == 3  # on such a kernel, at each look


def test_beyond_the_budget_of_open_files_a_thread_is_read_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, counts, open_fds, log = _pgbench_with_two_threads(
        tmp_path, monkeypatch, max_fds=len(placement.KEPT_OPEN)
    )
    fake.ran(9, 10, "pgbench", "1", 1)
    log.sample({9: [9, 10]})
    assert len(open_fds) == 3  # the first thread's
    assert counts["open schedstat"] == 1 + 2 and log.seen == {9: {1}}
    log.close()
    assert not open_fds


def test_a_task_dir_is_listed_again_only_after_one_of_its_threads_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a thread that runs makes a new one: a process none of whose threads ran since
    the last listing keeps its list (listing task/ at each look cost as much as the rest)."""
    fake = FakeProc(tmp_path)
    fake.thread(9, 9, "pgbench", "1", 1)
    listed: Counter[str] = Counter()
    real_listdir = os.listdir

    def listdir(path: Any) -> list[str]:
        listed[str(path)] += 1
        return real_listdir(path)

    monkeypatch.setattr(proc.os, "listdir", listdir)
    log = placement.CpuLog(root=tmp_path)
    for _ in range(5):
        log.sample({9: log.threads(9)})
    assert listed == {str(tmp_path / "9" / "task"): 1}
    fake.ran(9, 9, "pgbench", "1", 1)  # it ran and made a thread
    fake.thread(9, 10, "pgbench", "1", 1)
    log.sample({9: log.threads(9)})  # the list of before: seen to run
    assert 10 not in log._tasks
    log.sample({9: log.threads(9)})  # listed again
    assert 10 in log._tasks and sum(listed.values()) == 2
    for _ in range(3):  # not looked at: listed at each walk after the first
        log.sample({9: log.threads(9)}, walked_only=(9,))
    assert sum(listed.values()) == 4
    log.close()


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_real_proc_of_this_process_each_file_opened_once_none_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This process's threads, one of them busy: it is seen on CPUs it may use, each of
    its files is opened once over 10 looks, and a thread that ended and the log's end
    leave no descriptor open."""
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(1000))

    worker = threading.Thread(target=busy)
    idle = threading.Thread(target=stop.wait)
    worker.start()
    idle.start()
    before = _fds()
    counts, _ = spy(monkeypatch)
    log = placement.CpuLog()
    try:
        for _ in range(10):
            log.sample({os.getpid(): proc.task_ids(os.getpid())})
            time.sleep(0.01)
    finally:
        stop.set()
        worker.join()
        idle.join()
    threads = len(log._tasks)
    assert threads >= 3 and counts["open status"] == threads
    assert counts["open stat"] == counts["open schedstat"] == threads
    assert worker.native_id in log._tasks
    deadline = time.monotonic() + 10  # the OS threads end a moment after join()
    while {worker.native_id, idle.native_id} & set(proc.task_ids(os.getpid())):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    log.sample({os.getpid(): proc.task_ids(os.getpid())})  # the two threads ended
    assert worker.native_id not in log._tasks and len(log._tasks) == threads - 2
    log.close()
    assert _fds() == before
    assert log.seen[os.getpid()] <= set(os.sched_getaffinity(0))
    assert log.allowed[os.getpid()] == tuple(sorted(os.sched_getaffinity(0)))


def test_the_sampler_walks_both_trees_and_closes_its_files() -> None:
    """A busy child of this process (the driver's place): found by the walk, logged with
    the CPUs it ran on; this process itself is walked, not logged; nothing left open."""
    before = _fds()
    child = proc.spawn(["sh", "-c", "while :; do :; done"], stdout_path=Path("/dev/null"))
    try:
        with controls.CpuSampler(server_pid=child.pid) as sampler:
            deadline = time.monotonic() + 10
            while child.pid not in sampler.log.seen:
                assert time.monotonic() < deadline, "the busy child was not seen to run"
                time.sleep(0.05)
        walker = controls.CpuSampler(server_pid=child.pid)
        assert {child.pid, os.getpid()} <= set(walker.tasks())
        walker.log.close()
    finally:
        proc.terminate(child.pid, grace_s=2)
    (record,) = [r for r in sampler.to_json() if r["pid"] == child.pid]
    assert record["name"] == "sh"
    assert os.getpid() not in sampler.log.names
    assert _fds() == before

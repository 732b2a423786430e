"""The one parser of /proc/<pid>/stat (blocklab.proc.parse_pid_stat) and the process-tree
walk the probes use instead of a scan of /proc (blocklab.proc.child_pids, tree_pids)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.execution import placement
from blocklab.probes import disturbance
from blocklab.probes.sampler import CLK_TCK, pid_cpu, read_pid_stats, read_server_cpu_s

# fields 3.. of a recorded line whose field n holds n (so a miscount shows), field 39 = 1
_REST = ["S"] + [str(n) for n in range(4, 39)] + ["1"] + ["0"] * 13
RECORDED = "4242 (postgres: x (y) z) " + " ".join(_REST) + "\n"


def test_a_recorded_line_whose_command_name_holds_spaces_and_parentheses() -> None:
    s = proc.parse_pid_stat(RECORDED)
    assert (s.pid, s.comm, s.state, s.ppid) == (4242, "postgres: x (y) z", "S", 4)
    assert (s.utime_ticks, s.stime_ticks, s.cutime_ticks, s.cstime_ticks) == (14, 15, 16, 17)
    assert (s.start_ticks, s.processor, s.cpu_ticks) == (22, 1, 14 + 15 + 16 + 17)
    assert placement.parse_last_cpu(RECORDED) == 1
    assert pid_cpu(s) == (4, (14 + 15 + 16 + 17) / CLK_TCK)
    # a command name may even end in ") " followed by digits
    odd = proc.parse_pid_stat("7 () 3 4) " + " ".join(_REST))
    assert (odd.comm, odd.ppid, odd.start_ticks) == (") 3 4", 4, 22)
    # a kernel without field 39: parsed, processor unknown
    short = proc.parse_pid_stat("9 (sh) " + " ".join(_REST[:30]))
    assert short.processor is None and short.start_ticks == 22


@pytest.mark.parametrize("bad", ["", "4242 postgres S 1", "4242 (x) S 1 2 3"])
def test_what_is_not_a_stat_line_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        proc.parse_pid_stat(bad)
    assert proc.read_pid_stat(2**22 + 12345) is None  # no such process


def test_the_real_stat_of_this_process() -> None:
    s = proc.read_pid_stat(os.getpid())
    assert s is not None
    assert (s.pid, s.ppid, s.state) == (os.getpid(), os.getppid(), "R")
    assert s.comm == Path("/proc/self/comm").read_text().rstrip("\n")
    assert s.processor in os.sched_getaffinity(0)
    own = os.times()  # this process's own clock: user + system, in seconds
    assert abs((s.utime_ticks + s.stime_ticks) / CLK_TCK - (own.user + own.system)) < 0.05
    assert proc.start_ticks(os.getpid()) == s.start_ticks
    thread = proc.read_pid_stat(os.getpid(), threading.get_native_id())
    assert thread is not None and thread.pid == threading.get_native_id()


def test_the_tree_walk_finds_what_a_scan_finds_children_of_other_threads_included() -> None:
    """A shell with two children, and a child forked by another thread of this process
    (it is listed under that thread's /proc/<pid>/task/<tid>/children): the walk must
    find each, as the scan (the oracle) does."""
    release = threading.Event()
    forked: list[subprocess.Popen[bytes]] = []

    def fork_in_a_thread() -> None:
        forked.append(subprocess.Popen(["sleep", "30"]))
        release.wait(30)

    shell = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    other = threading.Thread(target=fork_in_a_thread)
    other.start()
    try:
        deadline = time.monotonic() + 10
        while len(proc.child_pids(shell.pid)) < 2 or not forked:
            assert time.monotonic() < deadline, "the shell's children did not appear"
            time.sleep(0.02)
        scan = proc.scan_pid_stats()
        in_scan = sorted(p for p, s in scan.items() if s.ppid == shell.pid)
        assert proc.child_pids(shell.pid) == in_scan
        assert {shell.pid, forked[0].pid} <= set(proc.child_pids(os.getpid()))
        tree = proc.tree_pids(os.getpid())
        assert tree[0] == os.getpid() and len(tree) == len(set(tree))
        assert {shell.pid, forked[0].pid, *proc.child_pids(shell.pid)} <= set(tree)
        assert 1 not in tree  # init is not below this process
        tasks = proc.tree_tasks(os.getpid())  # the same walk, each process with its threads
        assert list(tasks) == tree and other.native_id in tasks[os.getpid()]
        assert tasks[shell.pid] == [shell.pid]
        read: list[tuple[int, int]] = []  # a caller's reader of the children files is used
        assert proc.tree_tasks(shell.pid, lambda p, t: read.append((p, t)) or None) == {
            shell.pid: [shell.pid]
        }
        assert read == [(shell.pid, shell.pid)]
        walked = read_pid_stats([shell.pid])
        assert set(walked) == {shell.pid, *proc.child_pids(shell.pid)}
        assert read_server_cpu_s(shell.pid) is not None
    finally:
        release.set()
        other.join()
        for p in [shell, *forked]:
            p.kill()
            p.wait()
    assert proc.child_pids(shell.pid) == [] and read_server_cpu_s(shell.pid) is None


def test_the_probes_read_their_trees_without_a_scan_of_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """disturbance.read_stats (the begin and end snapshots) and the placement CPU log
    walk their trees: a scan of /proc would fail here."""

    def no_scan() -> dict[int, proc.PidStat]:
        raise AssertionError("scanned every entry of /proc")

    monkeypatch.setattr(proc, "scan_pid_stats", no_scan)
    stats = disturbance.read_stats([os.getppid()])
    assert os.getpid() in stats and os.getppid() in stats
    account = disturbance.read_account([os.getppid()], stats)
    assert account is not None and account.known_s >= stats[os.getpid()][1]
    assert disturbance.read_account([os.getppid()]) is not None


def test_schedstat_gives_a_task_s_cpu_time_in_nanoseconds() -> None:
    assert proc.parse_schedstat("142242 379605 5\n") == 142242
    assert proc.parse_schedstat_runs("142242 379605 5\n") == (142242, 5)  # ns, times run
    with pytest.raises(ValueError):
        proc.parse_schedstat("1 2")
    # a single-threaded child that burns 0.2 s of CPU, prints its own CPU clock and waits:
    # its schedstat is the same kernel figure
    script = (
        "import sys, time\n"
        "until = time.process_time() + 0.2\n"
        "while time.process_time() < until: pass\n"
        "print(time.process_time(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        own_s = float(child.stdout.readline())
        got = proc.read_runtime_s(child.pid)
    finally:
        child.communicate("")
    assert got is not None and abs(got - own_s) < 0.02, (got, own_s)
    assert proc.read_runtime_s(child.pid) is None  # reaped: no such task

"""Other processes' CPU during a measured window (blocklab.probes.disturbance): the pure
accounting on recorded /proc-like inputs, and a real window with a stand-in server whose
short-lived children must count as the server's, beside a CPU burner that must count as
a disturbance."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.probes import disturbance as d
from blocklab.probes.sampler import CLK_TCK, pid_cpu

SERVER, BACKEND, OWN, DRIVER, KTHREADD, KWORKER, OTHER = 100, 101, 200, 201, 2, 3, 500


def _ticks(
    user: float, system: float, idle: float, irq: float = 0.0, steal: float = 0.0
) -> dict[str, int]:
    """A /proc/stat cpu line (parse_proc_stat_cpu's dict) from seconds."""
    s = {"user": user, "nice": 0.0, "system": system, "idle": idle, "iowait": 0.0}
    s |= {"irq": irq, "softirq": 0.0, "steal": steal}
    return {k: round(v * CLK_TCK) for k, v in s.items()}


def _scan(
    server: float, backend: float | None, own: float, driver: float | None, kw: float
) -> dict[int, tuple[int, float]]:
    """pid -> (ppid, CPU s) as read_pid_stats gives it; None: the process is gone."""
    stats = {SERVER: (1, server), OWN: (50, own), KTHREADD: (0, 0.0), KWORKER: (KTHREADD, kw)}
    stats[OTHER] = (1, 7.0)
    if backend is not None:
        stats[BACKEND] = (SERVER, backend)
    if driver is not None:
        stats[DRIVER] = (OWN, driver)
    return stats


def test_the_run_s_own_trees_are_not_a_disturbance_and_others_are() -> None:
    """Window: the server 2 s (a backend that started and ended inside, 1.5 s, now in the
    postmaster's cutime), blocklab 0.5 s and its driver 3 s (reaped: in blocklab's
    cutime), a kernel worker 0.25 s and 0.25 s of irq; an other process that started and
    ended in the window (never seen in a scan) 1.5 s, steal 0.5 s; 2 CPUs x 10 s. Of the
    8 busy seconds, 2 were others'."""
    before = d.account(_scan(10.0, 0.0, 1.0, None, 4.0), _ticks(50, 20, 100), [SERVER, OWN])
    scan = _scan(10.0 + 2.0, None, 1.0 + 0.5 + 3.0, None, 4.25)
    after_ticks = _ticks(50 + 4.5 + 1.5, 20 + 1.0 + 0.25, 100 + 12.0, irq=0.25, steal=0.5)
    after = d.account(scan, after_ticks, [SERVER, OWN])
    m = d.metrics(before, after)
    assert after.capacity_s - before.capacity_s == pytest.approx(20.0)
    assert after.known_s - before.known_s == pytest.approx(5.5)
    assert m[d.KERNEL_CPU_S] == pytest.approx(0.5)
    assert m[d.CPU_S] == pytest.approx(1.5 + 0.5)  # the other process and the steal
    assert m[d.CPU_SHARE] == pytest.approx(2.0 / 20.0)


def test_a_live_child_counts_until_it_is_reaped_and_after() -> None:
    """A backend alive at both scans counts itself; the tree's sum does not jump when it
    is reaped (its time moves into the postmaster's cutime)."""
    roots = [SERVER, OWN]
    a = d.account(_scan(10.0, 1.0, 1.0, 2.0, 0.0), _ticks(10, 5, 10), roots)
    b = d.account(_scan(10.0, 3.0, 1.0, 2.0, 0.0), _ticks(12, 5, 10), roots)
    c = d.account(_scan(13.0, None, 3.0, None, 0.0), _ticks(12, 5, 10), roots)
    assert b.known_s - a.known_s == pytest.approx(2.0)
    assert c.known_s == pytest.approx(b.known_s)
    assert d.metrics(a, c)[d.CPU_S] == pytest.approx(0.0)


def test_rounding_below_zero_is_clamped_and_missing_accounts_give_none() -> None:
    a = d.account(_scan(10.0, None, 1.0, None, 0.0), _ticks(10, 5, 10), [SERVER, OWN])
    b = d.account(_scan(10.04, None, 1.0, None, 0.0), _ticks(10, 5, 12), [SERVER, OWN])
    no_device = {d.DEVICE_BYTES: None, d.DEVICE_SHARE: None}
    assert d.metrics(a, b) == {d.CPU_S: 0.0, d.CPU_SHARE: 0.0, d.KERNEL_CPU_S: 0.0} | no_device
    assert d.metrics(None, b) == dict.fromkeys(d.METRICS)
    assert d.metrics(a, a)[d.CPU_SHARE] is None  # no time passed: no capacity


def test_other_bytes_on_the_disk_under_the_loop_devices() -> None:
    """vda holds the images of loop1 (data) and loop2 (WAL): over the window vda moved
    100 MiB, the loop devices 60 + 30 MiB: 10 MiB were other processes'. sdb (loop3) could
    not be read at the end: left out."""
    mib = 1 << 20
    backing = {"vda": ["loop1", "loop2"], "sdb": ["loop3"]}
    before = d.device_account(
        {"vda": 500 * mib, "loop1": 0, "loop2": 7, "sdb": 1, "loop3": 1}, backing
    )
    after = d.device_account(
        {"vda": 600 * mib, "loop1": 60 * mib, "loop2": 30 * mib + 7, "sdb": None, "loop3": 1},
        backing,
    )
    assert set(after) == {"vda"}
    assert d.device_metrics(before, after) == {d.DEVICE_BYTES: 10 * mib, d.DEVICE_SHARE: 0.1}
    # queued requests counted on the loop device first: clamped, never below 0
    late = d.device_account({"vda": 500 * mib, "loop1": mib, "loop2": 7}, backing)
    assert d.device_metrics(before, late) == {d.DEVICE_BYTES: 0.0, d.DEVICE_SHARE: 0.0}
    assert d.device_metrics({}, after) == {d.DEVICE_BYTES: None, d.DEVICE_SHARE: None}


def test_a_shared_device_or_a_device_that_is_no_loop_has_no_backing() -> None:
    from blocklab.probes import Device

    assert d.backing_devices([Device("nonexistent0", shared=False), Device("loop0")]) == {}


def test_tree_pids_follows_grandchildren_and_ignores_absent_roots() -> None:
    stats = {1: (0, 0.0), 10: (1, 0.0), 11: (10, 0.0), 12: (11, 0.0), 20: (1, 0.0)}
    assert d.tree_pids(stats, [10, 99]) == {10, 11, 12}
    assert d.tree_pids(stats, []) == set()


# -- real processes ---------------------------------------------------------------------

CHILDREN, CHILD_CPU_S, MIN_WINDOW_S = 4, 0.15, 3.0
STAND_IN = f"""
import os, pathlib, sys, time
d = pathlib.Path(sys.argv[1])
(d / "ready.part").write_text(str(os.getpid()))
(d / "ready.part").rename(d / "ready")  # whole or absent: the test reads it as it appears
while not (d / "go").exists():
    time.sleep(0.01)
for _ in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        while time.process_time() < {CHILD_CPU_S}:
            pass
        with open(d / "children", "a") as f:
            f.write(f"{{time.process_time()}}\\n")
        os._exit(0)
    os.waitpid(pid, 0)
(d / "done").write_text("")
time.sleep(120)
"""
BURNER = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


def _detached(code: str, *args: str) -> int:
    """Start `code` in a process that is not this one's descendant (its shell parent
    exits at once: it is reparented), as another program on the machine would be."""
    script = f'{sys.executable} -c "$0" "$@" >/dev/null 2>&1 & echo $!'
    return int(proc.run(["sh", "-c", script, code, *args], timeout_s=30).stdout.strip())


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear in {timeout_s} s"
        time.sleep(0.02)


def _cpu_s(pid: int) -> float:
    return pid_cpu(proc.parse_pid_stat(Path(f"/proc/{pid}/stat").read_text()))[1]


def test_a_burner_beside_the_server_is_seen_and_the_server_s_children_are_not(
    tmp_path: Path,
) -> None:
    """The stand-in server forks CHILDREN processes that each burn CHILD_CPU_S and exit
    inside the window; a detached burner spins throughout. The known trees must hold the
    children's CPU (an exact identity against their own clocks, whatever else runs on
    this shared machine), and the disturbance must hold at least the burner's CPU."""
    server = burner = 0
    try:
        server = _detached(STAND_IN, str(tmp_path))
        burner = _detached(BURNER)
        _wait_for(tmp_path / "ready", 30)
        assert int((tmp_path / "ready").read_text()) == server
        scan = d.read_stats([server])
        assert burner not in scan  # walked from the roots, not a scan of /proc
        assert server in d.tree_pids(scan, [server]) and burner not in d.tree_pids(
            scan, [os.getpid(), server]
        )
        burner0, t0 = _cpu_s(burner), time.monotonic()
        scan0 = d.read_stats([server])
        before = d.read_account([server], stats=scan0)
        (tmp_path / "go").write_text("")
        _wait_for(tmp_path / "done", 60)
        time.sleep(max(0.0, MIN_WINDOW_S - (time.monotonic() - t0)))
        scan1 = d.read_stats([server])
        after = d.read_account([server], stats=scan1)
        burned = _cpu_s(burner) - burner0
    finally:
        for pid in (server, burner):
            if pid:
                proc.terminate(pid, sig=signal.SIGKILL, grace_s=5)
    assert before is not None and after is not None
    children = [float(x) for x in (tmp_path / "children").read_text().split()]
    assert len(children) == CHILDREN and min(children) >= CHILD_CPU_S
    # the server's tree alone, from the same scans: this worker's own tree may hold other
    # busy descendants (the session's background builds, tests/prebuild.py)
    server_s = d.account(scan1, {}, [server]).known_s - d.account(scan0, {}, [server]).known_s
    # sums of 10 ms clock ticks in another order: 39.62 - 39.02 came out below 0.6
    assert after.known_s - before.known_s >= server_s - 1e-6
    assert sum(children) - 0.05 <= server_s <= sum(children) + 0.2, (server_s, children)
    m = d.metrics(before, after)
    assert burned >= 0.2, f"the burner ran {burned:.2f} s: the machine starved it"
    assert m[d.CPU_S] is not None and m[d.CPU_S] >= 0.9 * burned - 0.05, (m, burned)
    print(f"burner {burned:.2f} s, server tree {server_s:.2f} s, measured {m}")


def test_the_interleaved_design_drops_them_with_the_host_wide_metrics() -> None:
    """Two servers share the window there: the other one's slices are neither tree's."""
    from blocklab.execution import interleaved

    got = interleaved.server_metrics({d.CPU_S: 1.0, d.CPU_SHARE: 0.1, "server_cpu_s": 3.0})
    assert got == {"server_cpu_s": 3.0}


def test_a_round_of_two_servers_knows_both_and_still_sees_a_burner() -> None:
    """The interleaved design's account (read_account with both servers): two stand-in servers spin
    as the two servers of a round would (the one not driven still runs its background
    processes); both trees must be known, to their own clocks, and a third detached
    burner must reach the disturbance."""
    servers: list[int] = []
    burner = 0
    try:
        servers = [_detached(BURNER), _detached(BURNER)]
        burner = _detached(BURNER)
        # the spinners' own clocks read inside the window, so the window holds their time
        before = d.read_account(servers)
        cpu0 = [_cpu_s(p) for p in (*servers, burner)]
        time.sleep(MIN_WINDOW_S)
        cpu1 = [_cpu_s(p) for p in (*servers, burner)]
        after = d.read_account(servers)
    finally:
        for pid in (*servers, burner):
            if pid:
                proc.terminate(pid, sig=signal.SIGKILL, grace_s=5)
    assert before is not None and after is not None
    spun = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
    assert min(spun) >= 0.2, f"the machine starved the spinners: {spun}"
    assert after.known_s - before.known_s >= spun[0] + spun[1] - 0.05, (before, after, spun)
    other, _kernel, capacity = d.other_cpu_s(before, after)
    assert capacity > 0
    assert other >= 0.9 * spun[2] - 0.05, (other, spun)

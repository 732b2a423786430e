"""The CPU log's cost per look (issue 33): CPU microseconds of one look of the placement's
CPU log (blocklab.execution.controls.CpuSampler: walk the server's and this process's
trees, then CpuLog.sample) over a real server under pgbench.

    nice -n 19 .venv/bin/python bench/bench_cpu_log.py [--looks 200] [--clients 2]

PostgreSQL 18 at 8 kB pages (the cached build), pgbench -i -s 1 in a throwaway home, then
pgbench (built-in TPC-B-like script, --clients clients and threads) while this script
looks --looks times at the sampler's rate (every 0.25 s) and times each look by its own
thread's CPU clock (time.thread_time_ns: the CPU the look costs, not the wall time the
machine's other work adds). It prints the median and mean CPU microseconds of the walk,
of the sample and of the whole look, the number of processes and threads looked at, this
process's open file descriptors before and after (the log's are closed at its end), and
the load average. The code measured is whatever `blocklab` imports: run it from another
checkout with PYTHONPATH to measure that one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from scratch_home import scratch_home

from blocklab import proc
from blocklab.execution import controls, placement
from blocklab.model import BuildRequest
from blocklab.postgres.build import ensure_build
from blocklab.postgres.cluster import Cluster, server_user

BUILD = BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def looks(server_pid: int, n: int) -> tuple[list[int], list[int], int, int]:
    sampler = controls.CpuSampler(server_pid)
    walks, samples, pids, threads = [], [], 0, 0
    for _ in range(n):
        t0 = time.thread_time_ns()
        if hasattr(sampler, "tasks"):
            tree: dict[int, list[int]] | list[int] = sampler.tasks()
            t1 = time.thread_time_ns()
            sampler.sample(tree)
        else:  # the code before: as its CpuSampler._loop did
            tree = proc.tree_pids(server_pid)
            tree += [p for p in proc.tree_pids(os.getpid())[1:] if p not in tree]
            t1 = time.thread_time_ns()
            sampler.log.sample(tree)
        t2 = time.thread_time_ns()
        walks.append(t1 - t0)
        samples.append(t2 - t1)
        pids = len(tree)
        threads = sum(len(v) for v in tree.values()) if isinstance(tree, dict) else 0
        time.sleep(0.25)
    sampler.__exit__()
    return walks, samples, pids, threads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--looks", type=int, default=200)
    ap.add_argument("--clients", type=int, default=2)
    args = ap.parse_args()
    print("placement from", placement.__file__)
    with scratch_home("bench-cpulog-") as (paths, state):
        inst = ensure_build(BUILD, paths)
        base = paths.work / "cpulog"
        c = Cluster(inst, base / "data", socket_dir=base / "sock", user=server_user(),
                    state=state, log_path=base / "server.log")  # fmt: skip
        try:
            c.initdb(data_checksums=False)
            c.write_settings({})
            c.start()
            assert c.pid is not None
            pgbench = str(inst.bin("pgbench"))
            proc.run([pgbench, *c.conn_args(), "-i", "-s", "1", "-q", "postgres"])
            seconds = int(args.looks * 0.25) + 10
            argv = [pgbench, *c.conn_args(), "-c", str(args.clients), "-j", str(args.clients)]
            driver = proc.spawn([*argv, "-T", str(seconds), "postgres"],
                                stdout_path=Path(base / "pgbench.out"))  # fmt: skip
            time.sleep(2)
            before = open_fds()
            walks, samples, pids, threads = looks(c.pid, args.looks)
            after = open_fds()
            proc.terminate(driver.pid, grace_s=5)
        finally:
            c.kill()
    total = [w + s for w, s in zip(walks, samples, strict=True)]
    for what, xs in (("walk", walks), ("sample", samples), ("look", total)):
        median, mean = statistics.median(xs) / 1e3, statistics.fmean(xs) / 1e3
        print(f"{what:6}: median {median:7.1f} us, mean {mean:7.1f} us CPU per look ({len(xs)})")
    print(f"{pids} processes, {threads or '?'} threads; open fds before {before}, after {after}")
    print("load average (1, 5, 15 min):", ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()

"""The fleet queue's own cost (procrastinate on PostgreSQL): AGENTS workers claim JOBS
no-op jobs on this machine; no benchmark runs, only the queue.

    .venv/bin/python bench/bench_queue.py [--agents 100] [--jobs 10000] [--procs 4]

Starts a throwaway PostgreSQL server (Debian's postgresql-15, private socket,
max_connections raised for the agents' connections), installs the queue the way
`blocklab fleet submit` does (blocklab.fleet.queue), defers the jobs in batches, then
starts PROCS processes of AGENTS/PROCS procrastinate workers each (asyncio, concurrency 1
like `blocklab agent`, LISTEN/NOTIFY on, heartbeats on). Prints the defer rate, jobs/s
from the start signal to the last job done, and the claim latency (the time of one
procrastinate fetch_job call that returned a job: the queue's claim query under
contention) p50/p99. Stops and removes the server.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers import running_cluster  # noqa: E402
from scratch_home import scratch_home  # noqa: E402

from blocklab.fleet import queue  # noqa: E402
from blocklab.postgres.cluster import Cluster  # noqa: E402
from blocklab.postgres.installation import Installation  # noqa: E402
from blocklab.store.uri import parse_pg  # noqa: E402

QUEUE = "blocklab:bench"


def _uri(c: Cluster) -> str:
    return f"postgresql://{c.user.name}@/postgres?host={c.socket_dir}&port={c.port}"


def _app(uri: str, max_size: int) -> Any:
    import procrastinate

    target = parse_pg(uri)
    connector = procrastinate.PsycopgConnector(
        conninfo=target.conninfo, min_size=1, max_size=max_size
    )
    app = procrastinate.App(connector=connector)

    @app.task(name="noop", queue=QUEUE)
    async def noop(i: int) -> None:
        return None

    return app


def _worker_proc(uri: str, n_workers: int, start: Any, out: Any) -> None:
    from procrastinate import manager

    claims_s: list[float] = []
    original = manager.JobManager.fetch_job

    async def timed_fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        job = await original(self, *args, **kwargs)
        if job is not None:
            claims_s.append(time.perf_counter() - t0)
        return job

    manager.JobManager.fetch_job = timed_fetch  # type: ignore[method-assign]

    async def run() -> None:
        app = _app(uri, max_size=n_workers + 2)
        async with app.open_async():
            start.wait()
            await asyncio.gather(
                *(
                    app.run_worker_async(
                        queues=[QUEUE],
                        name=f"w{i}",
                        concurrency=1,
                        wait=False,
                        install_signal_handlers=False,
                        update_heartbeat_interval=queue.HEARTBEAT_S,
                        stalled_worker_timeout=queue.STALLED_S,
                    )
                    for i in range(n_workers)
                )
            )

    asyncio.run(run())
    out.put((time.perf_counter(), claims_s))


def _defer(uri: str, n_jobs: int) -> float:
    app = _app(uri, max_size=2)
    t0 = time.perf_counter()
    with app.open():
        task = app.tasks["noop"]
        for lo in range(0, n_jobs, 1000):
            task.batch_defer(*({"i": i} for i in range(lo, min(n_jobs, lo + 1000))))
    return time.perf_counter() - t0


def bench(uri: str, agents: int, jobs: int, procs: int) -> None:
    queue.install(parse_pg(uri))
    defer_s = _defer(uri, jobs)
    print(f"deferred {jobs} jobs in {defer_s:.2f} s ({jobs / defer_s:.0f} jobs/s, batches of 1000)")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    sizes = [agents // procs + (1 if i < agents % procs else 0) for i in range(procs)]
    children = [ctx.Process(target=_worker_proc, args=(uri, n, start, out)) for n in sizes]
    for p in children:
        p.start()
    time.sleep(3)  # the children import and open their pools
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=1800) for _ in children]
    for p in children:
        p.join(60)
    wall_s = max(t for t, _ in results) - t0
    claims = sorted(c for _, cs in results for c in cs)
    p50 = statistics.median(claims) * 1e3
    p99 = claims[min(len(claims) - 1, int(len(claims) * 0.99))] * 1e3
    print(
        f"{agents} workers in {procs} processes, {len(claims)} jobs claimed in {wall_s:.1f} s: "
        f"{len(claims) / wall_s:.0f} jobs/s; claim latency p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--procs", type=int, default=4)
    args = ap.parse_args()
    with scratch_home("bench-queue-") as (paths, _state):
        settings = {"max_connections": str(args.agents * 2 + 50)}
        with running_cluster(paths, Installation.system(15), "queue", settings) as c:
            bench(_uri(c), args.agents, args.jobs, args.procs)


if __name__ == "__main__":
    main()

"""Submit, cancel and move fleet jobs (the queue side of `blocklab fleet`)."""

from __future__ import annotations

import asyncio
from typing import Any

import procrastinate

from blocklab.fleet import queue
from blocklab.fleet.hosts import JobSpec, plan_jobs, queue_of
from blocklab.store.uri import PgTarget


def submit(target: PgTarget, jobs: list[JobSpec]) -> tuple[int, int]:
    """Queue `jobs`; (queued, already queued)."""
    app = queue.make_app(target, max_size=2)
    with app.open():
        ids = [queue.defer(app, j) for j in jobs]
    return sum(i is not None for i in ids), sum(i is None for i in ids)


def complete_rounds(
    run_keys: set[tuple[str, int, int]], variant_ids: list[str], rounds: int
) -> set[int]:
    """The rounds (1..rounds) for which every variant has a stored run."""
    stored: dict[int, set[str]] = {}
    for vid, rnd, _copy in run_keys:
        stored.setdefault(rnd, set()).add(vid)
    return {r for r in range(1, rounds + 1) if stored.get(r, set()) >= set(variant_ids)}


def jobs_to_submit(
    experiment: str, hosts: list[str], rounds: int, done: dict[str, set[int]]
) -> list[JobSpec]:
    return plan_jobs(experiment, hosts, rounds, done)


async def _recover_and_cancel(
    app: procrastinate.App, host: str, experiment: str | None
) -> list[dict[str, Any]]:
    """The jobs of `host` not started yet, cancelled (a dead agent's running job first
    put back in the queue); their arguments."""
    q = queue_of(host)
    for job in await app.job_manager.get_stalled_jobs(
        queue=q, seconds_since_heartbeat=queue.STALLED_S
    ):
        await app.job_manager.retry_job(job)
    cancelled = []
    for job in await app.job_manager.list_jobs_async(queue=q, status="todo"):
        if experiment is not None and job.task_kwargs.get("experiment") != experiment:
            continue
        assert job.id is not None
        if await app.job_manager.cancel_job_by_id_async(job.id):
            cancelled.append(dict(job.task_kwargs))
    return cancelled


def cancel(target: PgTarget, host: str, experiment: str | None) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        app = queue.make_app(target, max_size=2)
        async with app.open_async():
            return await _recover_and_cancel(app, host, experiment)

    return asyncio.run(go())


def move(
    target: PgTarget, src: str, dst: str, experiment: str | None, last_round: dict[str, int]
) -> list[JobSpec]:
    """`src`'s queued rounds become extra rounds of `dst` (numbered after `dst`'s last
    round per experiment, `last_round`): a round measured on dst is dst's, never src's."""

    async def go() -> list[JobSpec]:
        app = queue.make_app(target, max_size=2)
        async with app.open_async():
            moved = await _recover_and_cancel(app, src, experiment)
            await _last_queued(app, dst, last_round)
            out = []
            for kw in sorted(moved, key=lambda k: (k["experiment"], k["round_no"])):
                exp = str(kw["experiment"])
                last_round[exp] = last_round.get(exp, 0) + 1
                out.append(JobSpec(exp, dst, last_round[exp]))
            return out

    jobs = asyncio.run(go())
    submit(target, jobs)
    return jobs


async def _last_queued(app: procrastinate.App, host: str, last_round: dict[str, int]) -> None:
    for job in await app.job_manager.list_jobs_async(queue=queue_of(host)):
        exp = str(job.task_kwargs.get("experiment"))
        last_round[exp] = max(last_round.get(exp, 0), int(str(job.task_kwargs.get("round_no", 0))))

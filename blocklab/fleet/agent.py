"""`blocklab agent --host NAME`: takes one job at a time from its host's queue, builds
what it lacks into its own cache (BLOCKLAB_HOME / BLOCKLAB_CACHE) and writes the runs
with host=NAME.

On start it releases what a killed blocklab left behind (servers, mounts) and puts back
in the queue the job a killed agent of this host was running (procrastinate's stalled
jobs: a worker without a heartbeat for STALLED_S). The runs that job stored are kept; its
partial run has no row and is run again (its raw directory removed first), so the end
holds exactly the planned runs: the database's unique key (experiment, host, variant,
round, copy) refuses a second copy.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import procrastinate

from blocklab.fleet import queue, registry
from blocklab.fleet.hosts import JobSpec, queue_of
from blocklab.paths import Paths
from blocklab.store.uri import PgTarget


class Agent:
    def __init__(
        self,
        host: str,
        target: PgTarget,
        results_spec: str,
        paths: Paths,
        log: Callable[[str], None],
    ):
        self.host = host
        self.target = target
        self.results_spec = results_spec
        self.paths = paths
        self.log = log
        self.jobs_done = 0
        self.granted: frozenset[str] = frozenset()  # --allow: the owner's grant

    # -- the loop ---------------------------------------------------------------------

    def serve(self, *, until_idle: bool) -> None:
        """Take jobs until stopped (SIGINT/SIGTERM: after the current job), or with
        `until_idle` until the host's queue holds no job to run now."""
        from blocklab.state import State
        from blocklab.storage.cleanup import release_report

        queue.require_installed(self.target)
        for line in release_report(State(self.paths.state_file), only_dead_owners=True).lines():
            self.log(f"what a killed blocklab left behind: {line}")
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(stop,), daemon=True)
        beat.start()
        try:
            asyncio.run(self._serve(until_idle))
        finally:
            stop.set()
            beat.join(5)

    async def _serve(self, until_idle: bool) -> None:
        app = queue.make_app(self.target, self._run_round, max_size=3)
        async with app.open_async():
            await self._recover_stalled(app)
            await app.run_worker_async(
                queues=[queue_of(self.host)],
                name=f"agent-{self.host}",
                concurrency=1,  # a benchmark needs the whole machine
                wait=not until_idle,
                update_heartbeat_interval=queue.HEARTBEAT_S,
                stalled_worker_timeout=queue.STALLED_S,
            )

    async def _recover_stalled(self, app: procrastinate.App) -> None:
        """Put back the jobs of this host that a dead agent was running; a job whose
        worker still beats (another agent of the same name) is waited for a while."""
        deadline = time.monotonic() + queue.STALLED_S + 3 * queue.HEARTBEAT_S
        q = queue_of(self.host)
        while True:
            stalled = await app.job_manager.get_stalled_jobs(
                queue=q, seconds_since_heartbeat=queue.STALLED_S
            )
            for job in stalled:
                self.log(
                    f"job {job.id} ({_job_text(job.task_kwargs)}): its agent died; retrying it"
                )
                await app.job_manager.retry_job(job)
            if not await self._running(app, q) or time.monotonic() > deadline:
                return
            await asyncio.sleep(queue.HEARTBEAT_S / 2)

    async def _running(self, app: procrastinate.App, q: str) -> int:
        rows = await app.connector.execute_query_all_async(
            "SELECT id FROM procrastinate_jobs WHERE queue_name = %(q)s AND status = 'doing'",
            q=q,
        )
        return len(rows)

    def _heartbeat(self, stop: threading.Event) -> None:
        """blocklab_fleet_agents.last_seen, for `fleet status` (a vanished host)."""
        sql = (
            "INSERT INTO blocklab_fleet_agents VALUES (%s, %s, now(), now()) ON CONFLICT "
            "(host) DO UPDATE SET pid=EXCLUDED.pid, last_seen=now()"
        )
        first = True
        while not stop.is_set():
            try:
                with queue.connect(self.target) as conn:
                    if first:
                        conn.execute(
                            "DELETE FROM blocklab_fleet_agents WHERE host=%s", (self.host,)
                        )
                        first = False
                    while not stop.is_set():
                        conn.execute(sql, (self.host, os.getpid()))
                        stop.wait(queue.HEARTBEAT_S)
            except Exception as e:  # the database restarts: try again, the jobs go on
                self.log(f"agent heartbeat: {type(e).__name__}; retrying")
                stop.wait(queue.HEARTBEAT_S)

    # -- one job -------------------------------------------------------------------------

    def _run_round(self, context: procrastinate.JobContext, **kw: Any) -> None:
        job = JobSpec(str(kw["experiment"]), str(kw["host"]), int(kw["round_no"]))
        assert context.job is not None
        try:
            if job.host != self.host:
                raise RuntimeError(f"a job of host {job.host} reached the agent of {self.host}")
            self.log(f"job {context.job.id}: {_job_text(kw)} (attempt {context.job.attempts + 1})")
            self._execute(job)
            self.jobs_done += 1
        except BaseException as e:
            self._record_failure(context.job.id or 0, context.job.attempts, job, e)
            raise

    def _execute(self, job: JobSpec) -> None:
        from blocklab.console import console
        from blocklab.execution.controls import RunControls
        from blocklab.execution.experiment import Loop, register
        from blocklab.execution.lab import Lab
        from blocklab.execution.progress import QuietProgress
        from blocklab.host import host_facts
        from blocklab.postgres.build import build_key
        from blocklab.state import State
        from blocklab.store.factory import open_store

        with queue.connect(self.target) as conn:
            sub = registry.load(conn, job.experiment)
        exp = self.admit(sub)
        progress = QuietProgress(console(stderr=True))
        with open_store(self.results_spec) as db:
            register(db, exp, {**host_facts(), "fleet_host": self.host})
            variants = exp.variants_on(self.host)  # [fleet.hosts], references included
            refs = {v.variant_id: exp.variant(exp.reference_for(v)) for v in variants}
            state = State(self.paths.state_file)
            with Lab(
                self.paths,
                state,
                log=progress.note,
                references=refs,
                variants=variants,
                controls=RunControls.from_design(exp.run_design),
            ) as lab:
                loop = Loop(exp, variants, db=db, lab=lab, progress=progress, host=self.host)
                # a resumed job on another build than its host's stored runs: refused
                loop.check_round_builds(job.round_no, lambda v: build_key(v.build, self.paths))
                for v in variants:
                    lab.prepare(v)  # builds, storage and dataset before the measured runs
                progress.begin(loop.runs_per_round(), 0)
                loop.run_round(job.round_no, db.run_keys(exp.name, self.host))
            self._extend(db, sub, job)

    def admit(self, sub: registry.Submission) -> Any:
        """The queued experiment, if this host's owner allows what it asks for and this
        machine can run it; else a UserError naming the key and the flag that allows it
        (the job's recorded failure). The submitter's directory means nothing here: every
        path it names is a path of this host (trust class "paths")."""
        from blocklab.execution.preflight import check_machine
        from blocklab.experiment_file import trust

        exp = sub.experiment()
        trust.check(exp, self.granted, None, who=f"the agent of host {self.host}")
        check_machine(exp, self.paths)
        return exp

    def _extend(self, db: Any, sub: registry.Submission, job: JobSpec) -> None:
        """--until-ci per host: one more round of this host while its widest CI is wider."""
        from blocklab.analysis import stopping
        from blocklab.analysis.summary import summarize_experiment

        if sub.until_ci_pct is None or job.round_no < sub.rounds:
            return
        summary = summarize_experiment(db, job.experiment, host=self.host)
        decision = stopping.decide(
            summary.log_ratios(),
            summary.max_ci_half_width_pct(),
            sub.until_ci_pct,
            first=stopping.first_stage(sub.rounds),
            max_rounds=sub.max_rounds_per_host(),
        )
        if decision.stop or job.round_no >= sub.max_rounds_per_host():
            self.log(f"host {self.host}: {decision.reason}")
            return
        app = queue.make_app(self.target, max_size=1)
        with app.open():
            queue.defer(app, JobSpec(job.experiment, self.host, job.round_no + 1))

    def _record_failure(self, job_id: int, attempt: int, job: JobSpec, e: BaseException) -> None:
        reason = f"{type(e).__name__}: {e}"[:2000] or type(e).__name__
        self.log(f"job {job_id} failed: {reason}")
        try:
            with queue.connect(self.target) as conn:
                conn.execute(
                    "INSERT INTO blocklab_fleet_failures (job_id, attempt, host, experiment, "
                    "round, reason) VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                    (job_id, attempt, job.host, job.experiment, job.round_no, reason),
                )
        except Exception as db_error:  # the job's failure is what matters: keep it raised
            self.log(f"could not record the failure: {type(db_error).__name__}")


def _job_text(kw: Any) -> str:
    return f"experiment '{kw.get('experiment')}', host {kw.get('host')}, round {kw.get('round_no')}"

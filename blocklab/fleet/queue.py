"""The fleet's queue: a procrastinate App on the results database (docs/FLEET.md).

The connection string is the results URI, checked by blocklab.store.uri (the password
apart, local socket or TLS); the password reaches psycopg's pool as a keyword only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

import procrastinate
import procrastinate.schema
import psycopg

from blocklab.errors import UserError
from blocklab.fleet.hosts import JobSpec, queue_of
from blocklab.store.uri import PgTarget

TASK_NAME = "blocklab.fleet.run_round"
# one retry: a job that fails twice (the same way or not) is marked failed with its reason
RETRY = procrastinate.RetryStrategy(max_attempts=1)
HEARTBEAT_S = 2.0  # an agent's heartbeat in procrastinate_workers
STALLED_S = 10.0  # a worker this long without a heartbeat is dead: its job is retried
SCHEMA_LOCK = 0x626C6B66  # advisory lock: one submitter installs the queue's tables

RoundTask = Callable[..., None]


def _pool_kwargs(target: PgTarget) -> dict[str, Any]:
    return {"password": target.password} if target.password is not None else {}


def make_app(
    target: PgTarget, run_round: RoundTask | None = None, **pool: Any
) -> procrastinate.App:
    """The procrastinate App on `target`; `run_round` (the agent's) is the task's body,
    without it the App can only queue and inspect jobs."""
    connector = procrastinate.PsycopgConnector(
        conninfo=target.conninfo,
        kwargs=_pool_kwargs(target),
        min_size=pool.pop("min_size", 1),
        max_size=pool.pop("max_size", 4),
        **pool,
    )
    app = procrastinate.App(connector=connector)
    body = run_round or _not_an_agent
    app.task(name=TASK_NAME, pass_context=True, retry=RETRY)(body)
    return app


def _not_an_agent(context: Any, **_kwargs: Any) -> None:
    raise RuntimeError("only `blocklab agent` runs fleet jobs")


@contextmanager
def connect(target: PgTarget) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection for blocklab's own queries on the queue (autocommit)."""
    with psycopg.connect(target.conninfo, autocommit=True, **_pool_kwargs(target)) as conn:
        yield conn


def install(target: PgTarget) -> None:
    """procrastinate's schema (once) and blocklab's fleet tables, under an advisory lock."""
    with connect(target) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            found = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
            if found is None or found[0] is None:
                conn.execute(procrastinate.schema.SchemaManager.get_schema())
            conn.execute(resources.files("blocklab.fleet").joinpath("tables.sql").read_text())
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def require_installed(target: PgTarget) -> None:
    with connect(target) as conn:
        row = conn.execute("SELECT to_regclass('blocklab_fleet_experiments')").fetchone()
    if row is None or row[0] is None:
        raise UserError(
            f"--results: {target.display} holds no fleet queue; queue an experiment with "
            "`blocklab fleet submit FILE --hosts ...` first"
        )


def defer(app: procrastinate.App, job: JobSpec) -> int | None:
    """Queue one job; None when the same round of the same host is queued already."""
    deferrer = app.configure_task(
        TASK_NAME,
        queue=queue_of(job.host),
        lock=f"host:{job.host}",  # one job at a time per host, even with two agents
        queueing_lock=job.queueing_lock,
    )
    try:
        return deferrer.defer(**job.kwargs())
    except procrastinate.exceptions.AlreadyEnqueued:
        return None

"""`fleet status`: jobs per experiment and host from procrastinate's tables, with an ETA
and the hosts whose agent has gone quiet."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from blocklab.errors import UserError
from blocklab.fleet import registry
from blocklab.fleet.hosts import QUEUE_PREFIX, host_of
from blocklab.fleet.queue import STALLED_S

STATES = ("todo", "doing", "succeeded", "failed", "cancelled")
VANISHED_S = 3 * STALLED_S  # an agent this long silent, with jobs left, has vanished


@dataclass
class HostStatus:
    experiment: str
    host: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    job_s: list[float] = field(default_factory=list)  # durations of succeeded jobs
    agent_silent_s: float | None = None  # None: no agent ever seen
    failures: list[str] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return self.counts["todo"] + self.counts["doing"]

    @property
    def eta_s(self) -> float | None:
        """Remaining jobs times the median job of this host; None before one is done."""
        return eta_s(self.remaining, self.job_s)

    @property
    def vanished(self) -> bool:
        silent = self.agent_silent_s
        return self.remaining > 0 and silent is not None and silent > VANISHED_S

    @property
    def agent(self) -> str:
        if self.agent_silent_s is None:
            return "never seen"
        if self.vanished:
            return f"VANISHED (silent {self.agent_silent_s:.0f} s)"
        return f"seen {self.agent_silent_s:.0f} s ago"


def fmt_eta(seconds: float | None) -> str:
    """0 -> 'done', None -> 'unknown', 3725 -> '1 h 02 min', 75 -> '1 min 15 s'."""
    if seconds is None:
        return "unknown"
    if seconds <= 0:
        return "done"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def eta_s(remaining: int, job_s: Sequence[float]) -> float | None:
    if remaining == 0:
        return 0.0
    return remaining * statistics.median(job_s) if job_s else None


JOBS_SQL = f"""
SELECT j.args->>'experiment', j.queue_name, j.status::text, count(*)
  FROM procrastinate_jobs j
 WHERE j.queue_name LIKE '{QUEUE_PREFIX}%%'
 GROUP BY 1, 2, 3
"""
DURATIONS_SQL = f"""
SELECT j.args->>'experiment', j.queue_name,
       EXTRACT(EPOCH FROM max(e.at) FILTER (WHERE e.type = 'succeeded')
                        - max(e.at) FILTER (WHERE e.type = 'started'))
  FROM procrastinate_jobs j JOIN procrastinate_events e ON e.job_id = j.id
 WHERE j.queue_name LIKE '{QUEUE_PREFIX}%%' AND j.status = 'succeeded'
 GROUP BY j.id
"""
AGENTS_SQL = "SELECT host, EXTRACT(EPOCH FROM now() - last_seen) FROM blocklab_fleet_agents"
FAILURES_SQL = """
SELECT DISTINCT ON (f.job_id) f.experiment, f.host, f.round, f.reason
  FROM blocklab_fleet_failures f JOIN procrastinate_jobs j ON j.id = f.job_id
 WHERE j.status = 'failed'
 ORDER BY f.job_id, f.attempt DESC
"""


def fleet_status(conn: psycopg.Connection[Any], experiment: str | None) -> list[HostStatus]:
    table: dict[tuple[str, str], HostStatus] = {}

    def at(exp: str, host: str) -> HostStatus:
        return table.setdefault((exp, host), HostStatus(exp, host))

    for exp, q, status, n in conn.execute(JOBS_SQL).fetchall():
        if status in STATES:
            at(exp, host_of(q)).counts[status] += int(n)
    for exp, q, seconds in conn.execute(DURATIONS_SQL).fetchall():
        if seconds is not None and (exp, host_of(q)) in table:
            table[(exp, host_of(q))].job_s.append(float(seconds))
    silent = {h: float(s) for h, s in conn.execute(AGENTS_SQL).fetchall()}
    for (_, host), st in table.items():
        st.agent_silent_s = silent.get(host)
    for exp, host, rnd, reason in conn.execute(FAILURES_SQL).fetchall():
        if (exp, host) in table:
            table[(exp, host)].failures.append(f"round {rnd}: {reason}")
    rows = sorted(table.values(), key=lambda s: (s.experiment, s.host))
    return [s for s in rows if experiment is None or s.experiment == experiment]


def trust_asked(conn: psycopg.Connection[Any], experiments: Sequence[str]) -> dict[str, list[str]]:
    """The queued experiments that ask for what an agent's owner must grant
    (blocklab.experiment_file.trust), with the classes: their agents need --allow CLASS."""
    from blocklab.experiment_file import trust

    out: dict[str, list[str]] = {}
    for name in dict.fromkeys(experiments):
        try:
            exp = registry.load(conn, name).experiment()
        except UserError:  # a stored file that no longer reads: its jobs fail with the
            continue  # reason (shown under the table), and it runs nothing
        classes = sorted({r.cls for r in trust.requests(exp, None)})
        if classes:
            out[name] = classes
    return out

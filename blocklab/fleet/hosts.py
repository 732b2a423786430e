"""Fleet host names and the jobs a submission plans (pure: no database)."""

from __future__ import annotations

from dataclasses import dataclass

from blocklab.errors import UserError
from blocklab.experiment_file.fleet import HOST_RE, HOST_RULE

QUEUE_PREFIX = "blocklab:"


def check_host(name: str, flag: str = "--host") -> str:
    if not HOST_RE.match(name):
        raise UserError(f"{flag}: '{name}' is not a host name ({HOST_RULE})")
    return name


def parse_hosts(text: str, flag: str = "--hosts") -> list[str]:
    """'a,b,c' -> ['a', 'b', 'c']; a UserError for an empty list, a bad name or a repeat."""
    names = [h.strip() for h in text.split(",")]
    if not text.strip() or any(not h for h in names):
        raise UserError(f"{flag}: give host names separated by commas (e.g. a,b,c)")
    for h in names:
        check_host(h, flag)
    repeated = sorted({h for h in names if names.count(h) > 1})
    if repeated:
        raise UserError(f"{flag}: host {', '.join(repeated)} given twice")
    return names


def queue_of(host: str) -> str:
    """The procrastinate queue a host's agent takes jobs from."""
    return QUEUE_PREFIX + host


def host_of(queue: str) -> str:
    return queue.removeprefix(QUEUE_PREFIX)


@dataclass(frozen=True)
class JobSpec:
    """One paired round of one host's variants."""

    experiment: str
    host: str
    round_no: int

    @property
    def queueing_lock(self) -> str:  # the same round is never queued twice at once
        return f"{self.experiment}|{self.host}|{self.round_no}"

    def kwargs(self) -> dict[str, str | int]:
        return {"experiment": self.experiment, "host": self.host, "round_no": self.round_no}


def plan_jobs(
    experiment: str, hosts: list[str], rounds: int, done: dict[str, set[int]]
) -> list[JobSpec]:
    """Every (host, round) not complete yet, round by round (round 1 of every host first);
    `done` maps a host to its rounds whose runs are all stored."""
    return [
        JobSpec(experiment, h, r)
        for r in range(1, rounds + 1)
        for h in hosts
        if r not in done.get(h, set())
    ]

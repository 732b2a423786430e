"""What `fleet submit` recorded about an experiment (blocklab_fleet_experiments), and
the experiment rebuilt from it on an agent."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from blocklab.errors import UserError
from blocklab.experiment_file import Experiment


@dataclass(frozen=True)
class Submission:
    name: str
    spec_text: str
    spec_path: str
    overrides: dict[str, int]
    hosts: list[str]
    rounds: int
    until_ci_pct: float | None
    max_rounds: int | None
    submitted_at: str

    def experiment(self) -> Experiment:
        from blocklab.experiment_file.loader import _from_text

        exp = _from_text(self.spec_text, Path(self.spec_path), self.spec_path, self.overrides)
        return exp.model_copy(update={"rounds": self.rounds})

    def max_rounds_per_host(self) -> int:
        if self.until_ci_pct is None:
            return self.rounds
        return self.max_rounds or max(self.rounds * 4, 20)


COLUMNS = (
    "name, spec_text, spec_path, overrides_json, hosts_json, rounds, until_ci_pct, "
    "max_rounds, submitted_at"
)


def save(conn: psycopg.Connection[Any], s: Submission) -> None:
    """Record a submission; the same experiment submitted again must be the same file
    (more hosts or rounds are fine: they add jobs)."""
    row = conn.execute(
        "SELECT spec_text, overrides_json FROM blocklab_fleet_experiments WHERE name=%s",
        (s.name,),
    ).fetchone()
    if row is not None and (row[0], json.loads(row[1])) != (s.spec_text, s.overrides):
        raise UserError(
            f"FILE: experiment '{s.name}' was submitted before from another file or with "
            "other --duration/--scale/--clients/--cycles/--slices; give it another name"
        )
    conn.execute(
        f"INSERT INTO blocklab_fleet_experiments ({COLUMNS}) VALUES "
        "(%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (name) DO UPDATE SET "
        "hosts_json=EXCLUDED.hosts_json, rounds=EXCLUDED.rounds, "
        "until_ci_pct=EXCLUDED.until_ci_pct, max_rounds=EXCLUDED.max_rounds",
        (
            s.name,
            s.spec_text,
            s.spec_path,
            json.dumps(s.overrides, sort_keys=True),
            json.dumps(s.hosts),
            s.rounds,
            s.until_ci_pct,
            s.max_rounds,
            s.submitted_at,
        ),
    )


def load(conn: psycopg.Connection[Any], name: str) -> Submission:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM blocklab_fleet_experiments WHERE name=%s", (name,)
    ).fetchone()
    if row is None:
        raise UserError(f"experiment '{name}' was never submitted to the fleet")
    return _submission(row)


def all_submissions(conn: psycopg.Connection[Any]) -> list[Submission]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM blocklab_fleet_experiments ORDER BY submitted_at, name"
    ).fetchall()
    return [_submission(r) for r in rows]


def _submission(row: Any) -> Submission:
    return Submission(
        name=row[0],
        spec_text=row[1],
        spec_path=row[2],
        overrides=json.loads(row[3]),
        hosts=json.loads(row[4]),
        rounds=int(row[5]),
        until_ci_pct=row[6],
        max_rounds=row[7],
        submitted_at=row[8],
    )

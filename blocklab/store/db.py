"""SQLite results store. Each run is written in one transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab.errors import UserError

SCHEMA_VERSION = 2
# Later versions: version -> DDL file (in blocklab/store) applied on the way up from
# schema.sql (version 1). Each file only adds (CREATE ... IF NOT EXISTS).
MIGRATIONS = {2: "schema_v2_device_profiles.sql"}
RESULTS_DB_NAME = "blocklab.sqlite"


@dataclass
class RunRecord:
    """Everything one run produced. `tps` and friends are None for a failed run."""

    experiment: str
    variant_id: str
    round: int
    position: int
    status: str  # "ok" | "failed"
    started_at: str
    ended_at: str
    reason: str = ""
    tps: float | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    transactions: int | None = None
    failed_transactions: int | None = None
    exit_code: int | None = None
    command: str = ""
    raw_dir: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    series: Mapping[str, Sequence[tuple[float, float | None]]] = field(default_factory=dict)
    checkpoints: Sequence[Mapping[str, Any]] = field(default_factory=list)


class ResultsDB:
    def __init__(self, directory: Path, *, create: bool = True):
        self.directory = directory
        self.path = directory / RESULTS_DB_NAME
        if not self.path.exists() and not create:
            raise UserError(
                f"--results: no results database at {self.path} "
                "(run an experiment first, or point --results at a results directory)"
            )
        directory.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30.0)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self._migrate()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        row = self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if row is not None:
            found = self.conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
            if found is not None and found > SCHEMA_VERSION:
                raise UserError(
                    f"--results: {self.path} has schema version {found}; this blocklab "
                    f"knows up to {SCHEMA_VERSION}. Upgrade blocklab."
                )
        ddl = resources.files("blocklab.store").joinpath("schema.sql").read_text()
        self.conn.executescript(ddl)
        if self.conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 0:
            with self.tx():
                self.conn.execute("INSERT INTO schema_version VALUES (1)")
        self._upgrade()

    def _upgrade(self) -> None:
        found = self.conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        for version, name in sorted(MIGRATIONS.items()):
            if version > found:
                ddl = resources.files("blocklab.store").joinpath(name).read_text()
                self.conn.executescript(ddl)
                with self.tx():
                    self.conn.execute("INSERT INTO schema_version VALUES (?)", (version,))

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            yield self.conn
        except BaseException:
            self.conn.rollback()
            raise
        else:
            self.conn.commit()

    # --- experiments -------------------------------------------------------------
    def upsert_experiment(
        self,
        name: str,
        *,
        description: str,
        spec: Mapping[str, Any],
        seed: int,
        reference: str | None,
        created_at: str,
        host: Mapping[str, Any],
        variants: Sequence[tuple[str, str, str, Mapping[str, Any]]],
        references: Mapping[str, str] | None = None,
    ) -> None:
        """Create the experiment, or check that the stored one has the same spec.

        `variants` holds (variant_id, label, variant_json, dims); `references` maps a
        variant_id to the variant it is compared with (default: the experiment's reference)."""
        spec_json = json.dumps(spec, sort_keys=True)
        row = self.conn.execute(
            "SELECT spec_json FROM experiments WHERE name=?", (name,)
        ).fetchone()
        if row is not None and row["spec_json"] != spec_json:
            raise UserError(
                f"experiment '{name}' already exists in {self.path} with a different "
                "definition; rename the experiment (key 'name') or use another --results"
            )
        with self.tx() as c:
            if row is None:
                c.execute(
                    "INSERT INTO experiments (name, description, spec_json, seed, reference,"
                    " created_at, host_json) VALUES (?,?,?,?,?,?,?)",
                    (name, description, spec_json, seed, reference, created_at, json.dumps(host)),
                )
                refs = references or {}
                for pos, (vid, label, vjson, dims) in enumerate(variants):
                    c.execute(
                        "INSERT INTO variants VALUES (?,?,?,?,?,?,?)",
                        (
                            name,
                            vid,
                            label,
                            pos,
                            vjson,
                            json.dumps(dims, sort_keys=True),
                            refs.get(vid, reference),
                        ),
                    )
            else:
                c.execute("UPDATE experiments SET state='running' WHERE name=?", (name,))

    def set_experiment_state(self, name: str, state: str, end_reason: str = "") -> None:
        with self.tx() as c:
            c.execute(
                "UPDATE experiments SET state=?, end_reason=? WHERE name=?",
                (state, end_reason, name),
            )

    def experiments(self) -> list[sqlite3.Row]:
        return list(self.conn.execute("SELECT * FROM experiments ORDER BY created_at"))

    def experiment(self, name: str) -> sqlite3.Row:
        row = self.conn.execute("SELECT * FROM experiments WHERE name=?", (name,)).fetchone()
        if row is None:
            known = ", ".join(r["name"] for r in self.experiments()) or "none"
            raise UserError(f"EXPERIMENT: no experiment '{name}' in {self.path} (known: {known})")
        return row

    def variants(self, experiment: str) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT * FROM variants WHERE experiment=? ORDER BY position", (experiment,)
            )
        )

    # --- rounds ------------------------------------------------------------------
    def record_round(self, experiment: str, round_no: int, seed: int, order: Sequence[str]) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO rounds VALUES (?,?,?,?)",
                (experiment, round_no, seed, json.dumps(list(order))),
            )

    def rounds(self, experiment: str) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT * FROM rounds WHERE experiment=? ORDER BY round", (experiment,)
            )
        )

    # --- runs --------------------------------------------------------------------
    def record_run(self, r: RunRecord) -> int:
        """Write one run and everything it produced in a single transaction."""
        with self.tx() as c:
            cur = c.execute(
                "INSERT INTO runs (experiment, variant_id, round, position, status, reason,"
                " started_at, ended_at, tps, latency_avg_ms, latency_stddev_ms, transactions,"
                " failed_transactions, exit_code, command, raw_dir, settings_json, provenance_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    r.experiment,
                    r.variant_id,
                    r.round,
                    r.position,
                    r.status,
                    r.reason,
                    r.started_at,
                    r.ended_at,
                    r.tps,
                    r.latency_avg_ms,
                    r.latency_stddev_ms,
                    r.transactions,
                    r.failed_transactions,
                    r.exit_code,
                    r.command,
                    r.raw_dir,
                    json.dumps(r.settings, sort_keys=True, default=str),
                    json.dumps(r.provenance, sort_keys=True, default=str),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            c.executemany(
                "INSERT INTO metrics VALUES (?,?,?)",
                [(run_id, k, v) for k, v in r.metrics.items()],
            )
            c.executemany(
                "INSERT OR REPLACE INTO series VALUES (?,?,?,?)",
                [(run_id, name, t, v) for name, pts in r.series.items() for t, v in pts],
            )
            c.executemany(
                "INSERT INTO checkpoints VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (
                        run_id,
                        i,
                        cp.get("start_s"),
                        cp.get("end_s"),
                        cp.get("trigger", "unknown"),
                        cp.get("buffers_written"),
                        cp.get("bytes_written"),
                        cp.get("wal_distance_bytes"),
                        int(bool(cp.get("incomplete"))),
                    )
                    for i, cp in enumerate(r.checkpoints)
                ],
            )
        return run_id

    def runs(self, experiment: str, variant_id: str | None = None) -> list[sqlite3.Row]:
        sql = "SELECT * FROM runs WHERE experiment=?"
        args: list[Any] = [experiment]
        if variant_id is not None:
            sql += " AND variant_id=?"
            args.append(variant_id)
        return list(self.conn.execute(sql + " ORDER BY round, position", args))

    def run(self, run_id: int) -> sqlite3.Row:
        row = self.conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run with id {run_id} in {self.path}")
        return row

    def done_keys(self, experiment: str) -> set[tuple[str, int]]:
        """(variant_id, round) of every stored run, ok or failed: resume skips these."""
        return {
            (r["variant_id"], r["round"])
            for r in self.conn.execute(
                "SELECT variant_id, round FROM runs WHERE experiment=?", (experiment,)
            )
        }

    def metrics(self, run_id: int) -> dict[str, float | None]:
        return {
            r["name"]: r["value"]
            for r in self.conn.execute("SELECT name, value FROM metrics WHERE run_id=?", (run_id,))
        }

    def metric_names(self, experiment: str) -> list[str]:
        """Every metric stored for the experiment's runs, sorted."""
        rows = self.conn.execute(
            "SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = m.run_id"
            " WHERE r.experiment=? ORDER BY m.name",
            (experiment,),
        )
        return [r["name"] for r in rows]

    def series(self, run_id: int) -> dict[str, list[tuple[float, float | None]]]:
        out: dict[str, list[tuple[float, float | None]]] = {}
        for r in self.conn.execute(
            "SELECT name, t_s, value FROM series WHERE run_id=? ORDER BY name, t_s", (run_id,)
        ):
            out.setdefault(r["name"], []).append((r["t_s"], r["value"]))
        return out

    def checkpoints(self, run_id: int) -> list[sqlite3.Row]:
        return list(
            self.conn.execute("SELECT * FROM checkpoints WHERE run_id=? ORDER BY seq", (run_id,))
        )

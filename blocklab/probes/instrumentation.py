"""Instrumentation: begin() before the workload, end() after it.

One persistent psycopg connection (autocommit, so every sample is its own transaction
and sees fresh statistics) is used by the sampler thread while the workload runs, and
by end() afterwards (the thread is stopped first: a connection is never shared).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from blocklab.errors import RunError
from blocklab.probes import ProbeContext, ProbeResult, derived, disturbance, space, stat_io, views
from blocklab.probes import checkpoints as ckpt
from blocklab.probes.sampler import Sampler, Snapshot, host_snapshot, tree_cpu_s

MAX_LOG_BYTES = 64 * 1024 * 1024
STATEMENT_TIMEOUT_MS = 5000
SETTLE_TIMEOUT_S = 2.0  # exiting backends take milliseconds; a session that stays is noted
# Client backends flush their statistics when they exit (and at most once a second while
# they run): the final snapshot waits until the workload's backends are gone.
OTHER_CLIENTS_SQL = (
    "SELECT count(*) FROM pg_catalog.pg_stat_activity"
    " WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()"
)


class Instrumentation:
    def __init__(self, ctx: ProbeContext):
        self.ctx = ctx
        self._conn: psycopg.Connection[Any] | None = None
        self._plan: views.CounterPlan | None = None
        self._sql = ""
        self._sampler: Sampler | None = None
        self._before: Snapshot | None = None
        self._pgstattuple = False
        self._settle_s = 0.0
        self._clients_left = 0
        self._log_missing = False
        self._stat_io = False  # the server has pg_stat_io (16+)
        self._stat_io_basis = ""
        self._backing: dict[str, list[str]] = {}  # backing device -> the run's loop devices

    # -- public -----------------------------------------------------------------------
    def begin(self) -> None:
        """Connect, detect the columns, snapshot every counter, start the 1 Hz sampler."""
        self.prepare()
        self._sampler = Sampler(self._snapshot, self.ctx.interval_s)
        self._sampler.start()

    def prepare(self) -> None:
        """begin() without the sampler: connected, columns detected, first snapshot taken."""
        self._conn = self._connect()
        try:
            self._prepare(self._conn)
        except psycopg.Error as e:
            self.close()
            raise RunError(f"probes: could not prepare the sampler: {e}") from e

    @property
    def backend_pid(self) -> int | None:
        """The pid of the server backend that answers the probes' statements (after
        prepare(); None when not connected)."""
        return None if self._conn is None else self._conn.info.backend_pid

    def sample(self) -> Snapshot:
        """One of the sampler's snapshots (after prepare(); for the overhead self-test,
        which switches the sampler on and off: blocklab.execution.overhead_slices)."""
        return self._snapshot()

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        rows = conn.execute(views.COLUMNS_SQL, [list(views.VIEWS)]).fetchall()
        columns = views.columns_from_rows(rows)
        self._plan = views.plan_counters(columns, block_size_bytes=self.ctx.block_size_bytes)
        self._stat_io = "pg_stat_io" in columns
        self._stat_io_basis = _stat_io_basis(columns)
        self._backing = disturbance.backing_devices(self.ctx.devices)
        self._sql = self._plan.sql()
        if self.ctx.measure_space:
            self._pgstattuple = space.prepare(conn)
        # sessions that just ended (the runner's VACUUM/CHECKPOINT) flush their
        # statistics as they exit: let that land before the window opens
        self._wait_for_clients_to_exit()
        self._before = self._snapshot(with_server_cpu=True)

    def end(self, transactions: int, duration_s: float) -> ProbeResult:
        """Stop the sampler, take the final snapshot, parse the log, derive the metrics.

        Call it right after the workload ends: the interval from the last 1 Hz sample to
        the final snapshot is where the backends' exit flush is attributed
        (derived.build_series)."""
        if self._sampler is None or self._before is None or self._plan is None:
            raise RunError("probes: end() called without begin()")
        samples = self._sampler.stop()
        try:
            self._settle_s, self._clients_left = self._wait_for_clients_to_exit()
            after = self._snapshot(with_server_cpu=True)
            space_rows, space_missing = self._space()
        finally:
            self.close()
        return self._result(samples, after, space_rows, space_missing, transactions, duration_s)

    def end_probe_seconds(self) -> dict[str, float]:
        """The seconds each probe of begin() and end() (outside the window the workload
        runs in) takes once, for the overhead self-test: the pg_stat_io query, the CPU
        and device account of the process trees, the space pass (when ctx asks for it)."""
        assert self._conn is not None
        timed = {
            "pg_stat_io": lambda: self._query_stat_io([]),
            "cpu_account": lambda: disturbance.read_account(
                [self.ctx.server_pid], None, self._backing
            ),
            "space_pass": self._space,
        }
        out = {}
        for name, probe in timed.items():
            started = time.perf_counter()
            probe()
            out[name] = time.perf_counter() - started
        return out

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- internals --------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.ctx.conninfo, autocommit=True, connect_timeout=30)
        except psycopg.Error as e:
            raise RunError(f"probes: cannot connect to the server: {e}") from e
        conn.execute("SET application_name = 'blocklab-probes'")
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        return conn

    def _wait_for_clients_to_exit(self) -> tuple[float, int]:
        """(seconds waited, client backends still there at the timeout)."""
        assert self._conn is not None
        started = time.monotonic()
        left = 0
        while time.monotonic() - started < SETTLE_TIMEOUT_S:
            row = self._conn.execute(OTHER_CLIENTS_SQL).fetchone()
            left = int(row[0]) if row else 0
            if left == 0:
                break
            time.sleep(0.01)
        return time.monotonic() - started, left

    def _query_counters(self) -> tuple[dict[str, float | None], list[str]]:
        assert self._conn is not None and self._plan is not None
        names = self._plan.names
        try:
            row = self._conn.execute(
                self._sql, {"relations": list(self.ctx.relations)}, prepare=True
            ).fetchone()
        except psycopg.Error as e:
            return views.row_to_counters(names, None), [f"{time.time():.3f}: {e}"]
        return views.row_to_counters(names, row), []

    def _snapshot(self, with_server_cpu: bool = False) -> Snapshot:
        pg, errors = self._query_counters()
        snap = host_snapshot(pg, [d.name for d in self.ctx.devices], errors)
        if with_server_cpu:
            stats = disturbance.read_stats([self.ctx.server_pid])
            snap.server_cpu_s = tree_cpu_s(stats, self.ctx.server_pid)
            snap.cpu_account = disturbance.read_account([self.ctx.server_pid], stats, self._backing)
            snap.io = self._query_stat_io(snap.errors)
        return snap

    def _query_stat_io(self, errors: list[str]) -> dict[str, float] | None:
        """pg_stat_io's bytes (and 18+ requests) per object and context; None without it."""
        if not self._stat_io:
            return None
        assert self._conn is not None
        try:
            cur = self._conn.execute(stat_io.SQL)
            names = [c.name for c in cur.description or ()]
            rows = stat_io.rows_of(names, cur.fetchall())
        except psycopg.Error as e:
            errors.append(f"{time.time():.3f}: pg_stat_io: {e}")
            return None
        return stat_io.bytes_by_object_context(rows) | stat_io.requests_by_object_context(rows)

    def _space(self) -> tuple[list[dict[str, Any]], list[str]]:
        if not self.ctx.measure_space or self._conn is None:
            return [], []
        try:
            return space.measure(self._conn, self.ctx.relations, exact=self._pgstattuple)
        except psycopg.Error as e:
            return [], [f"space (pgstattuple): {e}".strip()]

    def _scopes(self) -> dict[str, str]:
        return derived.device_scopes(self.ctx.devices)

    def _checkpoint_counter(self) -> str | None:
        assert self._plan is not None
        names = self._plan.names
        if "checkpoints_done" in names:
            return "checkpoints_done"
        if {"checkpoints_timed", "checkpoints_requested"} <= set(names):
            return "checkpoints_started"
        return None

    def _result(
        self,
        samples: list[Snapshot],
        after: Snapshot,
        space_rows: list[dict[str, Any]],
        space_missing: list[str],
        transactions: int,
        duration_s: float,
    ) -> ProbeResult:
        assert self._before is not None and self._plan is not None
        before, scopes, counter = self._before, self._scopes(), self._checkpoint_counter()
        snaps = [before, *samples, after]
        metrics = derived.derive_metrics(
            before,
            after,
            transactions=transactions,
            duration_s=duration_s,
            block_size_bytes=self.ctx.block_size_bytes,
            scopes=scopes,
        )
        metrics |= derived.space_metrics(space_rows)
        metrics |= disturbance.metrics(before.cpu_account, after.cpu_account)
        timeline, ck_metrics, ck_facts = self._checkpoints(before, after, counter)
        metrics |= ck_metrics
        facts = self._facts(snaps, counter) | ck_facts
        missing = list(self._plan.missing) + space_missing
        if self._log_missing:
            missing.append("server_log")
        series = derived.build_series(snaps, scopes, counter)
        return ProbeResult(series, metrics, timeline, facts, missing)

    def _checkpoints(
        self, before: Snapshot, after: Snapshot, counter: str | None
    ) -> tuple[list[dict[str, Any]], dict[str, float | None], dict[str, Any]]:
        text = read_log(self.ctx.server_log)
        if text is None:
            self._log_missing = True
            return [], {}, {"checkpoint_log": f"unreadable: {self.ctx.server_log}"}
        tl = ckpt.timeline(
            ckpt.parse_log(text), before.epoch, after.epoch, self.ctx.block_size_bytes
        )
        c = ckpt.counts(tl)
        counted = derived.checkpoint_counter_delta(before, after, counter) if counter else None
        done_basis = counter == "checkpoints_done"
        logged = c["checkpoints_completed" if done_basis else "checkpoints_started"]
        metrics: dict[str, float | None] = {
            "checkpoints_counted": counted,
            "checkpoints_logged": float(logged),
            "checkpoints_incomplete": float(sum(1 for x in tl if x["incomplete"])),
            "checkpoint_overlap": float(bool(tl)),
            "checkpoint_bytes_written_logged": float(
                sum(x["bytes_written"] or 0 for x in tl if not x["incomplete"])
            ),
        }
        facts = {
            "checkpoint_count_basis": (
                "completed checkpoints (num_done)"
                if done_basis
                else "checkpoints started (timed + requested; skipped timed ones are counted)"
            ),
            "checkpoint_count_matches": counted is not None and counted == logged,
        }
        return tl, metrics, facts

    def _facts(self, snaps: list[Snapshot], counter: str | None) -> dict[str, Any]:
        assert self._plan is not None and self._sampler is not None
        scopes = self._scopes()
        errors = [e for s in snaps for e in s.errors]
        gaps = [b.epoch - a.epoch for a, b in zip(snaps, snaps[1:], strict=False)]
        return {
            "counter_basis": dict(self._plan.basis),
            "samples": len(snaps),
            "interval_s": self.ctx.interval_s,
            "max_sample_gap_s": max(gaps) if gaps else None,
            "sample_errors": errors[:20],
            "sampler_failure": self._sampler.failure,
            "devices": [
                {"name": d.name, "role": d.role, "shared": d.shared, "counted_as": scopes[d.name]}
                for d in self.ctx.devices
            ],
            "block_size_bytes": self.ctx.block_size_bytes,
            "wal_block_size_bytes": self.ctx.wal_block_size_bytes,
            "server_version_num": self.ctx.server_version_num,
            "stat_io_basis": self._stat_io_basis,
            "disturbance_basis": disturbance.BASIS,
            "disturbance_backing_devices": self._backing,
            "settle_s": round(self._settle_s, 3),
            "clients_left_at_end": self._clients_left,
            "begin_epoch": snaps[0].epoch,
            "end_epoch": snaps[-1].epoch,
        }


class Bystander:
    """What Instrumentation does around a workload, without measuring: the same
    connection (held open while the workload runs, idle) and the same waits for the
    previous and the workload's client backends to exit, before and after. The bare arm
    of the overhead self-test (blocklab.execution.overhead), so that its two arms differ
    in the counters and the sampler only."""

    def __init__(self, ctx: ProbeContext):
        self._probes = Instrumentation(ctx)

    def begin(self) -> None:
        self._probes._conn = self._probes._connect()
        try:
            self._probes._wait_for_clients_to_exit()
        except psycopg.Error as e:
            self.close()
            raise RunError(f"probes: could not wait for the clients: {e}") from e

    def end(self) -> float:
        """Wait for the workload's backends to exit; the seconds waited."""
        try:
            return self._probes._wait_for_clients_to_exit()[0]
        finally:
            self.close()

    def close(self) -> None:
        self._probes.close()


def _stat_io_basis(columns: views.Columns) -> str:
    """How the io_* metrics (blocklab.probes.stat_io) are measured on this server."""
    if views.has(columns, "pg_stat_io", "read_bytes"):
        return "pg_stat_io read_bytes, write_bytes, extend_bytes; requests counted as such"
    if views.has(columns, "pg_stat_io", "op_bytes"):
        return "pg_stat_io operations x op_bytes (blocks); no request sizes"
    return "no pg_stat_io (before PostgreSQL 16): no io_* metrics"


def read_log(path: Any) -> str | None:
    """The server log's text (its last MAX_LOG_BYTES); None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - MAX_LOG_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None

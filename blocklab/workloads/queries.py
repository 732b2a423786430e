"""Your own database: a pg_dump archive restored into each build and storage, and your
queries timed on it, query by query (issue 32).

Experiment file:

    [matrix]
    block_size = [4, 8]
    dataset = { dump = "app.dump" }                  # pg_dump -Fc (or -Fd) archive
    workload = { driver = "queries", file = "queries.sql", passes = 3 }

The dataset (blocklab.workloads.dataset, `load` below): the archive is copied into a
directory of the driver's OS user (root may read the user's file; the unprivileged
pg_restore then reads the copy), checked against the content hash the plan took, its
extensions checked against the build's (a missing one is a UserError naming it, before
anything is restored) and created by the server's superuser role, then restored by
pg_restore as the workload role (blocklab.workloads.role) with --no-owner
--no-privileges, --exit-on-error and one job per core; then VACUUM (FREEZE, ANALYZE).
The table fillfactor applies through blocklab.workloads.fillfactor's event trigger (each
table's CREATE, before its data), the index fillfactor after the load, like every other
driver's.

The run (blocklab.workloads.queries_psql): every statement `passes` times, timed by the
server, its EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) plan kept; the record is the TPC-H-like
driver's (per-query rows, so blocklab.analysis.query_summary's per-query comparison and
plan-change flags apply as they are).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blocklab.errors import CommandError, UserError
from blocklab.model import DatasetRequest, OptionValue, WorkloadRequest
from blocklab.postgres.installation import Installation
from blocklab.workloads import dump, dump_room, queries_params, queries_psql, role, statements, tpch
from blocklab.workloads.base import DriverSpec, Endpoint, RecordPart, WorkloadResult
from blocklab.workloads.execution import run_driver

if TYPE_CHECKING:
    from blocklab.postgres.cluster import Cluster

NAME = "queries"
LABEL = "your queries: server time under EXPLAIN (ANALYZE, BUFFERS), planning + execution"
DATABASE = "postgres"
MAX_PASSES = 100
RUN_KEYS = ("file", "passes", "timeout")
QUERIES_FILE = "queries.json"  # in the run's raw directory: times, plans, failures
RESTORE_FLAGS = ("--no-owner", "--no-privileges", "--no-comments", "--no-tablespaces",
                 "--no-publications", "--no-subscriptions", "--no-security-labels",
                 "--exit-on-error")  # fmt: skip


def read_keys(table: Mapping[str, Any], path: str) -> dict[str, OptionValue]:
    """file (a queries file; its path resolved by the caller), passes, timeout (seconds
    per statement, 0: none). UserError naming the key. Reads the file."""
    unknown = sorted(set(table) - set(RUN_KEYS))
    if unknown:
        raise UserError(f"{path}.{unknown[0]}: unknown key; allowed: {', '.join(RUN_KEYS)}")
    file = table.get("file")
    if not isinstance(file, str) or not file:
        raise UserError(f'{path}.file: missing; allowed: a queries file, e.g. "queries.sql"')
    passes = table.get("passes", 3)
    if isinstance(passes, bool) or not isinstance(passes, int) or not 1 <= passes <= MAX_PASSES:
        raise UserError(f"{path}.passes: {passes!r} is not a whole number from 1 to {MAX_PASSES}")
    timeout = table.get("timeout", 0)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 <= timeout <= 86400:
        raise UserError(f"{path}.timeout: {timeout!r} is not whole seconds from 0 (none) to 86400")
    stmts, params = read_statements(file, f"{path}.file")
    if queries_psql.argv_bytes(stmts, passes, params) > queries_psql.MAX_ARGV_BYTES:
        raise UserError(
            f"{path}.passes: {passes} passes of {file} make over "
            f"{queries_psql.MAX_ARGV_BYTES} bytes of psql arguments; allowed: fewer passes "
            "or a shorter file"
        )
    return {"file": file, "passes": passes, "timeout": timeout}


def read_statements(
    file: str, key: str
) -> tuple[list[statements.Statement], dict[str, queries_params.Params]]:
    """The statements and, by name, the params of those that have a `-- params:` line
    (its CSV beside the queries file: blocklab.workloads.queries_params)."""
    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise UserError(f"{key}: {file}: {why}; allowed: a readable SQL file") from None
    stmts = statements.read(text, f"{key} ({file})")
    return stmts, queries_params.read_all(text, stmts, Path(file).parent, f"{key} ({file})")


def client_argv(
    inst: Installation, endpoint: Endpoint, workload: WorkloadRequest, *, warmup: bool
) -> list[str]:
    """psql with every statement x passes as `-c` strings (blocklab.workloads.queries_psql;
    the user's file need not be readable by the driver's user)."""
    opts = dict(workload.options)
    stmts, params = read_statements(str(opts["file"]), "matrix.workload.file")
    passes = 1 if warmup else int(opts.get("passes", 3))
    timeout_ms = int(opts.get("timeout", 0)) * 1000
    return queries_psql.argv(str(inst.bin("psql")), endpoint, stmts, passes, timeout_ms, params)


def parse(stdout: str, stderr: str) -> WorkloadResult:
    """psql's output: the statements that failed, with the server's message."""
    doc = queries_psql.document(stdout, stderr)
    failed: dict[str, str] = doc["failed"]
    errors = tuple(f"{k}: {v}" for k, v in failed.items())
    if not errors and not doc["queries"]:
        errors = tuple(stderr.strip().splitlines()[-1:])
    return WorkloadResult(
        throughput=None,
        throughput_unit="queries/h",
        latency_avg_ms=None,
        latency_stddev_ms=None,
        transactions=None,
        failed=len(failed),
        errors=errors,
        report={"label": LABEL, "failed_queries": failed, "ran": len(doc["queries"])},
    )


def verdict(exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
    """A run is a result when at least one statement ran; a failed statement is that
    statement's failure (in the report), not the run's."""
    if not server_alive:
        return "the server died during the run"
    first = f": {result.errors[0]}" if result.errors else ""
    if exit_code != 0:
        return f"psql exited with code {exit_code}{first}"
    if not result.report.get("ran"):
        return f"no statement ran{first}"
    return ""


def record(raw_dir: Path) -> RecordPart:
    """Per-query rows (as the TPC-H-like driver's) from psql's output, which is also kept
    as raw_dir/QUERIES_FILE."""
    stdout = (raw_dir / f"{NAME}.stdout").read_text(errors="replace")
    stderr = (raw_dir / f"{NAME}.stderr").read_text(errors="replace")
    doc = queries_psql.document(stdout, stderr)
    (raw_dir / QUERIES_FILE).write_text(json.dumps(doc, indent=1))
    records = tpch.query_records(doc)
    metrics = tpch.metrics_of(records)
    for q in doc["queries"]:
        for what in ("shared_hit_bytes", "shared_read_bytes"):
            values = q[what]
            metrics[f"{q['query']}_{what}"] = sum(values) / len(values) if values else None
    return RecordPart(
        metrics=metrics, series={}, queries=records, throughput=metrics["queries_per_hour"]
    )


# -- the dataset: the dump restored ----------------------------------------------------------


def dump_of(dataset: DatasetRequest) -> tuple[Path, str]:
    return Path(str(dataset.option("dump"))), str(dataset.option("dump_sha256"))


def check_extensions(cluster: Cluster, archive: Path, source: Path) -> list[str]:
    """The archive's extensions; UserError naming the file and the first one the build
    lacks (or pg_restore's own message when it cannot read the archive: a newer pg_dump)."""
    try:
        listing = run_driver([str(cluster.inst.bin("pg_restore")), "--list", str(archive)],
                             timeout_s=600).stdout  # fmt: skip
    except CommandError as e:
        tail = e.output.strip().splitlines()[-1:] or [str(e)]
        raise UserError(
            f"matrix.dataset.dump: {source}: pg_restore {cluster.inst.version} cannot read it: "
            f"{tail[0]}; allowed: {dump.ALLOWED} from a pg_dump of this version or older"
        ) from None
    wanted = dump.extensions(listing)
    sql = "SELECT name FROM pg_catalog.pg_available_extensions"
    available = cluster.psql(sql, dbname=DATABASE).split()
    missing = dump.missing_extensions(wanted, available)
    if missing:
        raise UserError(
            f"matrix.dataset.dump: {source} needs the extension {missing[0]!r}, which the "
            f"build {cluster.inst.version} lacks; allowed: a dump whose extensions the "
            "build has (or a build configured with them)"
        )
    return wanted


def load(cluster: Cluster, dataset: DatasetRequest) -> None:
    """Restore the dump into the running, empty cluster (see the module's docstring)."""
    source, sha256 = dump_of(dataset)
    with dump.staged(source, sha256) as archive:
        for ext in check_extensions(cluster, archive, source):
            cluster.psql(f'CREATE EXTENSION IF NOT EXISTS "{ext}"', dbname=DATABASE)
        cluster.psql(role.handover_sql(), dbname=DATABASE)
        argv = [str(cluster.inst.bin("pg_restore")), *RESTORE_FLAGS,
                "--jobs", str(os.cpu_count() or 1), "-h", str(cluster.socket_dir),
                "-p", str(cluster.port), "-U", role.ROLE, "-d", DATABASE, str(archive)]  # fmt: skip
        try:
            run_driver(argv, timeout_s=24 * 3600)
        except CommandError as e:
            lines = e.output.strip().splitlines()
            said = [ln for ln in lines if "error:" in ln.lower()] or lines[-3:]
            raise UserError(
                f"matrix.dataset.dump: {source}: pg_restore failed: {' '.join(said[:3])}"
            ) from None
    cluster.psql("VACUUM (FREEZE, ANALYZE)", dbname=DATABASE, timeout_s=24 * 3600)


# -- the driver ----------------------------------------------------------------------------


class QueriesDriver:
    name = NAME
    throughput_metric = "queries per hour"  # server time only, as the TPC-H-like driver's
    throughput_unit = "queries/h"
    database = DATABASE
    sets_fillfactor = False  # the event trigger sets it on each table the restore creates
    vacuum_after_load = False  # load ends with VACUUM (FREEZE, ANALYZE)

    def read_spec(
        self, table: Mapping[str, Any], path: str, *, scale: int | None = None
    ) -> DriverSpec:
        """file, passes, timeout (matrix.scale does not apply: the dump is the size).
        One connection: the statements run one after another."""
        run = read_keys(table, path)
        label = f"queries-{Path(str(run['file'])).stem}"
        return DriverSpec(label=label, dataset={}, run=run, clients=1)

    def check_machine(self) -> str:
        """The build's psql and pg_restore: nothing else to install."""
        return "psql and pg_restore of each build"

    def dataset_bytes(self, dataset: DatasetRequest, block_size_bytes: int) -> tuple[int, str]:
        """Measured at an earlier restore, else estimated from the dump: dump_room says
        which, with the figure."""
        return dump_room.room(dataset, block_size_bytes)

    def load_estimate_s(self, dataset: DatasetRequest) -> float:
        """pg_restore + VACUUM (FREEZE, ANALYZE): a few seconds fixed, about 1 min per
        100 MB of archive here (a rough guess for the plan's ETA)."""
        return 5.0 + dump_room.archive_bytes(dump_of(dataset)[0]) / 100e6 * 60

    def dataset_label(self, dataset: DatasetRequest) -> str:
        source, sha256 = dump_of(dataset)
        return f"pg_restore {source.name} ({sha256[:12]})"

    def init_commands(
        self, inst: Installation, endpoint: Endpoint, dataset: DatasetRequest
    ) -> list[list[str]]:
        return []  # `load` restores the dump (it needs the cluster, not only argvs)

    def load(self, cluster: Cluster, dataset: DatasetRequest) -> None:
        load(cluster, dataset)

    def prepare_sql(self, workload: WorkloadRequest) -> str | None:
        return None

    def command(
        self,
        inst: Installation,
        endpoint: Endpoint,
        workload: WorkloadRequest,
        *,
        raw_dir: Path | None,
        duration_s: int | None = None,
    ) -> list[str]:
        """The measured run: every statement `passes` times; a warm-up: each once,
        unrecorded (`duration_s` does not apply: the statements run to their end)."""
        return client_argv(inst, endpoint, workload, warmup=raw_dir is None)

    def shown_command(self, argv: list[str]) -> str:
        """The plan's line for the argv (which holds every statement, every pass)."""
        return queries_psql.shown(argv)

    def parse(self, stdout: str, stderr: str) -> WorkloadResult:
        return parse(stdout, stderr)

    def verdict(self, exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
        return verdict(exit_code, result, server_alive=server_alive)

    def record(self, result: WorkloadResult, stderr: str, raw_dir: Path) -> RecordPart:
        return record(raw_dir)

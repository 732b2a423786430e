"""The interface every workload driver implements (pgbench, sysbench, go-tpc tpcc, ...).

A driver is registered by name in blocklab.workloads.drivers; an experiment file picks it
with `workload = { driver = "NAME", ... }` (no driver key: pgbench, whose keys are read by
blocklab.experiment_file.workload). The spec, sizing, dataset and runner code call a driver only
through `WorkloadDriver`, in this order:

    plan:     spec = driver.read_spec(table, path)     # pure; UserError naming the key
              driver.check_machine()                    # its program is installed
              driver.dataset_bytes(dataset, block_size_bytes)  # rough size, for sizing
    dataset:  (blocklab.workloads.dataset) CREATE DATABASE driver.database unless "postgres";
              (as the server's superuser role, the OS user blocklab.workloads.execution's)
              the fillfactor event trigger unless driver.sets_fillfactor;
              driver.load(cluster, dataset_request), when the driver has it (optional: a
                load that needs the running cluster, e.g. the queries driver's pg_restore)
              for argv in driver.init_commands(inst, endpoint, dataset_request): run argv
              index fillfactor + REINDEX; VACUUM (ANALYZE) if driver.vacuum_after_load;
              the database and its tables handed to the workload role (blocklab.workloads.role)
    run:      sql = driver.prepare_sql(workload)          # before the CHECKPOINT, may be None
              argv = driver.command(inst, endpoint, workload, raw_dir=None, duration_s=warmup_s)
              argv = driver.command(inst, endpoint, workload, raw_dir=raw_dir)   # measured
              result = driver.parse(stdout, stderr)       # pure
              reason = driver.verdict(exit_code, result, server_alive=...)  # "" = a result
              part = driver.record(result, stderr, raw_dir)  # metrics and series to store
    plan view: driver.shown_command(argv), when the driver has it (optional: an argv
              too long to print, e.g. the queries driver's, in one line)

Raw files: the runner keeps `<name>.argv`, `<name>.stdout`, `<name>.stderr` and
`<name>.exit_code` (and `warmup.*`) in the run's raw directory; a driver may write more
files there through its command line (pgbench's per-transaction logs) and read them in `record`,
and add to the run's provenance through `RecordPart.provenance`.
Provenance gets `<name>_argv`, `<name>_version` and `<name>_report` (the tool's whole
parsed report).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from blocklab.model import DatasetRequest, OptionValue, WorkloadRequest
from blocklab.postgres.installation import Installation
from blocklab.store.base import QueryRow
from blocklab.workloads.role import ROLE

if TYPE_CHECKING:
    from blocklab.postgres.cluster import Cluster

Series = dict[str, list[tuple[float, float | None]]]


@dataclass(frozen=True)
class Endpoint:
    """Where a workload client connects: the server's unix socket directory, port, the
    database role it connects as and the database."""

    socket_dir: str
    port: int
    user: str
    dbname: str = "postgres"


def endpoint(cluster: Cluster, *, role: str = ROLE) -> Endpoint:
    """The workload's endpoint: as the workload role (blocklab.workloads.role: owns the
    database, not a superuser); a load passes the server's superuser role instead."""
    return Endpoint(str(cluster.socket_dir), cluster.port, role)


def run_endpoint(cluster: Cluster, driver: object) -> Endpoint:
    """Where a driver's runs connect: as the workload role, unless the driver says it
    needs the superuser role on this server's major version (an optional
    `needs_superuser(major) -> bool`; the TPC-H-like driver before PostgreSQL 15)."""
    needs = getattr(driver, "needs_superuser", None)
    superuser = needs is not None and bool(needs(cluster.inst.major))
    return endpoint(cluster, role=cluster.user.name if superuser else ROLE)


@dataclass(frozen=True)
class WorkloadResult:
    """What one execution of a workload tool reported, parsed (pure). Numbers are None
    when the tool did not print them; `verdict` decides whether they count."""

    throughput: float | None  # in `throughput_unit` ("tps" for pgbench)
    throughput_unit: str
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    transactions: int | None  # completed
    failed: int | None  # failed transactions (or errors) the tool counted
    errors: Sequence[str] = ()  # the tool's own error lines, in order
    version: str | None = None
    report: Mapping[str, Any] = field(default_factory=dict)  # the tool's whole report


@dataclass(frozen=True)
class RecordPart:
    """What a successful run's record gets from the driver, beside the result's numbers."""

    metrics: dict[str, float | None]
    series: Series
    queries: Sequence[QueryRow] = ()  # per-query times and plans (SQL workloads)
    throughput: float | None = None  # when only the record knows it (tpch: server times)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # into the run's provenance


@dataclass(frozen=True)
class DriverSpec:
    """A driver's reading of one `workload = { driver = ..., ... }` table (pure)."""

    label: str  # the workload's label part, e.g. "oltp_write_only" or "tpcc-w4"
    dataset: dict[str, OptionValue]  # the dataset's identity: the size keys
    run: dict[str, OptionValue]  # what each run does (e.g. sysbench's test)
    clients: int | None = None  # the table's concurrency (threads); None: matrix.clients


class WorkloadDriver(Protocol):
    @property
    def name(self) -> str:
        """The driver's name in an experiment file, and the stem of its raw files."""
        ...

    @property
    def throughput_metric(self) -> str:
        """What its throughput is called in tables and reports: "tps", "tpmC", ..."""
        ...

    @property
    def throughput_unit(self) -> str:
        """The unit of that number, spelled out ("transactions/s", "NEW_ORDER/min")."""
        ...

    @property
    def database(self) -> str:
        """The database its dataset lives in (created by blocklab unless "postgres")."""
        ...

    @property
    def sets_fillfactor(self) -> bool:
        """True when init_commands apply the table fillfactor themselves (pgbench -F);
        otherwise blocklab.workloads.dataset sets it on every table the load creates."""
        ...

    @property
    def vacuum_after_load(self) -> bool:
        """True: blocklab.workloads.dataset runs VACUUM (ANALYZE) on the loaded database."""
        ...

    def read_spec(
        self, table: Mapping[str, Any], path: str, *, scale: int | None = None
    ) -> DriverSpec:
        """The workload table's keys (all but `driver`), checked: UserError naming the
        key path and the allowed values. `scale` is matrix.scale when the file or
        --scale gives it: the driver maps it to its own size (1: a smoke-test size).
        Pure."""
        ...

    def check_machine(self) -> str:
        """The driver's program is installed and usable: its version (UserError saying
        `make setup` otherwise)."""
        ...

    def dataset_bytes(self, dataset: DatasetRequest, block_size_bytes: int) -> tuple[int, str]:
        """A rough size of the loaded tables and indexes, and how it was estimated."""
        ...

    def load_estimate_s(self, dataset: DatasetRequest) -> float:
        """A rough time of the load (for the plan's ETA)."""
        ...

    def dataset_label(self, dataset: DatasetRequest) -> str:
        """The dataset in a log line: "pgbench -s 10", "sysbench 4 x 100000 rows"."""
        ...

    def init_commands(
        self, inst: Installation, endpoint: Endpoint, dataset: DatasetRequest
    ) -> list[list[str]]:
        """The argvs that load the dataset into a running, empty cluster, in order."""
        ...

    def prepare_sql(self, workload: WorkloadRequest) -> str | None:
        """SQL run before the CHECKPOINT that precedes every execution (None: nothing)."""
        ...

    def command(
        self,
        inst: Installation,
        endpoint: Endpoint,
        workload: WorkloadRequest,
        *,
        raw_dir: Path | None,
        duration_s: int | None = None,
    ) -> list[str]:
        """The argv of the measured execution (logs under `raw_dir`), or with raw_dir None
        of an unmeasured warm-up. `duration_s` overrides the workload's duration.
        Raises UserError for a workload that cannot run (a missing script file)."""
        ...

    def parse(self, stdout: str, stderr: str) -> WorkloadResult:
        """The tool's output, parsed (pure)."""
        ...

    def verdict(self, exit_code: int | None, result: WorkloadResult, *, server_alive: bool) -> str:
        """Why an execution is not a result ("" when it is one). Pure."""
        ...

    def record(self, result: WorkloadResult, stderr: str, raw_dir: Path) -> RecordPart:
        """Metrics and per-second series of a successful execution (may read raw_dir)."""
        ...

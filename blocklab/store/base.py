"""What a results back end offers (SQLite, blocklab.store.sqlite; PostgreSQL, store.postgres).

Callers read and write results only through these methods; rows come back as `Row`
(read by column name: `row["tps"]`). A back end keeps its schema and its versioning
to itself. Writes are atomic per unit of work: one run with its metrics, series and
checkpoints; one device-profile point.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Row(Protocol):
    """A stored row, read by column name."""

    def __getitem__(self, key: str, /) -> Any: ...
    def keys(self) -> list[str]: ...


class DictRow(dict[str, Any]):
    """A Row as a dict (PostgreSQL's rows, and the runs a SQLite store reads ahead): one
    hash lookup a column, where sqlite3.Row compares the names one by one (0.3 to 0.65 µs
    a lookup in the runs' 21 columns; the report looks up millions)."""

    def keys(self) -> list[str]:  # type: ignore[override]
        return list(super().keys())


# What a resident process (`report --watch`) keeps of the runs it read ahead, from one
# update to the next: experiment -> run id -> (its key columns id, started_at, ended_at;
# its row; its metrics). A stored run's row and metrics never change, and a run id the
# store gives again after its run was removed comes with other key columns.
RunsKept = dict[str, dict[int, tuple[tuple[Any, ...], Any, dict[str, float | None]]]]
# a run's stationarity trends to keep with it (analysis.kept_trends.judged): the method
# they were judged by, and a row (series, *TREND_COLUMNS) a series, the run's own first
KeptTrends = tuple[str, Sequence[tuple[Any, ...]]]


def run_key(run: Any) -> tuple[Any, ...]:
    """A stored run's key columns (id, started_at, ended_at), as a report names the run
    from one update to the next: its row, metrics and series never change, and a run id
    the store gives again (after its run was removed, or results made again in the same
    place) comes with another start and end."""
    return (run["id"], run["started_at"], run["ended_at"])


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
    host: str = ""  # the fleet host that ran it; "" on one machine
    copy_index: int = 0  # the variant's n-th run in this round (A B B A, A/A arms)
    queries: Sequence[QueryRow] = field(default_factory=list)  # per-query times and plans


@dataclass(frozen=True)
class QueryRow:
    """One query of a run (SQL workloads): its server-side time and the plan it got."""

    query: str  # "q1"
    calls: int
    time_ms_mean: float
    time_ms_total: float
    plan_fingerprint: str | None  # blocklab.workloads.plans.fingerprint; None: no plan captured
    plan_json: str | None  # the normalised plan


# a device-profile point's numbers (fio.Result attributes of the same names)
POINT_COLUMNS = (
    "iops",
    "bw_bytes_per_s",
    "lat_mean_us",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p999_us",
    "runtime_s",
)


@dataclass(frozen=True)
class DeviceProfileHead:
    """A device profile's identity, stored before its first point runs."""

    name: str
    created_at: str
    target: Mapping[str, Any]
    host: Mapping[str, Any]
    fio_version: str
    ioengine: str
    runtime_s: float
    size_bytes: int


@dataclass(frozen=True)
class DevicePoint:
    """One measured (or failed: `values` all None, `reason` set) device-profile point."""

    pattern: str
    request_bytes: int
    iodepth: int
    status: str  # "ok" | "failed"
    reason: str
    values: Mapping[str, float | None]  # POINT_COLUMNS
    command: str
    fio_json: str


class ResultsStore(Protocol):
    """The results back end's interface (blocklab.store.sqlite.ResultsDB implements it)."""

    @property
    def directory(self) -> Path:  # the results directory: runs' raw files live under it
        ...

    @property
    def location(self) -> str:  # where the results are stored, for messages
        ...

    def raw_ref(self, raw_dir: Path) -> str:  # what runs.raw_dir records for a run's files
        ...

    def close(self) -> None: ...
    def reopen(self) -> ResultsStore: ...
    def __enter__(self) -> ResultsStore: ...
    def __exit__(self, *exc: object) -> None: ...

    # experiments and their variants
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
    ) -> None: ...
    def set_experiment_state(self, name: str, state: str, end_reason: str = "") -> None: ...
    def experiments(self) -> Sequence[Row]: ...
    def experiment(self, name: str) -> Row: ...
    def variants(self, experiment: str) -> Sequence[Row]: ...
    def variant_jsons(self) -> list[str]: ...  # every stored variant, all experiments

    # rounds and runs
    def record_round(
        self, experiment: str, round_no: int, seed: int, order: Sequence[str]
    ) -> None: ...
    def rounds(self, experiment: str) -> Sequence[Row]: ...
    def record_run(self, r: RunRecord, trends: KeptTrends | None = None) -> int:
        """One run and what it produced, with its kept trends if given, in one
        transaction; returns its id."""
        ...

    def change_marker(self) -> tuple[Any, ...]:
        """Differs whenever a write the report reads was committed since it was taken."""
        ...

    def read_ahead(self, experiment: str, kept: RunsKept | None = None) -> None:
        """Answer runs(experiment) and metrics() of its runs from one read from now on;
        with `kept`, read only the runs it does not hold, and leave it holding them."""
        ...

    def runs(self, experiment: str, variant_id: str | None = None) -> Sequence[Row]: ...
    def run(self, run_id: int) -> Row: ...
    def run_texts(self, run_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """run id -> its (settings_json, provenance_json), read in bulk: the runs read
        ahead hold neither (blocklab.store.read_ahead)."""
        ...

    def run_keys(self, experiment: str, host: str = "") -> set[tuple[str, int, int]]: ...
    def provenance_jsons(self) -> list[str]: ...  # every stored run, all experiments
    def metrics(self, run_id: int) -> dict[str, float | None]: ...
    def metric_names(self, experiment: str) -> list[str]: ...
    def series(self, run_id: int) -> dict[str, list[tuple[float, float | None]]]: ...
    def series_of_runs(
        self, run_ids: Sequence[int], chunk: int = 200, *, names: Sequence[str] | None = None
    ) -> Iterator[tuple[int, dict[str, list[tuple[float, float | None]]]]]:
        """(run id, series) of each run in the given order, read in bulk (the report);
        with `names`, only the series of those names."""
        ...

    def run_trends(self, run_ids: Sequence[int], method: str) -> dict[int, list[tuple[Any, ...]]]:
        """run id -> its kept stationarity trend rows (series, n, mean, start_value,
        end_value, change_pct, p_value, drifted) under `method` (schema version 5)."""
        ...

    def keep_run_trends(self, method: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Keep rows (run_id, series, n, ...) under `method`, replacing those runs' rows."""
        ...

    def checkpoints(self, run_id: int) -> Sequence[Row]: ...
    def checkpoints_of_runs(self, run_ids: Sequence[int]) -> dict[int, list[Row]]:
        """run id -> its checkpoints, as checkpoints(run_id) gives them, read in bulk."""
        ...

    def run_queries(self, experiment: str, run_id: int | None = None) -> Sequence[Row]:
        """Every query row of the experiment's runs (or of one run), with the run's
        variant_id, round and status (schema version 4)."""
        ...

    def query_plans(self, fingerprints: Sequence[str]) -> dict[str, str]:
        """fingerprint -> normalised plan JSON."""
        ...

    # device profiles
    def create_device_profile(self, head: DeviceProfileHead) -> int: ...
    def device_profile_exists(self, name: str) -> bool: ...
    def record_device_point(self, profile_id: int, point: DevicePoint) -> None: ...
    def set_device_profile_state(self, profile_id: int, state: str) -> None: ...
    def device_profiles(self) -> Sequence[Row]: ...  # with `points` and `failed_points`
    def device_profile(self, name: str) -> Row | None: ...
    def device_points(self, profile_id: int) -> Sequence[Row]: ...

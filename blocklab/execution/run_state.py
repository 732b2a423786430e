"""What one run runs on and what it gathers: its target, its label and its state so far."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from blocklab.execution.controls import RunControls
from blocklab.model import Variant
from blocklab.postgres import settings_policy
from blocklab.postgres.cluster import Cluster
from blocklab.workloads import dataset, drivers
from blocklab.workloads.base import WorkloadDriver

# -- inputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunTarget:
    """What a run runs on: the variant, its server, its dataset and its devices."""

    variant: Variant
    cluster: Cluster
    snapshot: dataset.Snapshot
    # the settings the server gets under the variant's policy (settings_policy.for_variant)
    settings: settings_policy.Conversion
    devices: Sequence[Any] = ()
    storage_facts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def driver(self) -> WorkloadDriver:
        return drivers.for_workload(self.variant.workload)


@dataclass(frozen=True)
class RunLabel:
    experiment: str
    round_no: int
    position: int


# -- what a run gathers --------------------------------------------------------------------


class ProbeResultLike(Protocol):
    @property
    def series(self) -> Mapping[str, Sequence[tuple[float, float | None]]]: ...
    @property
    def metrics(self) -> Mapping[str, float | None]: ...
    @property
    def checkpoints(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def facts(self) -> Mapping[str, Any]: ...
    @property
    def missing(self) -> Sequence[str] | Mapping[str, str]: ...


@dataclass
class RunState:
    """What a run has gathered so far (filled phase by phase)."""

    raw_dir: Path
    phases_s: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    reason: str = ""
    server_alive: bool = True
    probe: ProbeResultLike | None = None
    workload_s: float = 0.0
    footprint: dict[str, Any] = field(default_factory=dict)  # blocklab.probes.footprint.measure()
    no_space: str = ""  # "no space left on DEVICE (...)" when a volume filled up
    controls: RunControls = field(default_factory=RunControls)
    placed: dict[str, Any] = field(default_factory=dict)  # what placement applied, and not
    driver_prefix: list[str] = field(default_factory=list)  # taskset for the driver
    metrics: dict[str, float | None] = field(default_factory=dict)  # quiesce, cycles
    cycle_opening_epoch: float | None = None  # cycles: the checkpoint start the window opens at
    cycle_log_offset: int = 0  # cycles: the server log's size when the lead-in started

    def timed(self, name: str, t0: float) -> None:
        self.phases_s[name] = round(time.monotonic() - t0, 6)

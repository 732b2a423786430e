"""The workload drivers by name: `get(name)` for the runner and the dataset code."""

from __future__ import annotations

from collections.abc import Callable

from blocklab.errors import UserError
from blocklab.model import WorkloadRequest
from blocklab.workloads.base import WorkloadDriver
from blocklab.workloads.pgbench_driver import PgbenchDriver

DEFAULT = "pgbench"
# name -> factory; the sysbench and go-tpc drivers register here when they implement
# blocklab.workloads.base.WorkloadDriver
_FACTORIES: dict[str, Callable[[], WorkloadDriver]] = {"pgbench": PgbenchDriver}


def names() -> list[str]:
    return sorted(_FACTORIES)


def get(name: str) -> WorkloadDriver:
    """The driver called `name`; UserError naming the allowed drivers otherwise."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise UserError(f"workload.driver: unknown driver {name!r}; allowed: {', '.join(names())}")
    return factory()


def for_workload(workload: WorkloadRequest) -> WorkloadDriver:
    """The driver that runs `workload`. A WorkloadRequest has no driver key yet (adding
    one changes every variant id): every workload is pgbench until the workloads issue
    adds the key and this reads it."""
    return get(DEFAULT)

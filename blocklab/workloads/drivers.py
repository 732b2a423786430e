"""The workload drivers by name: `get(name)` for the runner and the dataset code."""

from __future__ import annotations

from collections.abc import Callable

from blocklab.errors import UserError
from blocklab.model import DEFAULT_DRIVER, DatasetRequest, WorkloadRequest
from blocklab.workloads.base import WorkloadDriver
from blocklab.workloads.pgbench_driver import PgbenchDriver
from blocklab.workloads.queries import QueriesDriver
from blocklab.workloads.sysbench_driver import SysbenchDriver
from blocklab.workloads.tpcc_driver import TpccDriver
from blocklab.workloads.tpch import TpchDriver

DEFAULT = DEFAULT_DRIVER
# name -> factory of a blocklab.workloads.base.WorkloadDriver; a new driver adds a line
_FACTORIES: dict[str, Callable[[], WorkloadDriver]] = {
    "pgbench": PgbenchDriver,
    "queries": QueriesDriver,
    "sysbench": SysbenchDriver,
    "tpcc": TpccDriver,
    "tpch": TpchDriver,
}


def names() -> list[str]:
    return sorted(_FACTORIES)


def get(name: str) -> WorkloadDriver:
    """The driver called `name`; UserError naming the allowed drivers otherwise."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise UserError(f"workload.driver: unknown driver {name!r}; allowed: {', '.join(names())}")
    return factory()


def for_workload(workload: WorkloadRequest) -> WorkloadDriver:
    """The driver that runs `workload`."""
    return get(workload.driver)


def for_dataset(dataset: DatasetRequest) -> WorkloadDriver:
    """The driver that loads `dataset`."""
    return get(dataset.driver)

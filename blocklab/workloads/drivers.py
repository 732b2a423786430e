"""The workload drivers by name: `get(name)` for the runner and the dataset code.

A driver's module is imported when the driver is first asked for: the report and the
summary ask for one driver's throughput words, and importing all five took a tenth of a
second in each of the report's two processes."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from blocklab.errors import UserError
from blocklab.model import DEFAULT_DRIVER, DatasetRequest, WorkloadRequest
from blocklab.workloads.base import WorkloadDriver

DEFAULT = DEFAULT_DRIVER
# name -> (module, class) of a blocklab.workloads.base.WorkloadDriver; a new driver adds
# a line
_FACTORIES: dict[str, tuple[str, str]] = {
    "pgbench": ("blocklab.workloads.pgbench_driver", "PgbenchDriver"),
    "queries": ("blocklab.workloads.queries", "QueriesDriver"),
    "sysbench": ("blocklab.workloads.sysbench_driver", "SysbenchDriver"),
    "tpcc": ("blocklab.workloads.tpcc_driver", "TpccDriver"),
    "tpch": ("blocklab.workloads.tpch", "TpchDriver"),
}


if TYPE_CHECKING:  # for mypy, which checks that each class is a WorkloadDriver
    from blocklab.workloads.pgbench_driver import PgbenchDriver
    from blocklab.workloads.queries import QueriesDriver
    from blocklab.workloads.sysbench_driver import SysbenchDriver
    from blocklab.workloads.tpcc_driver import TpccDriver
    from blocklab.workloads.tpch import TpchDriver

    _CHECKED: list[Callable[[], WorkloadDriver]] = [
        PgbenchDriver, QueriesDriver, SysbenchDriver, TpccDriver, TpchDriver,
    ]  # fmt: skip


def names() -> list[str]:
    return sorted(_FACTORIES)


def get(name: str) -> WorkloadDriver:
    """The driver called `name`; UserError naming the allowed drivers otherwise."""
    where = _FACTORIES.get(name)
    if where is None:
        raise UserError(f"workload.driver: unknown driver {name!r}; allowed: {', '.join(names())}")
    module, cls = where
    driver: WorkloadDriver = getattr(importlib.import_module(module), cls)()
    return driver


def for_workload(workload: WorkloadRequest) -> WorkloadDriver:
    """The driver that runs `workload`."""
    return get(workload.driver)


def for_dataset(dataset: DatasetRequest) -> WorkloadDriver:
    """The driver that loads `dataset`."""
    return get(dataset.driver)

"""The drivers' registry imports a driver's module when the driver is asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from blocklab.errors import UserError
from blocklab.workloads import drivers


@pytest.mark.parametrize("name", drivers.names())
def test_each_name_gives_its_driver(name: str) -> None:
    d = drivers.get(name)
    assert d.name == name and d.throughput_metric and d.throughput_unit


def test_an_unknown_name_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(UserError, match="workload.driver: unknown driver 'pgbenc'; allowed: "):
        drivers.get("pgbenc")


def test_asking_for_one_driver_imports_no_other() -> None:
    code = (
        "import sys; from blocklab.workloads import drivers; drivers.get('pgbench'); "
        "print(sorted(m for m in sys.modules if m.startswith('blocklab.workloads.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout
    assert "blocklab.workloads.pgbench_driver" in loaded
    for other in ("sysbench_driver", "tpcc_driver", "tpch'", "queries'"):
        assert f"blocklab.workloads.{other}" not in loaded

"""`blocklab plan` on sysbench and tpcc experiment files: what a file asks of the machine
(the driver's program, room for its dataset) is exit 2 naming the key; a good file plans
with the driver's own dataset and unit. (Bad keys: tests/bad_specs/.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.model import DatasetRequest
from blocklab.workloads import drivers, sizing, tools

SYSBENCH = 'workload = { driver = "sysbench", test = "oltp_write_only", tables = 4, ' \
    "table_size = 100000, threads = 8 }"  # fmt: skip
TPCC = 'workload = { driver = "tpcc", warehouses = 1, threads = 4 }'


def write(tmp_path: Path, matrix: str, name: str = "x", head: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[experiment]\nname = "{name}"\n{head}\n[matrix]\n{matrix}\n')
    return path


def test_the_issue_s_workload_tables_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for matrix in (SYSBENCH, TPCC):
        assert main(["plan", str(write(tmp_path, matrix))]) == 0, capsys.readouterr().err


def test_a_driver_workload_becomes_its_dataset_and_clients(tmp_path: Path) -> None:
    (v,) = spec.load(write(tmp_path, SYSBENCH)).variants()
    assert v.workload.driver == v.dataset.driver == "sysbench"
    assert v.workload.clients == 8 and v.workload.threads == 1
    assert dict(v.dataset.options) == {"tables": 4, "table_size": 100000}
    assert v.workload.option("test") == "oltp_write_only"
    (t,) = spec.load(write(tmp_path, TPCC)).variants()
    assert dict(t.dataset.options) == {"warehouses": 1} and t.workload.clients == 4


def test_pgbench_variants_keep_their_json_without_driver_keys(tmp_path: Path) -> None:
    (v,) = spec.load(write(tmp_path, 'workload = "tpcb-like"')).variants()
    assert '"driver"' not in v.canonical_json() and '"options"' not in v.canonical_json()
    (same,) = spec.load(
        write(tmp_path, 'workload = { driver = "pgbench", builtin = "tpcb-like" }')
    ).variants()
    assert same.variant_id == v.variant_id


def test_scale_override_is_each_driver_s_smoke_size(tmp_path: Path) -> None:
    (s,) = spec.load(write(tmp_path, SYSBENCH), {"scale": 1}).variants()
    assert dict(s.dataset.options) == {"tables": 4, "table_size": 1000}
    (t,) = spec.load(write(tmp_path, TPCC.replace("1,", "8,")), {"scale": 1}).variants()
    assert dict(t.dataset.options) == {"warehouses": 1}


def test_matrix_clients_vary_a_driver_s_threads(tmp_path: Path) -> None:
    matrix = 'workload = { driver = "sysbench", test = "oltp_write_only" }\nclients = [1, 4, 8, 16]'
    exp = spec.load(write(tmp_path, matrix, head="reference = { clients = 1 }"))
    assert [v.workload.clients for v in exp.variants()] == [1, 4, 8, 16]
    assert [v.label for v in exp.variants()] == ["c=1", "c=4", "c=8", "c=16"]


def test_missing_go_tpc_is_exit_2_saying_make_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(tools.TOOLS_BIN_ENV, str(tmp_path / "empty"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["plan", str(write(tmp_path, TPCC))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "matrix.workload.driver (tpcc)" in err and "make setup" in err


def test_a_storage_too_small_for_the_driver_s_dataset_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = SYSBENCH.replace("100000", "2000000") + '\nstorage = { kind = "ext4", size_mb = 512 }'
    assert main(["plan", str(write(tmp_path, matrix))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "matrix.storage" in err and "sysbench 4 table(s) x 2000000 rows" in err


@pytest.mark.parametrize("fillfactor", [100, 75])
def test_sizing_estimates_follow_the_driver_and_fillfactor(fillfactor: int) -> None:
    sb = DatasetRequest(driver="sysbench", options=(("table_size", 100000), ("tables", 4)))
    sb = sb.model_copy(update={"fillfactor": fillfactor})
    nbytes, how = drivers.for_dataset(sb).dataset_bytes(sb, 8192)
    # measured here: 4 x 100,000 rows at fillfactor 100 load 88.7 MB of tables and 13.2 MB
    # of indexes (tests/workloads/test_drivers_lab.py checks a real load against the estimate)
    assert 90e6 < nbytes * fillfactor / 100 < 120e6 and "4 table(s)" in how
    need = sizing.data_need(10, fillfactor, 8192, None, sb)
    assert need.bytes > nbytes and "sysbench" in need.how

"""Command lines of sysbench and go-tpc from typed options; bad options are a UserError
(exit 2) naming the key and the allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.workloads import gotpc, sysbench

DATA = Path(__file__).parents[1] / "data"
SB = sysbench.Target("/var/tmp/x/sock", 36291, "blocklab")
TPCC = gotpc.Target("/var/tmp/x/sock", 36291, "blocklab", "tpcc")


def recorded_argv(driver: str, name: str) -> list[str]:
    return (DATA / driver / f"{name}.argv").read_text().split()


def test_sysbench_run_argv_is_the_recorded_one() -> None:
    opts = sysbench.Options("oltp_read_write", tables=2, table_size=1000, threads=2, time_s=4)
    argv = sysbench.run_argv("sysbench", opts, SB)
    assert sorted(argv) == sorted(recorded_argv("sysbench", "oltp_read_write"))
    assert argv[:2] == ["sysbench", "oltp_read_write"] and argv[-1] == "run"


def test_sysbench_prepare_and_cleanup_argv() -> None:
    opts = sysbench.Options("oltp_write_only", tables=4, table_size=100, threads=8)
    prepare = sysbench.prepare_argv("sysbench", opts, SB)
    assert prepare[-2:] == ["--threads=4", "prepare"]  # one loader per table at most
    assert "--tables=4" in prepare and "--table-size=100" in prepare
    assert sysbench.cleanup_argv("sysbench", opts, SB)[-1] == "cleanup"


def test_tpcc_run_argv_is_the_recorded_one_plus_plain_output() -> None:
    opts = gotpc.TpccOptions(warehouses=1, threads=2, time_s=5)
    argv = gotpc.tpcc_run_argv("go-tpc", opts, TPCC)
    assert argv[argv.index("--output") : argv.index("--output") + 2] == ["--output", "plain"]
    without = argv[: argv.index("--output")] + argv[argv.index("--output") + 2 :]
    assert sorted(without) == sorted(recorded_argv("go-tpc", "tpcc"))
    prepare = gotpc.tpcc_prepare_argv("go-tpc", opts, TPCC)
    assert prepare[-4:] == ["-T", "1", "prepare", "--no-check"]


def test_tpch_run_argv_runs_each_query_once_per_thread() -> None:
    target = gotpc.Target("/s", 5432, "blocklab", "tpch")
    argv = gotpc.tpch_run_argv("go-tpc", gotpc.TpchOptions(0.01, ("q3", "q5"), threads=2), target)
    assert argv[argv.index("--queries") + 1] == "q3,q5"
    assert argv[argv.index("--count") + 1] == "4"
    assert argv[argv.index("-H") + 1] == '""' and "host=/s&sslmode=disable" in argv


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: sysbench.Options("oltp_delete"),
            "workload.test: unknown sysbench test 'oltp_delete' (allowed: oltp_read_only, "
            "oltp_read_write, oltp_write_only, oltp_point_select, oltp_update_index, oltp_insert)",
        ),
        (lambda: sysbench.Options(tables=0), "workload.tables: 0 is not an integer from 1 to 1024"),
        (lambda: sysbench.Options(table_size=True), "workload.table_size: True is not an integer"),
        (lambda: sysbench.Options(threads=2000), "workload.threads: 2000 is not an integer"),
        (
            lambda: gotpc.TpccOptions(warehouses=0),
            "workload.warehouses: 0 is not an integer from 1 to 10000",
        ),
        (lambda: gotpc.TpccOptions(warehouses=10_001), "workload.warehouses: 10001 is not"),
        (
            lambda: gotpc.TpchOptions(scale_factor=0.001),
            "workload.scale_factor: 0.001 is not a number from 0.01 to 100",
        ),
        (lambda: gotpc.TpchOptions(scale_factor=1000), "workload.scale_factor: 1000 is not"),
        (
            lambda: gotpc.TpchOptions(queries=("q1", "q23")),
            "workload.queries: ['q23'] not allowed (allowed: q1 to q22, at least one)",
        ),
        (lambda: gotpc.TpchOptions(queries=()), "workload.queries: none not allowed"),
    ],
)
def test_bad_options_name_the_key_and_the_allowed_values(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserError) as e:
        make()
    assert str(e.value).startswith(message) and e.value.exit_code == 2

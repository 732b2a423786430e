"""sysbench and go-tpc parsers on recorded real output (tests/data/sysbench, go-tpc):
clean runs give their numbers, a server killed mid-run gives a failure and no number."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.workloads import gotpc, sysbench

DATA = Path(__file__).parents[1] / "data"


def recorded(driver: str, name: str) -> tuple[str, str, int]:
    stem = DATA / driver / name
    read = lambda suffix: Path(f"{stem}.{suffix}").read_text()  # noqa: E731
    return read("stdout"), read("stderr"), int(read("exitcode"))


def test_sysbench_read_write_report() -> None:
    r = sysbench.parse(*recorded("sysbench", "oltp_read_write"))
    assert r.ok and r.version == "1.0.20"
    assert (r.tps, r.qps, r.transactions, r.queries) == (460.47, 9271.55, 1844, 37129)
    assert (r.ignored_errors, r.reconnects) == (14, 0)
    assert (r.latency_avg_ms, r.latency_p95_ms, r.latency_max_ms) == (4.34, 5.18, 1008.31)
    assert r.total_time_s == 4.0039


def test_sysbench_per_second_lines() -> None:
    r = sysbench.parse(*recorded("sysbench", "oltp_read_write"))
    assert [line.t_s for line in r.series] == [1, 2, 3, 4]
    first = r.series[0]
    assert (first.threads, first.tps, first.latency_p95_ms) == (2, 723.24, 5.57)
    assert first.errors_per_s == 4.99 and first.reconnects_per_s == 0.0


def test_sysbench_write_only_has_no_reads() -> None:
    r = sysbench.parse(*recorded("sysbench", "oltp_write_only"))
    assert r.ok and r.tps == 819.77 and len(r.series) == 3


def test_sysbench_killed_server_is_a_failure_without_tps() -> None:
    r = sysbench.parse(*recorded("sysbench", "oltp_read_write-killed"))
    assert not r.ok and r.failure == "sysbench exited with code -11"
    assert r.tps is None and r.transactions is None
    assert len(r.series) == 3  # what it printed before it died is kept


def test_sysbench_report_with_nonzero_exit_gives_no_tps() -> None:
    out, err, _ = recorded("sysbench", "oltp_read_write")
    r = sysbench.parse(out, err + "FATAL: `thread_run' function failed\n", 1)
    assert r.failure == "sysbench exited with code 1: FATAL: `thread_run' function failed"
    assert r.tps is None


def test_sysbench_output_without_a_report_is_a_failure() -> None:
    out, err, _ = recorded("sysbench", "oltp_read_write-killed")
    assert sysbench.parse(out, err, 0).failure == "sysbench printed no final report"


def test_tpcc_report() -> None:
    r = gotpc.parse_tpcc(*recorded("go-tpc", "tpcc"))
    assert r.ok and r.errors == {}
    assert (r.tpmc, r.tpm_total) == (11029.6, 22429.0)
    new_order = r.summary["NEW_ORDER"]
    assert (new_order.count, new_order.latency_avg_ms, new_order.latency_p95_ms) == (
        914,
        5.0,
        14.7,
    )
    assert sorted(r.summary) == ["DELIVERY", "NEW_ORDER", "ORDER_STATUS", "PAYMENT", "STOCK_LEVEL"]


def test_tpcc_intervals_group_the_current_lines() -> None:
    r = gotpc.parse_tpcc(*recorded("go-tpc", "tpcc"))
    assert len(r.intervals) == 5
    assert all(len(ops) == 5 for ops in r.intervals)
    assert r.intervals[0][1].op == "NEW_ORDER" and r.intervals[0][1].tpm == 13137.9


def test_tpcc_killed_server_is_a_failure_although_go_tpc_exits_0() -> None:
    out, err, code = recorded("go-tpc", "tpcc-killed")
    assert code == 0 and "tpmC: " in out
    r = gotpc.parse_tpcc(out, err, code)
    assert not r.ok and r.tpmc is None and r.tpm_total is None
    assert r.errors == {"DELIVERY": 1, "PAYMENT": 1}
    assert "connection reset by peer" in r.error_lines[0]
    assert r.failure is not None and r.failure.startswith("4 error line(s), the first: execute")


def test_tpch_per_query_times() -> None:
    r = gotpc.parse_tpch(*recorded("go-tpc", "tpch"))
    assert r.ok and sorted(r.queries, key=lambda q: int(q[1:])) == list(gotpc.TPCH_QUERIES)
    assert r.queries["q17"] == gotpc.QueryTime("q17", 0.23, at_floor=False)
    assert r.queries["q1"] == gotpc.QueryTime("q1", 0.10, at_floor=True)
    assert sum(q.at_floor for q in r.queries.values()) == 20


def test_tpch_missing_query_is_a_failure() -> None:
    r = gotpc.parse_tpch(*recorded("go-tpc", "tpch"), expected=("q1", "q23"))
    assert r.failure == "go-tpc reported no time for q23" and r.queries == {}


def test_tpch_killed_server_is_a_failure() -> None:
    r = gotpc.parse_tpch(*recorded("go-tpc", "tpch-killed"))
    assert not r.ok and r.queries == {}
    assert "connection refused" in (r.failure or "")


@pytest.mark.parametrize("name", ["tpcc", "tpch"])
def test_go_tpc_nonzero_exit_is_a_failure(name: str) -> None:
    out, err, _ = recorded("go-tpc", name)
    parse = gotpc.parse_tpcc if name == "tpcc" else gotpc.parse_tpch
    assert parse(out, err, 2).failure == "go-tpc exited with code 2"

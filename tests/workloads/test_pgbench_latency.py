"""Latency percentiles from pgbench's per-transaction log (blocklab.workloads.pgbench_latency),
against numpy's percentiles on a recorded real log (tests/data/pgbench, record_translog.py)
and on simulated latencies with a fixed seed; the driver's record from that log."""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from blocklab.workloads import pgbench, pgbench_latency
from blocklab.workloads.execution import DRIVER_DIR
from blocklab.workloads.pgbench_driver import LOG_NAME, PgbenchDriver
from blocklab.workloads.pgbench_latency import LatencyHistogram

DATA = Path(__file__).parents[1] / "data" / "pgbench"
STEM = "pg18-translog-simple-update"
QS = (0, 1, 25, 50, 90, 95, 99, 99.9, 100)


def recorded_logs() -> list[Path]:
    return sorted(DATA.glob(f"{STEM}.log*"))


def recorded_latencies_us() -> np.ndarray:
    lines = itertools.chain.from_iterable(p.read_text().splitlines() for p in recorded_logs())
    return np.array([int(line.split()[2]) for line in lines])


def recorded_histogram() -> LatencyHistogram:
    hist = LatencyHistogram()
    for path in recorded_logs():
        with path.open() as lines:  # streamed, as the driver reads it
            hist.add_lines(lines)
    return hist


def test_the_recorded_log_is_real_sampled_and_two_threads() -> None:
    argv = (DATA / f"{STEM}.argv").read_text()
    assert "-l --sampling-rate=0.1 " in argv and "-j 2" in argv
    assert len(recorded_logs()) == 2
    assert len(recorded_latencies_us()) > 1000


def test_percentiles_are_numpys_on_the_recorded_real_log() -> None:
    xs = recorded_latencies_us()
    got = recorded_histogram().percentiles_ms(QS)
    for q in QS:
        assert got[q] == pytest.approx(np.percentile(xs, q) / 1000.0, rel=1e-12, abs=1e-12), q
    assert got[50] is not None and got[95] is not None and got[99] is not None
    assert 0 < got[50] < got[95] < got[99]


@pytest.mark.parametrize("n", [1, 2, 3, 10, 997, 20_000])
def test_percentiles_are_numpys_on_simulated_latencies(n: int) -> None:
    """Log-normal latencies in whole microseconds (many ties, a long tail), seed fixed."""
    rng = np.random.default_rng(35 + n)
    xs = np.round(rng.lognormal(mean=7.5, sigma=0.8, size=n)).astype(int)
    hist = LatencyHistogram().add_lines(
        f"{i % 4} {i} {x} 0 1795790049 {i % 1_000_000}" for i, x in enumerate(xs)
    )
    assert hist.samples == n
    got = hist.percentiles_ms(QS)
    for q in QS:
        assert got[q] == pytest.approx(np.percentile(xs, q) / 1000.0, rel=1e-12, abs=1e-12), q


def test_a_p99_of_the_recorded_log_lies_in_scipys_distribution_free_interval() -> None:
    """The docstring's precision figures: p99 11.3 ms, its 95 % interval 10.3 to 13.6 ms."""
    xs = recorded_latencies_us()
    p99 = recorded_histogram().percentiles_ms((99,))[99]
    ci = stats.quantile_test(xs, q=np.percentile(xs, 99), p=0.99).confidence_interval(0.95)
    assert p99 is not None and ci.low / 1000 <= p99 <= ci.high / 1000
    assert (round(p99, 1), round(ci.low / 1000, 1), round(ci.high / 1000, 1)) == (11.3, 10.3, 13.6)


def test_the_file_is_streamed_and_memory_is_one_entry_per_distinct_latency() -> None:
    consumed = 0

    def lines() -> Iterator[str]:
        nonlocal consumed
        for i in range(200_000):
            consumed += 1
            yield f"0 {i} {100 + i % 50} 0 1795790049 {i % 1_000_000}\n"

    hist = LatencyHistogram().add_lines(lines())
    assert consumed == 200_000 and hist.samples == 200_000
    assert len(hist.counts) == 50  # not 200,000 values held


def test_failed_and_skipped_transactions_are_counted_apart() -> None:
    hist = LatencyHistogram().add_lines(
        [
            "0 1 1500 0 1795790049 1",
            "0 2 failed 0 1795790049 2",
            "1 1 skipped 0 1795790049 3 120",
            "1 2 serialization 0 1795790049 4 0 2",
            "",
            "1 3 2500 0 1795790049 5",
        ]
    )
    assert (hist.samples, hist.without_latency, hist.logged) == (2, 3, 5)
    assert hist.percentiles_ms((50,)) == {50: 2.0}


@pytest.mark.parametrize(
    "line",
    [
        "1795319496 139 215193 813986219 246 10730 0 0 0 0 0 0 0 0 0",  # an aggregate log's
        "0 1 1500 0",
        "0 1 1.5 0 1795790049 1",
        "0 1 1500 0 never 1",
    ],
)
def test_a_line_that_is_not_a_per_transaction_line_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="per-transaction log line 2"):
        LatencyHistogram().add_lines(["0 1 1500 0 1795790049 1", line])


def test_no_log_or_no_sample_gives_none_never_a_number() -> None:
    empty = {"latency_p50_ms": None, "latency_p95_ms": None, "latency_p99_ms": None}
    assert pgbench_latency.metrics(None) == empty
    assert pgbench_latency.metrics(LatencyHistogram()) == empty
    only_failed = LatencyHistogram().add_lines(["0 1 failed 0 1795790049 2"])
    assert pgbench_latency.metrics(only_failed) == empty
    assert pgbench_latency.coverage_ratio(10, None) is None
    assert pgbench_latency.coverage_ratio(10, 0) is None


def test_threads_merge_into_the_histogram_of_all_lines() -> None:
    a, b = (LatencyHistogram().add_lines(p.read_text().splitlines()) for p in recorded_logs())
    assert a.merge(b) == recorded_histogram()
    assert a.merge(b).samples == a.samples + b.samples


def _raw_dir_with(tmp_path: Path, logs: list[Path]) -> Path:
    driver_dir = tmp_path / DRIVER_DIR
    driver_dir.mkdir()
    names = [f"{LOG_NAME}.4242", f"{LOG_NAME}.4242.1"]
    for src, name in zip(logs, names, strict=False):
        shutil.copyfile(src, driver_dir / name)
    return tmp_path


def _record(raw_dir: Path) -> tuple[dict[str, float | None], dict[str, object]]:
    driver = PgbenchDriver()
    stdout, stderr = ((DATA / f"{STEM}.{x}").read_text() for x in ("stdout", "stderr"))
    part = driver.record(driver.parse(stdout, stderr), stderr, raw_dir)
    return part.metrics, dict(part.provenance["transaction_log"])


def test_the_driver_records_the_percentiles_coverage_and_rate(tmp_path: Path) -> None:
    metrics, facts = _record(_raw_dir_with(tmp_path, recorded_logs()))
    xs = recorded_latencies_us()
    for q in (50, 95, 99):
        assert metrics[f"latency_p{q}_ms"] == pytest.approx(np.percentile(xs, q) / 1000.0)
    transactions = pgbench.parse_report((DATA / f"{STEM}.stdout").read_text()).transactions
    assert transactions is not None
    coverage = metrics["transaction_log_coverage_ratio"]
    noise = math.sqrt((1 - 0.1) / (0.1 * transactions))  # binomial: 0.025 here
    assert coverage is not None and abs(coverage - 1) < 4 * noise
    assert facts == {"sampling_rate": 0.1, "files": 2, "logged": len(xs), "without_latency": 0}
    assert metrics["initial_connection_ms"] is not None  # kept as before


def test_the_driver_records_none_for_a_missing_empty_or_foreign_log(tmp_path: Path) -> None:
    none = {"latency_p50_ms": None, "latency_p95_ms": None, "latency_p99_ms": None}
    metrics, facts = _record(tmp_path)  # no driver directory at all
    assert {k: metrics[k] for k in none} == none
    assert metrics["transaction_log_coverage_ratio"] is None
    assert facts == {"sampling_rate": 0.1, "files": 0}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / DRIVER_DIR).mkdir()
    (empty / DRIVER_DIR / f"{LOG_NAME}.4242").write_text("")
    metrics, facts = _record(empty)
    assert {k: metrics[k] for k in none} == none and facts["logged"] == 0
    assert metrics["transaction_log_coverage_ratio"] == 0.0  # a log that lost everything
    old = tmp_path / "old"
    old.mkdir()
    metrics, facts = _record(_raw_dir_with(old, [DATA / "pg18-simple-update-prepared.agg0"]))
    assert {k: metrics[k] for k in none} == none  # an aggregate log has no percentiles
    assert "per-transaction log line 1" in str(facts["error"])

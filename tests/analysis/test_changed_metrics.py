"""The summary's "what changed" section, on SYNTHETIC results (made up, shaped like the
WAL-block experiment: 1 client, one insert per commit, ext4 loops): a device WAL metric
with a real difference is listed with its units, a metric 0 in both is said so, and an
unchanged metric is not listed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import small_experiment

from blocklab import units
from blocklab.analysis import changed_metrics
from blocklab.analysis.metrics import KNOWN_METRICS, metric_info
from blocklab.analysis.summary import fixed_by_build
from blocklab.analysis.summary_table import FIXED_BY_BUILD
from blocklab.cli import main
from blocklab.store import ResultsDB, RunRecord

ROUNDS = 6
# one name per metric: the catalogue's label, as the first screen and the table name it
# (issue 35: "WAL records" here and "WAL bytes" there; "pages" for a count of bytes)
RELATION = "relation bytes written per transaction (checkpointer + bgwriter + backends)"
WAL_DEVICE = "WAL device bytes written per transaction"
REQUEST = "relation bytes per read request (pg_stat_io)"
JITTER = (1.00, 1.02, 0.98, 1.01, 0.99, 1.00)  # made-up round-to-round noise
SHUFFLED = (0.99, 1.01, 1.00, 0.98, 1.02, 1.00)  # the same noise in another order
# variant -> metric -> per-round values
VALUES = {
    "wal=8k": {
        "tps": [500.0 * j for j in JITTER],
        "device_wal_write_bytes_per_xact": [8305.0 * j for j in JITTER],
        "wal_bytes_per_xact": [640.0 * j for j in JITTER],
        "relation_write_bytes_per_xact": [0.0] * ROUNDS,
        "server_cpu_s_per_xact": [0.001 * j for j in JITTER],
        "device_data_write_bytes_per_xact": [2000.0 * j for j in JITTER],
        "io_read_bytes_per_read_relation": [8192.0] * ROUNDS,  # the page size: a tautology
    },
    "wal=4k": {
        "tps": [520.0 * j for j in SHUFFLED],
        "device_wal_write_bytes_per_xact": [4209.0 * j for j in SHUFFLED],
        "wal_bytes_per_xact": [640.0 * j for j in SHUFFLED],
        "relation_write_bytes_per_xact": [0.0] * ROUNDS,
        "server_cpu_s_per_xact": [0.001 * j for j in SHUFFLED],
        "device_data_write_bytes_per_xact": [2200.0 * j for j in SHUFFLED],
        "io_read_bytes_per_read_relation": [4096.0] * ROUNDS,
    },
}


@pytest.fixture
def results(tmp_path: Path) -> Iterator[Path]:
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "walblock", "wal=8k", [(v, v, "{}", {}) for v in VALUES])
        for vid, metrics in VALUES.items():
            for rnd in range(1, ROUNDS + 1):
                extra = {k: v[rnd - 1] for k, v in metrics.items() if k != "tps"}
                db.record_run(
                    RunRecord(
                        "walblock",
                        vid,
                        rnd,
                        0,
                        "ok",
                        "t0",
                        "t1",
                        tps=metrics["tps"][rnd - 1],
                        latency_avg_ms=2.0,
                        metrics=extra,
                    )
                )
    yield tmp_path / "results"


def test_changed_listed_largest_first_zero_in_both_said_unchanged_left_out(
    results: Path,
) -> None:
    with ResultsDB(results) as db:
        found = changed_metrics.find(db, "walblock")
    keys = [c.info.key for c in found.changes]
    assert keys == ["device_wal_write_bytes_per_xact", "device_data_write_bytes_per_xact"]
    wal = found.changes[0]
    assert wal.info == metric_info("device_wal_write_bytes_per_xact")
    assert wal.info.label == WAL_DEVICE
    assert wal.info.unit == "bytes" and wal.label == "wal=4k" and wal.reference_label == "wal=8k"
    assert wal.mean == pytest.approx(4209.0) and wal.reference_mean == pytest.approx(8305.0)
    assert wal.comparison.gain_pct == pytest.approx((4209 / 8305 - 1) * 100, abs=0.5)
    assert found.zero_in_both == [RELATION]
    text = "\n".join(changed_metrics.lines(found))
    assert f"{WAL_DEVICE}: wal=4k " in text
    assert units.fmt_value(4209.0, "bytes") in text and units.fmt_value(8305.0, "bytes") in text
    assert "-49.3 %" in text
    assert f"0 in both: {RELATION}" not in text  # folded into one line (issue 30)
    assert "1 metric is 0 in both variants or the same in every round; summary --all" in text
    assert f"0 in both: {RELATION}" in "\n".join(changed_metrics.lines(found, everything=True))
    assert "false discovery rate 5 % over 4 metric comparisons" in text  # 0 in both: no test
    assert "server CPU" not in text and "WAL bytes" not in text  # unchanged: not listed
    # bytes per read request = each build's page size: folded before BH, not a finding
    assert found.fixed == [REQUEST] and REQUEST not in [c.info.label for c in found.changes]
    assert f"1 metric {FIXED_BY_BUILD}, not tested" in text


def test_a_metric_fixed_in_one_variant_only_is_still_tested() -> None:
    assert fixed_by_build([{1: 4096.0, 2: 4096.0}, {1: 8192.0, 2: 8192.0}])
    assert not fixed_by_build([{1: 4096.0, 2: 4096.0}, {1: 8192.0, 2: 11780.9}])
    assert not fixed_by_build([{1: 4096.0}, {1: 8192.0}])  # one round shows nothing
    assert not fixed_by_build([{1: 5.0, 2: 5.0}, {1: 5.0, 2: 5.0}])  # the same: "constant"


def test_the_summary_command_prints_it_under_the_throughput_table(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", "walblock", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    table_at = out.index("wal=4k")
    section_at = out.index("What changed (Benjamini-Hochberg")
    assert table_at < section_at
    assert WAL_DEVICE in out[section_at:]
    # the side metrics say so too, where they printed "-50.0 %" as a change
    assert f"{FIXED_BY_BUILD}, not compared: {REQUEST}" in out[:section_at]
    assert f"{REQUEST}: wal=4k" not in out
    assert main(["summary", "walblock", "--results", str(results), "--metric", "hot"]) == 2


def test_nothing_to_say_prints_nothing() -> None:
    assert changed_metrics.lines(changed_metrics.ChangedMetrics()) == []


def test_one_name_per_metric_and_no_page_label_on_bytes() -> None:
    labels = [m.label for m in KNOWN_METRICS]
    assert len(set(labels)) == len(labels)
    assert not [m.label for m in KNOWN_METRICS if m.unit == "bytes" and " pages " in f" {m.label} "]

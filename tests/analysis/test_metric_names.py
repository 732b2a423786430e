"""`summary --metric` takes the labels the summary prints as well as the keys, and a
name it does not know is answered with the closest ones (issue 35: it took keys the
output never shows, and a wrong one listed 145 names)."""

from __future__ import annotations

import pytest

from blocklab.analysis.metrics import resolve_metric
from blocklab.errors import UserError

STORED = ["wal_bytes_per_xact", "hot_update_ratio", "device_data_read_bytes_per_request"] + [
    f"io_read_bytes_relation_{c}" for c in ("normal", "vacuum", "bulkread")
]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("tps", "tps"),
        ("throughput", "tps"),
        ("WAL bytes per transaction", "wal_bytes_per_xact"),
        ("wal  bytes per TRANSACTION", "wal_bytes_per_xact"),
        ("WAL bytes per transaction (bytes)", "wal_bytes_per_xact"),  # as the table heads it
        ("HOT update ratio", "hot_update_ratio"),
        ("latency (average)", "latency_avg_ms"),
        ("data device bytes per read request", "device_data_read_bytes_per_request"),
        ("relation bytes read, vacuum (pg_stat_io)", "io_read_bytes_relation_vacuum"),
    ],
)
def test_a_key_or_a_printed_label_names_the_metric(name: str, key: str) -> None:
    assert resolve_metric(name, STORED) == key


def test_a_near_miss_is_answered_with_did_you_mean_and_a_short_list() -> None:
    with pytest.raises(UserError) as err:
        resolve_metric("WAL byte per transaction", STORED)
    text = str(err.value)
    assert text.startswith("--metric: 'WAL byte per transaction' names no stored metric.")
    assert "Did you mean 'WAL bytes per transaction' (wal_bytes_per_xact)" in text
    with pytest.raises(UserError) as err:
        resolve_metric("hot_update", STORED)
    assert "Did you mean hot_update_ratio" in str(err.value)


def test_a_name_like_nothing_lists_some_and_counts_the_rest() -> None:
    many = STORED + [f"custom_{i}_bytes" for i in range(140)]
    with pytest.raises(UserError) as err:
        resolve_metric("zzz", many)
    text = str(err.value)
    assert "Did you mean" not in text
    assert "'throughput' (tps)" in text and "custom_3_bytes" not in text
    assert "and 143 more (blocklab export --csv lists them all in rounds.csv)" in text

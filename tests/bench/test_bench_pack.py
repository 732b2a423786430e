"""bench/bench_pack.py: the encoders and the gzip levels it compares pack every page it
makes to the same value (so its ratios compare equal work)."""

from __future__ import annotations

from pathlib import Path

import bench_pack
from report_fixture import write_synthetic_results

from blocklab.report import pagedata


def test_both_encoders_pack_the_run_pages_to_the_same_values(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_synthetic_results(results, rounds=1, seconds=20, name="bench", **bench_pack.MATRIX)
    values = bench_pack.page_values(results)
    assert len(values) == 40
    for v in values:
        unpacked = bench_pack._unpack(pagedata.pack(v))
        assert unpacked == bench_pack._unpack(bench_pack.stdlib_pack(v))
        assert unpacked == bench_pack._unpack(bench_pack.level_9_pack(v))

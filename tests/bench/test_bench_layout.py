"""bench/bench_layout.py writes an experiment blocklab accepts: K layout variants of one
geometry, the first the reference, nothing else varying."""

from __future__ import annotations

from pathlib import Path

import bench_layout

from blocklab.experiment_file import loader


def test_the_layout_bench_file_is_k_layouts_of_the_demos_reference_build(tmp_path: Path) -> None:
    spec = tmp_path / "layout.toml"
    spec.write_text(bench_layout.experiment_file(builds=4, rounds=8, duration_s=20, scale=10))
    exp = loader.load(spec)
    builds = [v.build for v in exp.variants()]
    assert sorted(b.layout_seed for b in builds) == [1, 2, 3, 4]
    assert {(b.block_size_kb, b.wal_block_size_kb, b.pg) for b in builds} == {(8, 8, "18")}
    assert (
        len({v.workload for v in exp.variants()}) == 1
        and len({v.dataset for v in exp.variants()}) == 1
    )
    assert exp.rounds == 8

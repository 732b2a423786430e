"""bench/bench_watch.py: both updates of each pair leave the site a whole build makes (so
its ratio compares equal work), the one with a resident keeping every run it read."""

from __future__ import annotations

from pathlib import Path

import bench_watch
from report_fixture import differing_files, write_synthetic_results

from blocklab.report import build_site


def test_each_pair_s_updates_equal_a_whole_build(tmp_path: Path) -> None:
    results, site = tmp_path / "results", tmp_path / "site"
    write_synthetic_results(
        results, rounds=1, seconds=20, name=bench_watch.NAME, keep_trends=True, **bench_watch.MATRIX
    )
    build_site(results, site)
    got = bench_watch.pairs(results, site, 2)
    assert len(got) == 2 and all(t > 0 for pair in got for t, _ in pair)
    build_site(results, tmp_path / "whole")
    assert differing_files(site, tmp_path / "whole") == []

"""Grouped references (one reference per client count, as in seed 004): the summary
table and the report compare each variant with its own group's reference, and agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import small_experiment

from blocklab.analysis.summary import summarize_experiment
from blocklab.report.data import load_experiment
from blocklab.store import ResultsDB, RunRecord

# variant -> (clients, wal_kb, tps per round); the 4 kB WAL variant is about 10 % up on
# its own client count's reference in every round (not exactly: zero variance would be
# "undetermined").
VARIANTS = {
    "w8c1": (1, 8, [100.0, 110.0, 90.0, 105.0]),
    "w4c1": (1, 4, [110.5, 120.5, 99.2, 115.4]),
    "w8c8": (8, 8, [700.0, 650.0, 720.0, 680.0]),
    "w4c8": (8, 4, [771.0, 714.0, 792.5, 747.5]),
}
REFERENCES = {"w8c1": "w8c1", "w4c1": "w8c1", "w8c8": "w8c8", "w4c8": "w8c8"}


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    with ResultsDB(tmp_path / "results") as d:
        variants = [
            (vid, vid, "{}", {"clients": c, "wal_block_size_kb": w})
            for vid, (c, w, _) in VARIANTS.items()
        ]
        small_experiment(d, "grouped", "w8c1", variants, REFERENCES)
        for vid, (_, _, values) in VARIANTS.items():
            for rnd, tps in enumerate(values, start=1):
                d.record_run(
                    RunRecord("grouped", vid, rnd, 0, "ok", "t0", "t1", tps=tps, latency_avg_ms=1.0)
                )
        yield d


def test_summary_compares_within_each_group(db: ResultsDB) -> None:
    s = {v.variant_id: v for v in summarize_experiment(db, "grouped").variants}
    assert s["w8c1"].is_reference and s["w8c8"].is_reference
    for vid in ("w4c1", "w4c8"):
        c = s[vid].comparison
        assert c is not None and c.ratio == pytest.approx(1.10, abs=0.005)
        assert c.verdict == "faster"
    assert s["w4c8"].reference_label == "w8c8"


def test_report_uses_the_same_references_as_the_summary(db: ResultsDB) -> None:
    view = {v.variant_id: v for v in load_experiment(db, "grouped").variants}
    summary = {v.variant_id: v for v in summarize_experiment(db, "grouped").variants}
    for vid in VARIANTS:
        assert view[vid].is_reference == summary[vid].is_reference
        cell = view[vid].cells["tps"]
        if summary[vid].comparison is None:
            assert cell.comparison is None
        else:
            assert cell.comparison is not None
            assert cell.comparison.ratio == pytest.approx(summary[vid].comparison.ratio)

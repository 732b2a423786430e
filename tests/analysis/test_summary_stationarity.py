"""The summary says which variant's measured windows drifted (blocklab.analysis.stationarity
wired into summarize_experiment and print_summary), from stored per-second series."""

from __future__ import annotations

import io
from pathlib import Path

from helpers import small_experiment
from rich.console import Console
from test_stationarity import FPI_4K, _every_second, _flat

from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import print_summary
from blocklab.store import ResultsDB, RunRecord


def test_the_summary_names_the_drifted_metric_per_variant(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "e", "bs8", [("bs8", "bs=8k", "{}", {}), ("bs4", "bs=4k", "{}", {})])
        for rnd in range(1, 4):
            for vid in ("bs8", "bs4"):
                fpi = _every_second(FPI_4K) if vid == "bs4" else _flat(20, 30, 0.05, 0.0, rnd)
                series = {"wal_fpi_per_s": fpi, "tps": _flat(20, 3000, 0.03, 0.0, 10 + rnd)}
                db.record_run(
                    RunRecord(
                        "e",
                        vid,
                        rnd,
                        0,
                        "ok",
                        "t0",
                        "t1",
                        tps=3000.0,
                        latency_avg_ms=1.0,
                        series=series,
                    )
                )
        s = summarize_experiment(db, "e", "tps")
        assert len(s.stationarity) == 1
        assert "in 3 of 3 runs of bs=4k" in s.stationarity[0]
        assert s.stationarity[0].startswith("full-page images/s fell ")
        out = io.StringIO()
        print_summary(Console(file=out, width=200), s)
        assert "! stationarity: full-page images/s fell" in out.getvalue()
        assert summarize_experiment(db, "e", "tps", side=False).stationarity == []

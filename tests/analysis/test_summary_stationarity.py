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


def _record(
    db: ResultsDB, name: str, spec: dict[str, object] | None = None, storm: bool = True
) -> None:
    """Three rounds: bs=4k's full-page images decay as after a checkpoint (unless not
    `storm`), bs=8k's are flat."""
    variants = [("bs8", "bs=8k", "{}", {}), ("bs4", "bs=4k", "{}", {})]
    small_experiment(db, name, "bs8", variants, spec=spec)
    for rnd in range(1, 4):
        for vid in ("bs8", "bs4"):
            calm = _flat(20, 30, 0.05, 0.0, rnd)
            fpi = _every_second(FPI_4K) if vid == "bs4" and storm else calm
            series = {"wal_fpi_per_s": fpi, "tps": _flat(20, 3000, 0.03, 0.0, 10 + rnd)}
            db.record_run(
                RunRecord(
                    name, vid, rnd, 0, "ok", "t0", "t1",
                    tps=3000.0, latency_avg_ms=1.0, series=series,
                )
            )  # fmt: skip


def test_the_summary_names_the_drifted_metric_per_variant(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "results") as db:
        _record(db, "e")
        s = summarize_experiment(db, "e", "tps")
        # the share of drifted windows against noise's, then the finding (3 of 3 of bs=4k)
        assert len(s.stationarity) == 2
        assert s.stationarity[0] == (
            "stationarity: full-page images/s: 3 of 6 windows drift "
            "(noise alone flags at most 5 %: 0.3 expected)"
        )
        assert "in 3 of 3 runs of bs=4k" in s.stationarity[1]
        assert s.stationarity[1].startswith("! stationarity: full-page images/s fell ")
        out = io.StringIO()
        print_summary(Console(file=out, width=200), s)
        assert "  stationarity: full-page images/s: 3 of 6 windows drift" in out.getvalue()
        assert "  ! stationarity: full-page images/s fell" in out.getvalue()
        assert summarize_experiment(db, "e", "tps", side=False).stationarity == []


def test_flat_windows_are_said_to_be_judged_flat(tmp_path: Path) -> None:
    """No drift: one line saying how many windows were judged, so that "checked, flat"
    reads differently from "not checked"."""
    with ResultsDB(tmp_path / "results") as db:
        _record(db, "flat", storm=False)
        lines = summarize_experiment(db, "flat", "tps").stationarity
        assert lines == ["stationarity: judged flat: 6 of 6 windows (20-point windows)"]


def test_whole_checkpoint_cycles_are_not_a_drift(tmp_path: Path) -> None:
    """With [design] checkpoint = "cycles" each window holds whole cycles: the decay of
    full-page images inside one is what it measures, and the summary does not warn."""
    with ResultsDB(tmp_path / "results") as db:
        _record(db, "cyc", spec={"design": {"kind": "abba", "checkpoint": "cycles"}})
        assert summarize_experiment(db, "cyc", "tps").stationarity == []

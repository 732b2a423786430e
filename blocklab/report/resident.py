"""What a resident process (`report --watch`, `serve --watch`) keeps from one update of a
site to the next: the runs it read ahead, each run's view, digest and stationarity window,
and the summaries' reductions and comparisons (analysis.summary_memo). A stored run's
row, metrics and series never change, so an update reads, hashes, judges and reduces
only the runs it has not seen: at 10,000 runs, reading them all took 0.24 to 0.37 s an
update, hashing them 0.2 s, reading their windows 0.3 s and reducing and comparing them
again 0.3 s (the last two of the summary, which the update waits for last). It imports
scipy's modules the summary uses once (analysis.lazy_imports), not in every summary's
forked process: 0.5 s an update."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blocklab.analysis import lazy_imports
from blocklab.analysis.stationarity import Window
from blocklab.analysis.summary_memo import SummaryMemo
from blocklab.report.data import RunView
from blocklab.store.base import RunsKept


@dataclass
class Resident:
    runs: RunsKept = field(default_factory=dict)  # ResultsStore.read_ahead's `kept`
    # (run id, started_at, ended_at) -> the run's view (data.RunViews)
    views: dict[tuple[Any, ...], RunView] = field(default_factory=dict)
    # (run id, started_at, ended_at) -> reduction_cache.run_digest of the run's view
    digests: dict[tuple[Any, ...], str] = field(default_factory=dict)
    # (run id, started_at, ended_at) -> the run's Window (kept_trends.windows_of)
    windows: dict[tuple[Any, ...], Window] = field(default_factory=dict)
    # the summaries' reductions and comparisons (their windows are those above)
    memo: SummaryMemo = field(default_factory=SummaryMemo)

    def __post_init__(self) -> None:
        # the summary is made in a process forked at each update: scipy imported there
        # would be imported again at every update (0.5 s of them at 10,000 runs)
        lazy_imports.import_ahead()

    def runs_of(self, experiments: list[str]) -> RunsKept:
        """`runs`, holding only the experiments named (those the store has now: a run of
        one removed is not taken for a run that has its id now)."""
        self.runs = {name: runs for name, runs in self.runs.items() if name in experiments}
        return self.runs

    def _keys(self) -> dict[int, tuple[Any, ...]]:
        """run id -> its key columns, of the runs read ahead in this update."""
        return {i: v[0] for runs in self.runs.values() for i, v in runs.items()}

    def windows_known(self) -> dict[int, Window]:
        """The windows kept of runs that are still the ones read (by their key columns)."""
        return {i: self.windows[k] for i, k in self._keys().items() if k in self.windows}

    def keep_windows(self, windows: Mapping[int, Window]) -> None:
        """Keep `windows` (by run id) of the runs read in this update, and no others."""
        keys = self._keys()
        self.windows = {keys[i]: w for i, w in windows.items() if i in keys}

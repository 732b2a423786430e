"""The experiments' summaries a site update makes (explain.summary_for: what needs the
stored runs, not the views), begun in a process of their own while the main one writes
the pages (parallel.begun), and what they read and made (the runs' stationarity windows,
the reductions and comparisons: analysis.summary_memo), kept by a resident process
(report.resident) from one update to the next."""

from __future__ import annotations

from collections.abc import Callable

from blocklab.analysis.summary import ExperimentSummary
from blocklab.analysis.summary_memo import Delta, SummaryMemo
from blocklab.report import explain
from blocklab.report.resident import Resident
from blocklab.store import ResultsStore

Made = tuple[list[ExperimentSummary], Delta | None]


class Summaries:
    """The summaries of the views `todo` ((stored name, fleet host or None) each);
    `fresh`: every run's stationarity judged again (report --full)."""

    def __init__(
        self,
        db: ResultsStore,
        todo: list[tuple[str, str | None]],
        fresh: bool,
        resident: Resident | None,
    ):
        self.db, self.todo, self.fresh, self.resident = db, todo, fresh, resident
        self.memo: SummaryMemo | None = None
        if resident is not None:
            self.memo = resident.memo.begin(resident.windows_known())
        self.done: Callable[[], Made] | None = None  # parallel.begun's wait, once begun

    def make(self, forked: bool) -> Made:
        """The summaries of `todo`, and what they used and made of the memo (a forked
        process's, which the main one keeps); `forked`: on a connection of this process's
        own."""
        store = self.db.reopen() if forked else self.db
        try:
            made = [
                explain.summary_for(store, name, host or None, fresh=self.fresh, memo=self.memo)
                for name, host in self.todo
            ]
        finally:
            if forked:
                store.close()
        return made, None if self.memo is None else self.memo.delta()

    def of(self, key: tuple[str, str | None]) -> ExperimentSummary:
        """The summary of the view `key`: the one being made, or made here (an
        experiment recorded unchanged whose files could not be kept)."""
        if key in self.todo:
            assert self.done is not None
            return self.done()[0][self.todo.index(key)]
        name, host = key
        return explain.summary_for(self.db, name, host, fresh=self.fresh)

    def keep(self) -> None:
        """A resident process keeps the windows known and those the summaries read, and
        the reductions and comparisons they used (after they are made: waits for them)."""
        if self.resident is None or self.memo is None or self.done is None:
            return
        delta = self.done()[1]
        assert delta is not None
        self.resident.keep_windows({**(self.memo.windows or {}), **delta.windows})
        self.resident.memo.keep(delta)

"""The experiments' summaries a site update makes (explain.summary_for: what needs the
stored runs, not the views), begun in a process of their own while the main one writes
the pages (parallel.begun), and the runs' stationarity windows they read, kept by a
resident process (report.resident) from one update to the next."""

from __future__ import annotations

from collections.abc import Callable

from blocklab.analysis.stationarity import Window
from blocklab.analysis.summary import ExperimentSummary
from blocklab.report import explain
from blocklab.report.resident import Resident
from blocklab.store import ResultsStore

Made = tuple[list[ExperimentSummary], dict[int, Window]]


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
        self.known = None if resident is None else resident.windows_known()
        self.done: Callable[[], Made] | None = None  # parallel.begun's wait, once begun

    def make(self, forked: bool) -> Made:
        """The summaries of `todo`, and the windows they read that were not known (a
        forked process's, which the main one keeps); `forked`: on a connection of this
        process's own."""
        store = self.db.reopen() if forked else self.db
        before = set(self.known or ())
        try:
            made = [
                explain.summary_for(
                    store, name, host or None, fresh=self.fresh, known_windows=self.known
                )
                for name, host in self.todo
            ]
        finally:
            if forked:
                store.close()
        added = {i: w for i, w in (self.known or {}).items() if i not in before}
        return made, added

    def of(self, key: tuple[str, str | None]) -> ExperimentSummary:
        """The summary of the view `key`: the one being made, or made here (an
        experiment recorded unchanged whose files could not be kept)."""
        if key in self.todo:
            assert self.done is not None
            return self.done()[0][self.todo.index(key)]
        name, host = key
        return explain.summary_for(self.db, name, host, fresh=self.fresh)

    def keep_windows(self) -> None:
        """A resident process keeps the windows known and those the summaries read (after
        they are made: waits for them)."""
        if self.resident is not None and self.known is not None and self.done is not None:
            self.resident.keep_windows({**self.known, **self.done()[1]})

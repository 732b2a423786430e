"""What an experiment's summary made in one update of a site and may take again in the
next, in a process that updates the site again and again (report.resident: `report
--watch`): each variant's per-round reduction of a metric, each comparison of two
reductions, and the runs' stationarity windows (kept_trends.windows_of's `known`).

A variant's reduction (rounds.per_round_values of summary.run_values) is a pure function
of the design, the metric, whether the variant is a reference, and its runs' stored rows
and metrics, which never change once stored: a run is named by its id, start and end, as
the resident names the runs it reads (store.base.RunsKept). A comparison
(metrics.compare) is a pure function of its two reductions, the metric, the equivalence
margin and the nuisance (interleaved slots). At 10,000 runs the summary reduced and
compared every variant's five metrics again at each update, 0.3 of its 0.85 s; with one
more run, one variant's reductions change.

A reduction taken from the memo is a copy whose values carry a token (`Keyed`) naming
it, so a comparison of two of them is found by their tokens. The memo keeps what an
update used and made (`delta`, `keep`): a forked process makes the summaries and the
process that keeps the memo takes in what it made. An update that summarises one
experiment of a store drops what the others' summaries made (an experiment whose files
an update keeps whole is not summarised); when two experiments change in turn, each
update reduces its experiment whole, as without the memo."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab.analysis.rounds import RoundValues
from blocklab.analysis.stationarity import Window
from blocklab.analysis.stats import Comparison
from blocklab.store.base import run_key

ReductionKey = tuple[Any, ...]
ComparisonKey = tuple[Any, ...]


class Keyed(dict[int, float]):
    """A reduction's values by round, with the token of the reduction they are."""

    __slots__ = ("token",)

    def __init__(self, items: Mapping[int, float], token: int):
        super().__init__(items)
        self.token = token


def reduction_key(
    design: str, variant_id: str, is_reference: bool, metric: str, runs: Sequence[Any]
) -> ReductionKey:
    """What a variant's reduction of `metric` is made from: its runs (stored rows) named
    by their id, start and end, in their order."""
    named = tuple(run_key(r) for r in runs)
    return (design, variant_id, is_reference, metric, named)


@dataclass(frozen=True)
class Delta:
    """What one update's summaries used and made (SummaryMemo.delta): small, as it comes
    back from a forked process."""

    windows: dict[int, Window]  # judged or read, not known before
    used_tokens: set[int]  # the reductions used, by token
    made: dict[ReductionKey, tuple[int, RoundValues]]  # the reductions made
    comparisons: dict[ComparisonKey, Comparison | None]  # every one used
    next_token: int


@dataclass
class SummaryMemo:
    windows: dict[int, Window] | None = None  # run id -> window, of the runs read now
    reductions: dict[ReductionKey, tuple[int, RoundValues]] = field(default_factory=dict)
    comparisons: dict[ComparisonKey, Comparison | None] = field(default_factory=dict)
    next_token: int = 0
    _used: set[int] = field(default_factory=set)  # tokens
    _made: dict[ReductionKey, tuple[int, RoundValues]] = field(default_factory=dict)
    _used_comparisons: set[ComparisonKey] = field(default_factory=set)
    _windows_before: set[int] = field(default_factory=set)

    def begin(self, windows: dict[int, Window]) -> SummaryMemo:
        """Ready for an update whose runs' known windows are `windows` (filled as the
        summaries read more); nothing used yet."""
        self.windows, self._windows_before = windows, set(windows)
        self._used, self._made, self._used_comparisons = set(), {}, set()
        return self

    def reduced(self, key: ReductionKey, make: Callable[[], RoundValues]) -> RoundValues:
        """The reduction `key` names: kept, or made now; a copy, its values `Keyed`."""
        got = self.reductions.get(key)
        if got is None:
            got = self.reductions[key] = self._made[key] = (self.next_token, make())
            self.next_token += 1
        token, rv = got
        self._used.add(token)
        return RoundValues(Keyed(rv.values, token), dict(rv.dropped))

    def compared(
        self,
        ref_values: Mapping[int, float],
        values: Mapping[int, float],
        rest: tuple[Any, ...],
        make: Callable[[], Comparison | None],
    ) -> Comparison | None:
        """The comparison of two reductions taken from this memo (their tokens) and
        `rest` (what else it is made from): kept, or made now; made each time for
        values of no token."""
        if not (isinstance(ref_values, Keyed) and isinstance(values, Keyed)):
            return make()
        key = (ref_values.token, values.token, *rest)
        if key not in self.comparisons:
            self.comparisons[key] = make()
        self._used_comparisons.add(key)
        return self.comparisons[key]

    def delta(self) -> Delta:
        """What this update used and made, for `keep` in the process that keeps the memo
        (this one's copy, when it was forked)."""
        known = self.windows or {}
        return Delta(
            {i: w for i, w in known.items() if i not in self._windows_before},
            set(self._used),
            dict(self._made),
            {k: self.comparisons[k] for k in self._used_comparisons},
            self.next_token,
        )

    def keep(self, delta: Delta) -> None:
        """Keep what an update used and made, and nothing else (the memo does not grow
        with runs and variants gone)."""
        kept = {k: v for k, v in self.reductions.items() if v[0] in delta.used_tokens}
        self.reductions = {**kept, **delta.made}
        self.comparisons = delta.comparisons
        self.next_token = max(self.next_token, delta.next_token)

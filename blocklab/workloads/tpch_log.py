"""Server-side per-query times of a go-tpc `tpch run`, from the server log (pure).

go-tpc's own per-query times floor at 100 ms (its histogram's lowest value), so the
tpch driver asks the server instead: go-tpc's sessions get `log_min_duration_statement=0`
as a startup setting (lib/pq passes unknown connection parameters to the server), and the
server logs every statement they run with its duration, measured by the server (parse,
plan, execute, send), to the microsecond:

    1763900000.123 [4242] LOG:  duration: 12.345 ms  statement: /*PLACEHOLDER*/ select
    <the rest of the query text, on the following lines>

(blocklab's log_line_prefix is '%n [%p] '.) Only go-tpc's queries count: lib/pq's
connection check ";" and the `create or replace view revenue0 ...` that go-tpc runs before
the queries (its MySQL-dialect view, unused by its PostgreSQL queries, which needs
PostgreSQL 16's date_add) are skipped (NOT_QUERIES). With one go-tpc thread the queries
run in the order given, round after round (`--count` = queries x passes), so the Nth
statement is query N mod len(queries); `assign` checks that every pass sent the same
text for a query.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

_LINE_START = re.compile(r"^\d+(?:\.\d+)? \[\d+\] [A-Z0-9]+:  ", re.MULTILINE)
_DURATION = re.compile(
    r"^\d+(?:\.\d+)? \[(?P<pid>\d+)\] LOG:  duration: (?P<ms>\d+(?:\.\d+)?) ms  "
    r"statement: (?P<text>.*)\Z",
    re.DOTALL,
)


NOT_QUERIES = re.compile(r"^(;|create\s)", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    pid: int
    duration_ms: float
    text: str


@dataclass(frozen=True)
class QueryTiming:
    query: str  # "q1"
    text: str  # the statement go-tpc sent
    durations_ms: tuple[float, ...]  # one per pass, in order

    @property
    def calls(self) -> int:
        return len(self.durations_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.durations_ms)

    @property
    def total_ms(self) -> float:
        return sum(self.durations_ms)


def statements(log_text: str) -> list[Statement]:
    """Every "duration: ... statement: ..." entry of a log segment that is one of go-tpc's
    queries, in order (the statement's following lines included, up to the next log
    line)."""
    starts = [m.start() for m in _LINE_START.finditer(log_text)] + [len(log_text)]
    found = []
    for a, b in zip(starts, starts[1:], strict=False):
        m = _DURATION.match(log_text[a:b].rstrip("\n"))
        if m is None:
            continue
        text = m["text"].strip()
        if not NOT_QUERIES.match(text):
            found.append(Statement(int(m["pid"]), float(m["ms"]), text))
    return found


class LogMismatch(ValueError):
    """The logged statements do not match the queries go-tpc was asked to run."""


def assign(found: Sequence[Statement], queries: Sequence[str], passes: int) -> list[QueryTiming]:
    """The statements of a one-thread run of `queries` x `passes`, by query."""
    expected = len(queries) * passes
    if len(found) != expected:
        raise LogMismatch(
            f"the server logged {len(found)} statement(s) of go-tpc, expected {expected} "
            f"({len(queries)} queries x {passes} pass(es))"
        )
    out = []
    for i, name in enumerate(queries):
        mine = found[i :: len(queries)]
        texts = {s.text for s in mine}
        if len(texts) != 1:
            raise LogMismatch(f"{name}: go-tpc sent {len(texts)} different texts across passes")
        out.append(QueryTiming(name, mine[0].text, tuple(s.duration_ms for s in mine)))
    return out

"""One reduction, everywhere: a variant's runs in a round to one per-round value (pure).

The summary (blocklab.analysis.summary), the analysis of each design
(blocklab.analysis.designs), the report (blocklab.report.data) and the per-round CSV
(rounds.csv) all call `per_round_values`, so they keep and drop the same rounds:

- a variant run `copies` times in a round (2 in abba, 2 for aa-control's reference, else
  1; an interleaved round stores one record per variant, its slices aggregated) counts
  once, as the geometric mean of its copies 0 .. copies-1;
- a round that lacks one of those copies (a failed run: half a palindrome) is dropped with
  a reason, since half a palindrome does not cancel the round's drift;
- a value that is NaN or infinite is dropped with a reason (never a crash);
- a 0 or negative copy is kept: the round's value is then the arithmetic mean of its
  copies (no geometric mean exists), and the comparison falls back to differences
  (blocklab.analysis.stats).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from blocklab.experiment_file import design as designs


class RunValue(NamedTuple):
    """One run of a variant, as the reduction sees it (a named tuple: the summary makes
    one a run and metric, 40,000 at 10,000 runs; a frozen dataclass costs twice as much
    to make)."""

    round: int
    copy: int  # the variant's n-th run in the round (RunRecord.copy_index)
    value: float | None  # None: the run failed or has no value for this metric
    reason: str = ""  # a failed run's reason ("" for a run that did not fail)


@dataclass(frozen=True)
class RoundValues:
    values: dict[int, float] = field(default_factory=dict)  # round -> value
    dropped: dict[int, str] = field(default_factory=dict)  # round -> why it has no value


def copies_per_round(design: str, *, is_reference: bool) -> int:
    """How many runs of a variant one round holds under `design`."""
    if design == designs.ABBA:
        return 2
    return 2 if design == designs.AA_CONTROL and is_reference else 1


def per_round_values(design: str, runs: Iterable[RunValue], *, is_reference: bool) -> RoundValues:
    """Per round, one value from a variant's `runs` under `design` (module docstring)."""
    return combine(copies_per_round(design, is_reference=is_reference), runs)


def combine(copies: int, runs: Iterable[RunValue]) -> RoundValues:
    """Per round, the geometric mean of copies 0 .. copies-1 (their mean when one is not
    positive); a round missing one of them, or with a non-finite one, is dropped."""
    by_round: dict[int, dict[int, RunValue]] = {}
    for run in runs:
        by_round.setdefault(run.round, {}).setdefault(run.copy, run)
    out = RoundValues()
    for rnd in sorted(by_round):
        got = by_round[rnd]
        if copies == 1 and (one := got.get(0)) is not None:  # one copy: its value, exactly
            if one.value is not None and math.isfinite(one.value):
                out.values[rnd] = float(one.value or 0.0)  # as _mean: -0.0 reads 0.0
                continue
        why = _why_dropped(got, copies)
        if why:
            out.dropped[rnd] = why
        else:
            out.values[rnd] = _mean([float(got[c].value or 0.0) for c in range(copies)])
    return out


def _why_dropped(got: dict[int, RunValue], copies: int) -> str:
    """Why a round's copies give no value ("" when they do)."""
    reasons = []
    for c in range(copies):
        run = got.get(c)
        if run is None:
            reasons.append(f"copy {c} has no run")
        elif run.value is None:
            failed = f" (failed: {run.reason})" if run.reason else ""
            reasons.append(f"copy {c} has no value{failed}")
        elif not math.isfinite(run.value):
            reasons.append(f"copy {c} is {run.value}, not a finite number")
    if not reasons:
        return ""
    usable = sum(
        1 for c, r in got.items() if c < copies and r.value is not None and math.isfinite(r.value)
    )
    if copies > 1 and usable:
        return "half a palindrome, left out (it does not cancel drift): " + "; ".join(reasons)
    return "; ".join(reasons)


def _mean(xs: list[float]) -> float:
    if len(xs) == 1:
        return xs[0]  # one copy: its value, exactly
    if all(x > 0 for x in xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))
    return sum(xs) / len(xs)

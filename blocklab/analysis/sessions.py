"""Whether the sessions of an experiment agree: the between-session check (pure).

A session is one experiment loop: the runs one `blocklab run` (or one fleet job) stored,
named in their provenance (`session`, recorded since 2026-12-01). An experiment resumed or
extended (`--rounds 16` after 8 rounds) pools the rounds of several sessions. A
comparison's interval counts rounds as independent; what holds for a whole session (the
machine's hour, where the binaries and the datasets' files landed in memory) and moves
one variant against the other is shared by every round of that session, and the
interval is then too narrow: Kalibera and Jones's levels ("Rigorous Benchmarking in
Reasonable Time", ISMM 2013), run within session within build.

Per comparison and round, d = ln(variant / reference). Two nested least-squares fits,
one level for all rounds and one level per session, each with the storage slot of the
interleaved design beside it (-1/+1 per round, as the comparison fits it: a session with
an odd number of rounds holds the two slots unequally, and a slot bias must not read as
a session effect):

    d[r] = mu       + beta * slot[r] + e[r]
    d[r] = mu[s(r)] + beta * slot[r] + e[r]

F = ((RSS_one - RSS_each) / (S - 1)) / (RSS_each / (n - S - k)), k = 1 with the slot term,
tests "every session gives the same answer"; p from F's tail (statsmodels' `anova_lm` of
the two fits gives the same, tests/analysis/test_sessions.py). Rounds whose two runs came
from different sessions (a round interrupted and run again) and runs that name no session
are left out. A variant's drift that its reference shares cancels in d.

The line also gives the answer across sessions: the mean of the sessions' levels with a t
interval on S - 1 degrees of freedom, each session one observation (with two sessions it
is wide: that is what two sessions know of a session level). A test that finds no
difference between a few sessions does not show there is none; the interval across them
is what holds if there is. When the sessions disagree (p < 0.05), the comparison's own
interval, which counts rounds, does not hold across sessions, and its verdict says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy import special  # F's tail (fdtrc)

from blocklab.analysis import stats

ALPHA = 0.05  # the sessions disagree below this p


@dataclass(frozen=True)
class Session:
    name: str  # the provenance's `session`
    rounds: tuple[int, ...]
    level_pct: float  # the comparison in this session's rounds, the slot fitted out, in %


@dataclass(frozen=True)
class SessionCheck:
    variant_id: str
    label: str  # the compared variant
    sessions: tuple[Session, ...]  # in the order of their first round
    f_stat: float
    p_value: float
    # the mean of the sessions' levels and its 95 % interval (t, S - 1 df), in %: the
    # answer across sessions, each one observation
    across_pct: tuple[float, float, float]

    @property
    def disagree(self) -> bool:
        return self.p_value < ALPHA

    def line(self) -> str:
        """One check line: each session's rounds and answer, the F test and the answer
        across them; marked '!' when they disagree."""
        each = ", ".join(f"rounds {_spans(s.rounds)}: {s.level_pct:+.1f} %" for s in self.sessions)
        test = f"F = {self.f_stat:.2f}, {_p(self.p_value)}"
        n = len(self.sessions)
        mean, low, high = self.across_pct
        across = f"across sessions {mean:+.1f} % ({low:+.1f} to {high:+.1f})"
        if not self.disagree:
            return (
                f"sessions: {self.label} in {n} sessions ({each}): no difference between "
                f"them detected ({test}); {across}"
            )
        return (
            f"! sessions: {self.label} differed between its {n} sessions ({each}; {test}): "
            f"its interval counts rounds, not sessions; {across}"
        )


@dataclass(frozen=True)
class Sessions:
    """What the summary says of an experiment's sessions."""

    checks: tuple[SessionCheck, ...] = ()  # one per comparison that spans two or more
    # each session its runs name, with its rounds, in the order of their first round
    rounds_of: tuple[tuple[str, tuple[int, ...]], ...] = ()
    unnamed: bool = False  # a round with values whose runs name no session, or two

    def lines(self) -> list[str]:
        """One session: the interval holds within it (and how to add another); one a round
        (a fleet's jobs): it holds across them; else each comparison's check."""
        n = len(self.rounds_of)
        if self.unnamed:  # older runs, or a round split between sessions: no claim on them
            return [c.line() for c in self.checks]
        if n == 1:
            rounds = self.rounds_of[0][1]
            return [
                f"sessions: 1 (rounds {_spans(rounds)}): the interval holds within it; "
                f"`--rounds {2 * max(rounds)}` later adds a second to compare"
            ]
        if n > 1 and all(len(rounds) == 1 for _, rounds in self.rounds_of):
            return [f"sessions: one a round ({n}): the interval holds across sessions"]
        return [c.line() for c in self.checks]


class Compared(Protocol):
    """What the check reads of a variant's summary (blocklab.analysis.summary)."""

    @property
    def variant_id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def is_reference(self) -> bool: ...
    @property
    def reference_id(self) -> str | None: ...
    @property
    def values(self) -> Mapping[int, float]: ...
    @property
    def comparison(self) -> Any: ...


def find(
    variants: Sequence[Compared],
    session_of: Mapping[str, Mapping[int, str]],
    slots: Mapping[str, Mapping[int, float]],
) -> Sessions:
    """The sessions named (`session_of`: variant id -> round -> session), and the check of
    each comparison on the ratio scale (its comparison's `scale`) whose rounds came from
    two sessions or more; `slots`: variant id -> its storage slot per round (the
    interleaved design's, as its comparison fits it)."""
    by_id = {v.variant_id: v for v in variants}
    out = []
    for v in variants:
        ref = by_id.get(v.reference_id or "")
        if v.is_reference or ref is None or getattr(v.comparison, "scale", None) != stats.RATIO:
            continue
        found = check(
            v.variant_id, v.label, ref.values, v.values, session_of, ref.variant_id,
            slots.get(v.variant_id),
        )  # fmt: skip
        if found is not None:
            out.append(found)
    rounds: dict[str, set[int]] = {}
    for r, name in of_rounds(session_of).items():  # a round split between two: in neither
        rounds.setdefault(name, set()).add(r)
    named = sorted(rounds.items(), key=lambda kv: min(kv[1]))
    measured = {r for v in variants for r in v.values}
    unnamed = bool(named) and bool(measured - set().union(*(rs for _, rs in named)))
    return Sessions(tuple(out), tuple((name, tuple(sorted(rs))) for name, rs in named), unnamed)


def rounds_by_session(
    runs: Iterable[tuple[str, int, str | None]],
) -> dict[str, dict[int, str]]:
    """variant id -> round -> the session its successful runs of that round name, from
    (variant id, round, session or None) per successful run; a round whose runs name
    none, or more than one, is left out."""
    seen: dict[str, dict[int, set[str | None]]] = {}
    for vid, round_no, session in runs:
        seen.setdefault(vid, {}).setdefault(round_no, set()).add(session)
    out: dict[str, dict[int, str]] = {}
    for vid, by_round in seen.items():
        named = {r: s.pop() for r, s in by_round.items() if len(s) == 1}
        out[vid] = {r: s for r, s in named.items() if s is not None}
    return out


def of_rounds(session_of: Mapping[str, Mapping[int, str]]) -> dict[int, str]:
    """round -> its session, for the rounds whose variants (`session_of`: variant id ->
    round -> session, rounds_by_session) name one session between them."""
    seen: dict[int, set[str]] = {}
    for by_round in session_of.values():
        for r, name in by_round.items():
            seen.setdefault(r, set()).add(name)
    return {r: names.pop() for r, names in sorted(seen.items()) if len(names) == 1}


def check(
    variant_id: str,
    label: str,
    ref_values: Mapping[int, float],
    values: Mapping[int, float],
    session_of: Mapping[str, Mapping[int, str]],
    ref_id: str,
    slot: Mapping[int, float] | None = None,
) -> SessionCheck | None:
    """The between-session check of one comparison (values: round -> metric value), or
    None: fewer than two sessions, no degree of freedom left within them, a value not
    positive, or the slot term not separable from the sessions."""
    mine, theirs = session_of.get(variant_id, {}), session_of.get(ref_id, {})
    rounds = sorted(
        r
        for r in set(values) & set(ref_values)
        if r in mine and mine[r] == theirs.get(r) and (slot is None or r in slot)
    )
    if any(values[r] <= 0 or ref_values[r] <= 0 for r in rounds):
        return None
    names = list(dict.fromkeys(mine[r] for r in rounds))  # by first round
    k = 0 if slot is None else 1
    n, n_s = len(rounds), len(names)
    if n_s < 2 or n - n_s - k < 1:
        return None
    d = np.array([math.log(values[r] / ref_values[r]) for r in rounds])
    each = np.array([[1.0 if mine[r] == s else 0.0 for s in names] for r in rounds])
    one = np.ones((n, 1))
    if slot is not None:
        column = np.array([[slot[r]] for r in rounds])
        each, one = np.hstack([each, column]), np.hstack([one, column])
    if np.linalg.matrix_rank(each) < each.shape[1] or np.linalg.matrix_rank(one) < one.shape[1]:
        return None
    coef, rss_each = least_squares(each, d)
    _, rss_one = least_squares(one, d)
    df = n - n_s - k
    f_stat = ((rss_one - rss_each) / (n_s - 1)) / (rss_each / df) if rss_each > 0 else math.inf
    p = float(special.fdtrc(n_s - 1, df, f_stat)) if math.isfinite(f_stat) else 0.0
    levels = coef[:n_s]
    sessions = tuple(
        Session(s, tuple(r for r in rounds if mine[r] == s), 100.0 * math.expm1(float(lv)))
        for s, lv in zip(names, levels, strict=True)
    )
    return SessionCheck(variant_id, label, sessions, max(0.0, f_stat), p, _across(levels))


def least_squares(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares coefficients and the residual sum of squares (also the slot A/A's
    fit per session, analysis.interleaved_checks)."""
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    resid = y - x @ coef
    return coef, float(resid @ resid)


def _across(levels: np.ndarray) -> tuple[float, float, float]:
    """The mean of the sessions' levels (logs) and its 95 % t interval, in %."""
    m, s = float(levels.mean()), float(levels.std(ddof=1))
    half = stats.t_quantile(len(levels) - 1) * s / math.sqrt(len(levels))
    mean, low, high = (100.0 * math.expm1(x) for x in (m, m - half, m + half))
    return mean, low, high


def _spans(rounds: Iterable[int]) -> str:
    """'1-8', '1-3, 7, 9-10'."""
    out: list[list[int]] = []
    for r in sorted(rounds):
        if out and r == out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"

"""Carry-over, measured (pure): does a run right after a switch of variant differ from a
run right after a run of the same variant, once the drift within the round is taken out?

In a round every run but the first follows another run. A run "after a switch" follows a
run of another variant (A B B A: the first B, the last A); a run "after a repeat" follows
a run of the same variant (the second B). A position or carry-over effect (the previous
variant's caches, dirty pages or checkpoint debt) shows as a ratio switch / repeat away
from 1.

Comparing the two kinds of runs directly reads a drift as a carry-over: in A B B A the
only repeat (position 2) runs right after the switch it is compared with (position 1), so
a throughput falling 1 % per run gave 0.990 and flagged carry-over in 11 to 12 % of
experiments without any. The estimate is therefore a least-squares model of the log value
of every run with a known predecessor:

    log y = level(round) + slope(round) * position + effect(variant)
            + first * [first run of its round] + gamma * [after a switch] + e

A level and a linear drift slope per round, a level per variant, the round's first run
apart (what ran before it, a restore and a new server, is not the round's business), and
gamma, the carry-over: exp(gamma) is the ratio after a switch / after a repeat, its 95 %
CI the t interval with the model's residual degrees of freedom. A linear drift within a
round cancels exactly. What that leaves identifiable:

- abba (A B B A and B A A B alternating): per round 4 runs, 2 taken by level and slope;
  the cubic contrast -y0 + 3 y1 - 3 y2 + y3 is 4 gamma - first, the quadratic one
  y0 - y1 - y2 + y3 is 2 (effect(A) - effect(B)) + first in A B B A and its opposite
  in B A A B: gamma is identifiable once both orders ran, with 2 n - 3 residual df for
  n rounds (and at least one left over).
- aa-control (the reference twice, in orders balanced over the rounds): per round 3 runs,
  one contrast left (y0 - 2 y1 + y2): effect + first + gamma in R R A, effect + first -
  2 gamma in A R R (R A R has no repeat): gamma is identifiable once both places of the
  repeat ran, with n - 3 residual df, so it needs more rounds than abba.
- paired (A B): no run follows its own variant, and 2 runs per round are all level and
  slope: no estimate. Where the model cannot separate gamma from the drift the result is
  a note saying so, never a number.

With rounds from two sessions or more (analysis.sessions), the level per variant is one
per variant and session: a comparison that moved between sessions (a session level) falls
on the runs of the sessions, and a session that ran the two orders unequally (8 rounds,
then 3) would pass part of it to gamma (tests/analysis/test_carryover_model.py).

`round_log_ratios` and `from_round_log_ratios` keep the per-round paired reduction the
interleaved design's slices use (blocklab.analysis.interleaved_checks).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from blocklab.analysis import stats

SWITCH = "switch"
REPEAT = "repeat"


@dataclass(frozen=True)
class PositionRun:
    """One run of a round, in the order the round ran them."""

    round: int
    position: int
    variant_id: str
    value: float | None  # None: failed, or no value for the metric


@dataclass(frozen=True)
class CarryOver:
    comparison: stats.Comparison | None  # after a switch / after a repeat, paired by round
    n_rounds: int  # rounds with a variant run both after a switch and after a repeat
    note: str = ""  # why there is no estimate
    of: str = "runs"  # what was compared: "runs", or "slices" (interleaved rounds)
    # interleaved, two variants: the second variant's gain after a switch over the
    # first's, paired by round (1: both gain alike, so the Thue-Morse order cancels it)
    between: stats.Comparison | None = None

    @property
    def confounded(self) -> bool:
        """The design ran repeats, but in orders (or too few rounds) that cannot separate
        the carry-over from the drift: worth saying, unlike a design without repeats."""
        return self.comparison is None and self.note in (UNIDENTIFIABLE, NO_DF)

    @property
    def detected(self) -> bool:
        c = self.comparison
        return c is not None and c.verdict in (stats.FASTER, stats.SLOWER)

    @property
    def differs(self) -> bool:
        """The two variants' gains after a switch differ (`between`'s CI excludes 1): a
        carry-over the balanced order does not cancel, whatever its average."""
        b = self.between
        return b is not None and b.verdict in (stats.FASTER, stats.SLOWER)

    @property
    def warns(self) -> bool:
        """A carry-over that may lean the comparison: the variants' gains differ, or one
        is detected where nothing says both variants share it."""
        return self.differs or (self.detected and self.between is None)


def estimate(runs: Iterable[PositionRun], session_of: Mapping[int, str] | None = None) -> CarryOver:
    """The carry-over ratio (after a switch / after a repeat) with its 95 % CI, from the
    model of the module's docstring; a note instead where the design cannot give it.
    `session_of`: round -> the session that ran it (a level per variant and session)."""
    rows = model_rows(runs)
    if not any(r.kind == REPEAT for r in rows):
        return CarryOver(None, 0, NO_REPEAT)
    fit = fit_switch(rows, session_of)
    rounds = {r.round for r in rows}
    if isinstance(fit, str):
        return CarryOver(None, len(rounds), fit)
    sessions = len({(session_of or {}).get(rnd, "") for rnd in rounds})
    return CarryOver(_comparison(fit, len(rounds), sessions), len(rounds))


NO_REPEAT = "no round ran a variant both after a switch and after a repeat"
UNIDENTIFIABLE = (
    "not identifiable: with a level and a linear drift per round, the runs after a switch "
    "cannot be told from the drift in these orders (A B B A needs rounds of both orders, "
    "A/A control its reference's copies adjacent at both ends of a round)"
)
NO_DF = "no degrees of freedom left beside the drift per round: more rounds needed"
FIRST = "first"  # the round's first run: what ran before it is not part of the round


@dataclass(frozen=True)
class ModelRow:
    """One run in the model: its log value and what ran right before it."""

    round: int
    position: int
    variant_id: str
    log_value: float
    kind: str  # SWITCH, REPEAT or FIRST


def model_rows(runs: Iterable[PositionRun]) -> list[ModelRow]:
    """The runs with a usable value whose predecessor in the round is known (it ran at
    the position right before, whatever its value), and the round's first runs."""
    by_round: dict[int, dict[int, PositionRun]] = {}
    for run in runs:
        by_round.setdefault(run.round, {})[run.position] = run
    rows = []
    for rnd in sorted(by_round):
        at = by_round[rnd]
        first = min(at)
        for pos in sorted(at):
            run, prev = at[pos], at.get(pos - 1)
            if run.value is None or not _usable(run.value) or (pos != first and prev is None):
                continue
            kind = (
                FIRST if prev is None else SWITCH if prev.variant_id != run.variant_id else REPEAT
            )
            rows.append(ModelRow(rnd, pos, run.variant_id, math.log(run.value), kind))
    return rows


@dataclass(frozen=True)
class SwitchFit:
    gamma: float  # log(after a switch / after a repeat)
    se: float
    df: int  # residual degrees of freedom


def design_matrix(
    rows: Sequence[ModelRow], session_of: Mapping[int, str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): the switch indicator in column 0, then a level and a centred position
    slope per round, a level per variant but the first (per variant and session, with
    `session_of`: round -> session, rounds without one a session of their own), and the
    first-run indicator."""
    rounds = {rnd: k for k, rnd in enumerate(sorted({r.round for r in rows}))}
    session = {rnd: (session_of or {}).get(rnd, "") for rnd in rounds}
    first = min(r.variant_id for r in rows) if rows else ""
    keys = sorted({(r.variant_id, session[r.round]) for r in rows if r.variant_id != first})
    variants = {key: k for k, key in enumerate(keys)}
    positions: dict[int, list[int]] = {}
    for r in rows:
        positions.setdefault(r.round, []).append(r.position)
    centre = {rnd: sum(ps) / len(ps) for rnd, ps in positions.items()}
    n_rounds = len(rounds)
    x = np.zeros((len(rows), 2 + 2 * n_rounds + len(variants)))
    for i, r in enumerate(rows):
        k = rounds[r.round]
        x[i, 0] = r.kind == SWITCH
        x[i, 1] = r.kind == FIRST
        x[i, 2 + k] = 1.0
        x[i, 2 + n_rounds + k] = r.position - centre[r.round]
        if (key := (r.variant_id, session[r.round])) in variants:
            x[i, 2 + 2 * n_rounds + variants[key]] = 1.0
    return x, np.array([r.log_value for r in rows])


def fit_switch(
    rows: Sequence[ModelRow], session_of: Mapping[int, str] | None = None
) -> SwitchFit | str:
    """Least squares of the model; a note (str) when the switch coefficient is not
    identifiable or no residual degree of freedom is left."""
    x, y = design_matrix(rows, session_of)
    keep = _independent_columns(x)
    if 0 not in keep:
        return UNIDENTIFIABLE
    xk = x[:, keep]
    df = len(y) - len(keep)
    if df < 1:
        return NO_DF
    inv = np.linalg.inv(xk.T @ xk)
    coef = inv @ (xk.T @ y)
    resid = y - xk @ coef
    return SwitchFit(float(coef[0]), math.sqrt(float(resid @ resid) / df * inv[0, 0]), df)


def _independent_columns(x: np.ndarray) -> list[int]:
    """Columns kept in order, each only if it adds to the rank of those kept before it,
    with the switch column judged last: it is kept only if the nuisance columns leave it
    identifiable. Returned with the switch column (0) first when kept."""
    if _rank(x) == x.shape[1]:  # the usual case: every column identifiable
        return list(range(x.shape[1]))
    kept: list[int] = []
    for j in range(1, x.shape[1]):
        if _rank(x[:, [*kept, j]]) > len(kept):
            kept.append(j)
    return [0, *kept] if _rank(x[:, [*kept, 0]]) > len(kept) else kept


def _rank(x: np.ndarray) -> int:
    return int(np.linalg.matrix_rank(x))


def _comparison(fit: SwitchFit, n_rounds: int, sessions: int = 1) -> stats.Comparison:
    """The fit as a ratio comparison (after a switch / after a repeat) over n_rounds, in
    `sessions` whose levels it fitted."""
    half = stats.t_quantile(fit.df) * fit.se
    low, high = math.exp(fit.gamma - half), math.exp(fit.gamma + half)
    p = stats.two_sided_p(fit.gamma / fit.se, fit.df) if fit.se > 0 else None
    verdict = stats.FASTER if low > 1 else stats.SLOWER if high < 1 else stats.NO_DIFFERENCE
    ratio = math.exp(fit.gamma)
    width = (high - low) / 2 / ratio * 100
    return stats.Comparison(
        n_rounds, stats.RATIO, ratio, low, high, p, verdict, width, sessions=sessions
    )


def from_round_log_ratios(samples: Mapping[int, float], of: str = "runs") -> CarryOver:
    """The CarryOver of per-round samples (round -> log(after a switch / after a
    repeat)) of `of` ("runs" or "slices"): their paired t interval, as a ratio; every
    estimate is built here."""
    if not samples:
        return CarryOver(
            None, 0, "no round ran a variant both after a switch and after a repeat", of
        )
    ones = dict.fromkeys(samples, 1.0)
    ratios = {r: math.exp(x) for r, x in samples.items()}
    return CarryOver(stats.compare_paired(ones, ratios), len(samples), of=of)


def round_log_ratios(runs: Iterable[PositionRun]) -> dict[int, float]:
    """round -> mean over its variants of log(after-switch / after-repeat geometric means)."""
    by_round: dict[int, list[PositionRun]] = {}
    for run in runs:
        by_round.setdefault(run.round, []).append(run)
    out = {}
    for rnd, rs in by_round.items():
        logs = _variant_log_ratios(sorted(rs, key=lambda r: r.position))
        if logs:
            out[rnd] = statistics.fmean(logs)
    return out


def _variant_log_ratios(ordered: list[PositionRun]) -> list[float]:
    """Per variant of one round with both kinds of runs, log(switch) - log(repeat) means."""
    kinds: dict[str, dict[str, list[float]]] = {}
    for prev, run in zip(ordered, ordered[1:], strict=False):
        value = run.value
        if run.position != prev.position + 1 or value is None or not _usable(value):
            continue  # a gap in the positions (what ran before is unknown), or no value
        kind = REPEAT if prev.variant_id == run.variant_id else SWITCH
        kinds.setdefault(run.variant_id, {}).setdefault(kind, []).append(math.log(value))
    return [
        statistics.fmean(k[SWITCH]) - statistics.fmean(k[REPEAT])
        for k in kinds.values()
        if SWITCH in k and REPEAT in k
    ]


def _usable(x: float) -> bool:
    return math.isfinite(x) and x > 0


def sentence(c: CarryOver, words: tuple[str, str] = ("faster", "slower")) -> str:
    """The carry-over in words: a warning when its CI excludes 1, else that none was seen;
    with two interleaved variants (`between`), whether their gains differ, which decides
    whether the balanced order cancels it. `words`: what a ratio above 1 and below 1 mean
    for the metric."""
    k = c.comparison
    if k is None or k.ratio is None:
        return f"carry-over: not measured ({c.note or (k.note if k else '')})"
    ci, rounds = _ci_pct(k), stats.rounds_text(c.n_rounds, k.sessions)
    if c.detected:
        pct = abs(k.ratio - 1) * 100
        up, down = words
        head = (
            f"{c.of} right after a switch were {pct:.1f} % {up if k.ratio > 1 else down} "
            f"(95 % CI {ci}, {rounds}): carry-over"
        )
    else:
        seen = "" if c.differs else "none detected: "
        head = (
            f"carry-over: {seen}{c.of} right after a switch vs after a repeat {k.ratio:.3f} "
            f"(95 % CI {ci}, {rounds})"
        )
    b = c.between
    if b is None or b.ratio is None or not (c.detected or c.differs):
        return head if not c.detected else f"{head}; {ADVICE.get(c.of, ADVICE['runs'])}"
    between = f"{(b.ratio - 1) * 100:+.1f} %, 95 % CI {_ci_pct(b)}"
    if c.differs:
        return f"{head}; the two variants' gains differ ({between}): the comparison may carry it"
    return (
        f"{head}; no difference between the two variants' gains detected ({between}): a "
        "gain both share cancels in the balanced order"
    )


ADVICE = {
    "runs": "compare with A B B A or a longer warm-up",
    # interleaved: the Thue-Morse order gives each variant as many switched slices
    "slices": "the Thue-Morse order gives both variants as many switched slices, so it "
    "cancels in the comparison only if both gain or lose alike",
}


def _ci_pct(k: stats.Comparison) -> str:
    if k.ci95_low is None or k.ci95_high is None:
        return "none"
    return f"{(k.ci95_low - 1) * 100:+.1f} % to {(k.ci95_high - 1) * 100:+.1f} %"

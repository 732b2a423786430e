"""bench_precision.py's table (pure): one design's row from the values its rounds collected.

An arm's row: its rounds, runs and minutes, the 4k-vs-8k tps comparison as the design
prescribes (blocklab.analysis.designs.analyse), the 95 % CI half-width and that half-width
scaled to 20 minutes of its own measuring, blocklab.analysis.precision's expected
half-width for the rounds that fit in 20 minutes, the per-round noise, and:

- the verdict at the experiment's equivalence margin (the demo's ±3 %): faster, slower,
  equal within ±X % (two one-sided tests at 5 %), or undecided; the interleaved arm's
  comparison fits the storage slot beside the effect, as its summary does (`nuisance`).
- A/A: aa-control's reference copy 1 / copy 0 with its 95 % CI (both copies take every
  position equally often, so its true ratio is 1); for the interleaved arm the slot A/A,
  storage slot 1 / slot 0 over both variants (bench/interleave.py). The other
  designs have no second reference copy that could give one: abba's two copies are not
  an A/A, since copy 0 always runs in the round's first half and copy 1 in its mirror,
  so their ratio is the drift within a round, not 1
  (blocklab.execution.orders.round_slots). '–' for them.
- carry-over: runs right after a switch of variant / runs right after a repeat, with a
  level and a drift slope per round, with its 95 % CI (blocklab.analysis.carryover); for
  the interleaved arm its slices after a switch / after a repeat, per round. '–' where no
  variant ever follows itself (paired, short-runs).
- non-stationary: the share of the arm's successful runs with a judged per-second series
  (tps, WAL bytes/s, full-page images/s) that drifted inside the measured window
  (blocklab.analysis.stationarity). Whole checkpoint cycles are not judged: the storm of
  full-page images and its decay inside the window is what they measure on purpose
  (blocklab.analysis.experiment_spec.measures_whole_cycles). '–' for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from blocklab.analysis import carryover, precision, stationarity
from blocklab.analysis import designs as analysis_designs
from blocklab.analysis.carryover import CarryOver, PositionRun
from blocklab.analysis.stats import EQUAL, EQUIVALENCE_PCT, Comparison

TWENTY_MIN_S = 20 * 60
DASH = "–"

Values = Mapping[str, Mapping[int, Sequence[float]]]  # variant -> round -> values by copy
Series = Mapping[str, Sequence[tuple[float, float | None]]]  # a run's per-second series


@dataclass(frozen=True)
class ArmRuns:
    """What one arm collected while the rounds ran."""

    name: str  # the arm's name in the table ("abba-cycles")
    design: str  # its design (blocklab.experiment_file.design.DESIGNS)
    reference: str  # the reference variant's id
    values: Values  # complete rounds only (every copy of the variant)
    seconds: float  # wall clock spent measuring
    rounds: int  # rounds started
    positions: Sequence[PositionRun]  # every run, failed ones with value None
    drifted: Sequence[bool | None]  # per successful run: drifted? (None: nothing testable)
    whole_cycles: bool = False  # windows of whole checkpoint cycles: not judged for drift
    runs: int | None = None  # executions of the workload, when not one per value (slices)
    # the interleaved arm's own analysis (bench/interleave.py): round -> the -1/+1 storage
    # slot fitted beside the effect, its slot A/A and its slices' carry-over
    nuisance: Mapping[int, float] | None = None
    aa: Comparison | None = None
    carry: CarryOver | None = None


def arm_runs(arm: object, **given: Any) -> ArmRuns:
    """An arm's ArmRuns: each field from the arm's attribute of the same name (an absent
    one keeps its default), `given` first."""
    found = {f.name: getattr(arm, f.name) for f in fields(ArmRuns) if hasattr(arm, f.name)}
    return ArmRuns(**(found | given))


@dataclass(frozen=True)
class Row:
    name: str
    rounds: int  # rounds in the comparison
    runs: int
    minutes: float
    gain_pct: float | None
    verdict: str  # at the equivalence margin
    equivalence_pct: float  # X of "equal within ±X %"
    half_width_pct: float | None
    at_20_min_pct: float | None
    model_20_min_pct: float | None
    noise_pct: float | None
    aa: Comparison | None
    carry: CarryOver
    flagged: tuple[int, int] | None  # (drifted, judged); None: not judged (whole cycles)


def arm_row(arm: ArmRuns, equivalence_pct: float = EQUIVALENCE_PCT) -> Row:
    """The table's row of one arm; its verdict at `equivalence_pct` (X of "equal within
    ±X %")."""
    result = analysis_designs.analyse(
        arm.design,
        arm.values,
        reference=arm.reference,
        equivalence_pct=equivalence_pct,
        nuisance=arm.nuisance,  # interleaved: the storage slot fitted beside the effect
    )
    (c,) = result.comparisons.values()
    width = c.ci_half_width_pct
    at20 = None if width is None else width * math.sqrt(arm.seconds / TWENTY_MIN_S)
    ratios = [_log_ratios(arm.values, arm.reference, v) for v in arm.values if v != arm.reference]
    noise = precision.noise_from_rounds(ratios)
    return Row(
        name=arm.name,
        rounds=c.n_pairs,
        runs=arm.runs
        if arm.runs is not None
        else sum(len(xs) for rounds in arm.values.values() for xs in rounds.values()),
        minutes=arm.seconds / 60,
        gain_pct=c.gain_pct,
        verdict=c.verdict,
        equivalence_pct=equivalence_pct,
        half_width_pct=width,
        at_20_min_pct=at20,
        model_20_min_pct=None if noise is None else _model_at_20_min(noise.sigma_log, arm),
        noise_pct=None if noise is None else noise.sigma_pct,
        aa=arm.aa if arm.aa is not None else result.aa,
        carry=arm.carry if arm.carry is not None else carryover.estimate(arm.positions),
        flagged=None if arm.whole_cycles else flagged(arm.drifted),
    )


def run_drifted(series: Series) -> bool | None:
    """Did any judged series of one run drift inside its window? None: none could be tested."""
    trends = stationarity.run_trends(series)
    if not trends:
        return None
    return any(tr.drifted for tr in trends.values())


def flagged(drifted: Iterable[bool | None]) -> tuple[int, int]:
    """(runs that drifted, runs judged)."""
    judged = [d for d in drifted if d is not None]
    return sum(judged), len(judged)


def _model_at_20_min(sigma_log: float, arm: ArmRuns) -> float | None:
    if not arm.rounds or arm.seconds <= 0:
        return None
    rounds = int(TWENTY_MIN_S // (arm.seconds / arm.rounds))
    if rounds < precision.MIN_ROUNDS:
        return None
    return precision.expected_ci_half_width_pct(sigma_log, rounds)


def _log_ratios(values: Values, reference: str, vid: str) -> list[float]:
    geo = {
        v: {r: math.exp(sum(map(math.log, xs)) / len(xs)) for r, xs in rounds.items()}
        for v, rounds in values.items()
    }
    return precision.log_ratios(geo[reference], geo[vid])


# -- text -----------------------------------------------------------------------------------

HEADER = (
    f"{'design':12} {'rounds':>6} {'runs':>5} {'min':>5}  {'4k vs 8k tps':>14}  "
    f"{'verdict':>18}  {'CI +-%':>7}  {'at 20 min':>9}  {'model 20':>8}  {'noise %':>7}  "
    f"{'A/A ratio (95 % CI)':>26}  {'carry-over (95 % CI)':>26}  {'non-stationary':>14}"
)

FOOTNOTE = (
    "'at 20 min' scales each design's half-width to 20 minutes of its own measuring "
    "(x sqrt(min / 20));\n"
    "'model 20' is blocklab.analysis.precision's expected half-width for the rounds of this "
    "design that fit in 20 min, at the noise it showed;\n"
    "noise % is the stdev of its per-round log ratios;\n"
    "verdict: at the demo's equivalence margin (equal: the 90 % CI inside ±X %); the "
    "interleaved arm fits the storage slot beside the effect (n - 2 df), as its summary does;\n"
    "A/A: aa-control's reference copy 1 / copy 0, paired by round (its CI should contain 1); "
    "interleaved: storage slot 1 / slot 0 over both variants (the slots swap every two "
    "rounds); "
    "'–' elsewhere: no second reference copy (abba's copy 1 always runs after its copy 0, so "
    "their ratio is the drift within a round, not an A/A);\n"
    "carry-over: runs right after a switch of variant / runs right after a repeat, with a "
    "level and a drift slope per round (blocklab.analysis.carryover); interleaved: its "
    "slices after a switch / after a repeat, per round; '–' where no variant follows itself;\n"
    "non-stationary: runs with a judged series (tps, WAL bytes/s, full-page images/s) that "
    "drifted inside the window / runs judged; '–' for whole checkpoint cycles (not judged), "
    "n/a for interleaved slices (no per-second series)."
)


def format_row(row: Row) -> str:
    carry = _ci_text(row.carry.comparison) if row.carry.comparison is not None else DASH
    return (
        f"{row.name:12} {row.rounds:>6} {row.runs:>5} {row.minutes:>5.1f}  "
        f"{_pct(row.gain_pct):>14}  {_verdict(row.verdict, row.equivalence_pct):>18}  "
        f"{_num(row.half_width_pct):>7}  "
        f"{_num(row.at_20_min_pct):>9}  {_num(row.model_20_min_pct):>8}  "
        f"{_num(row.noise_pct):>7}  {_ratio_text(row.aa):>26}  {carry:>26}  "
        f"{_share(row.flagged):>14}"
    )


def table(rows: Iterable[Row]) -> str:
    return "\n".join([HEADER, *(format_row(r) for r in rows), "", FOOTNOTE])


def _ratio_text(c: Comparison | None) -> str:
    return DASH if c is None else _ci_text(c)


def _ci_text(c: Comparison) -> str:
    if c.ratio is None or c.ci95_low is None or c.ci95_high is None:
        return "n/a"
    return f"{c.ratio:.3f} ({c.ci95_low:.3f} .. {c.ci95_high:.3f})"


def _share(f: tuple[int, int] | None) -> str:
    if f is None:
        return DASH
    n_drifted, n_judged = f
    if not n_judged:
        return "n/a"
    return f"{n_drifted}/{n_judged} ({100 * n_drifted / n_judged:.0f} %)"


def _verdict(verdict: str, equivalence_pct: float) -> str:
    if verdict == EQUAL:
        return f"equal ±{equivalence_pct:g} %"
    return verdict or "n/a"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f} %"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"

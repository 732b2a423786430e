"""Per design, interleaved on the demo: CI half-width per minute, A/A, carry-over, drift.

The demo (blocklab.experiment_file.demo: PG 18, 4 kB vs 8 kB data pages, 8 kB WAL blocks,
pgbench simple-update -M prepared, checkpoint_timeout 30 s) runs under each design of
blocklab.execution.designs with a fixed measured window (--duration s after the run's
CHECKPOINT): paired (one run per variant per round), short-runs (runs half as long, twice
the rounds), abba (A B B A) and aa-control (the 8 kB reference twice per round);
abba-cycles (A B B A, each run measuring whole checkpoint cycles, [design] checkpoint =
"cycles", blocklab.execution.cycles); and interleaved, the demo's own design
(bench/interleave.py: blocklab's interleaved round, both variants' servers up at once on
two storage slots swapped every two rounds, --slices pgbench slices of --slice-s s per
variant in the Thue-Morse order A B B A B A A B, checkpoint "aligned"; the round's
restores, starts and stops count in the arm's time; analysed with the storage slot fitted
beside the effect, the slot A/A and the slices' carry-over, as the summary does).

The arms share one Lab (builds, datasets, servers) and take turns round by round: the
next round always goes to the arm that has measured least so far, so each gets the same
wall-clock share of the same machine state. Each arm's tps comparison is analysed as its
design prescribes (blocklab.analysis.designs.analyse; interleaved as above). Per arm the
table (bench/precision_table.py) gives:

- the 95 % CI half-width reached, and the half-width 20 minutes would give, scaled by
  sqrt(minutes / 20) (the half-width falls as 1 / sqrt(rounds)), so arms compare per minute;
- the verdict at the demo's margin: faster, slower, equal within ±3 % or undecided;
- the A/A ratio with its 95 % CI: aa-control's reference copy 1 / copy 0; interleaved:
  storage slot 1 / slot 0 over both variants; '–' for the others (abba's two reference
  copies are not an A/A: copy 1 always runs in the round's second half, so their ratio is
  the drift within a round);
- the carry-over ratio with its 95 % CI: runs right after a switch of variant / runs right
  after a repeat, with a level and a drift slope per round (blocklab.analysis.carryover, from
  each run's position in its round; interleaved: its slices after a switch / after a
  repeat); '–' where no variant follows itself (paired, short-runs);
- the share of runs flagged non-stationary: a judged per-second series (tps, WAL bytes/s,
  full-page images/s) drifted inside the measured window (blocklab.analysis.stationarity);
  '–' for whole checkpoint cycles, which are not judged for drift (their storm and decay
  are what they measure: blocklab.analysis.experiment_spec.measures_whole_cycles); n/a for the
  interleaved slices (no per-second series).

    .venv/bin/python bench/bench_precision.py [--budget-min 20] [--duration 20] [--scale 10]
        [--arms interleaved,abba] [--slice-s 5] [--slices 4] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from interleave import InterleavedArm
from interleave import run_round as run_interleaved_round
from precision_table import ArmRuns, arm_row, arm_runs, run_drifted, table
from scratch_home import scratch_home

from blocklab.analysis.carryover import PositionRun
from blocklab.analysis.stats import EQUIVALENCE_PCT
from blocklab.execution import orders
from blocklab.execution.controls import RunControls
from blocklab.execution.lab import Lab
from blocklab.experiment_file import demo
from blocklab.experiment_file import design as designs
from blocklab.experiment_file.design import ABBA, INTERLEAVED, SHORT_RUNS
from blocklab.model import BuildRequest, Variant

CYCLES_ARM = "abba-cycles"


@dataclass
class Arm:
    """One arm's share of the run: its rounds, its time, what its runs gave."""

    name: str
    design: str
    variants: dict[str, Variant]  # variant_id -> the variant this arm runs
    reference: str
    controls: RunControls
    whole_cycles: bool = False
    seconds: float = 0.0
    rounds: int = 0
    failed: int = 0
    values: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    positions: list[PositionRun] = field(default_factory=list)  # every run, in round order
    drifted: list[bool | None] = field(default_factory=list)  # per successful run

    def collected(self) -> ArmRuns:
        return arm_runs(self)


# the designs whose arm is a series of whole runs (interleaved has an arm of its own)
RUN_DESIGNS = tuple(d for d in designs.DESIGNS if d != INTERLEAVED)
ARM_NAMES = (*RUN_DESIGNS, CYCLES_ARM, INTERLEAVED)


def make_arms(
    duration_s: int, scale: int, slice_s: int, slices: int, seed: int
) -> list[Arm | InterleavedArm]:
    """The fixed-window arms (one per design, --duration s), abba-cycles and the demo's own
    interleaved round (bench/interleave.py: --slices slices of --slice-s s per variant,
    the demo's checkpoint "aligned", the storage slots swapped every two rounds)."""
    exp = demo(scale=scale)
    variants = exp.variants()
    ref_build = exp.variant(exp.reference_for(variants[0])).build
    arms: list[Arm | InterleavedArm] = []
    for design in RUN_DESIGNS:
        short_s = designs.short_runs_plan(duration_s, 1)[0] if design == SHORT_RUNS else None
        seconds = duration_s if short_s is None else max(1, round(short_s))
        vs = [_with_duration(v, seconds) for v in variants]
        arms.append(_arm(design, design, vs, ref_build, RunControls()))
    cycles = RunControls.from_design(exp.run_design)
    arms.append(_arm(CYCLES_ARM, ABBA, list(variants), ref_build, cycles, whole_cycles=True))
    by_id = {v.variant_id: v for v in variants}
    ref_id = next(v.variant_id for v in variants if v.build == ref_build)
    design = exp.run_design.model_copy(update={"slice_s": slice_s, "slices": slices})
    arms.append(InterleavedArm(INTERLEAVED, by_id, ref_id, design, seed))
    return arms


def chosen(arms: list[Arm | InterleavedArm], names: str) -> list[Arm | InterleavedArm]:
    """The arms --arms names (comma-separated), in the table's order; '' for all."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = sorted(set(wanted) - set(ARM_NAMES))
    if unknown:
        raise SystemExit(f"--arms: unknown {', '.join(unknown)}; allowed: {', '.join(ARM_NAMES)}")
    return [a for a in arms if not wanted or a.name in wanted]


def _arm(
    name: str,
    design: str,
    vs: list[Variant],
    ref_build: BuildRequest,
    controls: RunControls,
    *,
    whole_cycles: bool = False,
) -> Arm:
    by_id = {v.variant_id: v for v in vs}
    ref_id = next(v.variant_id for v in vs if v.build == ref_build)
    values: dict[str, dict[int, list[float]]] = {vid: {} for vid in by_id}
    return Arm(name, design, by_id, ref_id, controls, whole_cycles, values=values)


def _with_duration(v: Variant, duration_s: int) -> Variant:
    if v.workload.duration_s == duration_s:
        return v
    workload = v.workload.model_copy(update={"duration_s": duration_s})
    return v.model_copy(update={"workload": workload, "label": f"{v.label} {duration_s}s"})


def run_round(lab: Lab, arm: Arm, seed: int, raw: Path) -> None:
    arm.rounds += 1
    r = arm.rounds
    slots = orders.round_slots(
        arm.design, list(arm.variants), reference=arm.reference, seed=seed, round_no=r
    )
    got: dict[tuple[str, int], float] = {}
    lab.controls = arm.controls
    t0 = time.monotonic()
    for position, slot in enumerate(slots):
        v = arm.variants[slot.variant_id]
        rec = lab.run(
            v,
            experiment=f"bench-precision-{arm.name}",
            round_no=r,
            position=position,
            raw_dir=raw / arm.name / f"r{r:03d}-{position}-{slot.variant_id}",
        )
        ok = rec.status == "ok" and rec.tps is not None
        arm.positions.append(PositionRun(r, position, slot.variant_id, rec.tps if ok else None))
        if not ok or rec.tps is None:
            arm.failed += 1
            print(f"  {arm.name} r{r} {v.label}: FAILED {rec.reason[:200]}", flush=True)
            continue
        got[(slot.variant_id, slot.copy)] = rec.tps
        arm.drifted.append(run_drifted(rec.series))
        print(f"  {arm.name} r{r} #{position} {v.label} copy {slot.copy}: {rec.tps:.0f} tps")
    arm.seconds += time.monotonic() - t0
    for vid in arm.variants:
        copies = [got[(vid, c)] for c in (0, 1) if (vid, c) in got]
        if copies and all((vid, c) in got for c in range(len(copies))):
            arm.values[vid][r] = copies


def report(arms: list[Arm | InterleavedArm], equivalence_pct: float) -> None:
    print()
    print(table(arm_row(arm.collected(), equivalence_pct) for arm in arms))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-min", type=float, default=20.0, help="wall clock for all arms")
    ap.add_argument(
        "--duration",
        type=int,
        default=20,
        help="seconds per fixed-window run (short-runs: half; abba-cycles: whole cycles)",
    )
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arms", default="", help=f"comma-separated subset of {','.join(ARM_NAMES)}")
    ap.add_argument("--slice-s", type=int, default=5, help="interleaved: seconds per slice")
    ap.add_argument(
        "--slices", type=int, default=4, help="interleaved: slices per variant per round"
    )
    args = ap.parse_args()
    arms = chosen(
        make_arms(args.duration, args.scale, args.slice_s, args.slices, args.seed), args.arms
    )
    rng = random.Random(args.seed)
    references = {vid: arm.variants[arm.reference] for arm in arms for vid in arm.variants}
    with scratch_home("bench-precision-") as (paths, state):
        print(f"home {paths.home}; budget {args.budget_min:g} min, {len(arms)} arms", flush=True)
        log = lambda m: print(f"  {m}", flush=True)  # noqa: E731
        with Lab(paths, state, log=log, references=references) as lab:
            for arm in arms:
                for v in arm.variants.values():
                    lab.prepare(v)  # builds and datasets first: not part of any budget
            deadline = time.monotonic() + args.budget_min * 60
            while time.monotonic() < deadline:
                least = min(a.seconds for a in arms)
                arm = rng.choice([a for a in arms if a.seconds == least])
                if isinstance(arm, InterleavedArm):
                    run_interleaved_round(lab, arm, paths.home / "runs")
                else:
                    run_round(lab, arm, args.seed, paths.home / "runs")
        report(arms, demo(scale=args.scale).equivalence_pct or EQUIVALENCE_PCT)


if __name__ == "__main__":
    main()

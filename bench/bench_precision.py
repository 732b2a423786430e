"""CI half-width per minute of each design, on the demo's comparison, interleaved.

The demo (blocklab.experiment_file.demo: PG 18, 4 kB vs 8 kB data pages, 8 kB WAL blocks, pgbench
simple-update -M prepared) runs under each design of blocklab.execution.designs: paired (one run
per variant per round), short-runs (runs half as long, twice the rounds), abba (A B B A)
and aa-control (the 8 kB reference twice per round). The designs share one Lab (builds,
datasets, servers) and take turns round by round: the next round always goes to the
design that has measured least so far, so each gets the same wall-clock share of the
same machine state. Each design's tps comparison is analysed as the design prescribes
(blocklab.analysis.designs.analyse); the table gives the 95 % CI half-width reached, and the
half-width that 20 minutes would give, scaled by sqrt(minutes / 20) (the half-width
falls as 1 / sqrt(rounds)), so designs can be compared per minute.

    .venv/bin/python bench/bench_precision.py [--budget-min 20] [--duration 20] [--scale 10]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from scratch_home import scratch_home

from blocklab.analysis import designs as analysis_designs
from blocklab.analysis import precision
from blocklab.analysis.stats import Comparison
from blocklab.execution import orders
from blocklab.execution.lab import Lab
from blocklab.experiment_file import demo
from blocklab.experiment_file import design as designs
from blocklab.experiment_file.design import SHORT_RUNS
from blocklab.model import Variant

TWENTY_MIN_S = 20 * 60


@dataclass
class Arm:
    """One design's share of the run: its rounds, its time, its values."""

    design: str
    variants: dict[str, Variant]  # variant_id -> the variant this design runs
    reference: str
    seconds: float = 0.0
    rounds: int = 0
    failed: int = 0
    values: dict[str, dict[int, list[float]]] = field(default_factory=dict)


def make_arms(duration_s: int, scale: int) -> list[Arm]:
    exp = demo(duration_s=duration_s, scale=scale)
    variants = exp.variants()
    ref = exp.reference_for(variants[0])
    arms = []
    for design in designs.DESIGNS:
        if design == SHORT_RUNS:
            short_s, _ = designs.short_runs_plan(duration_s, 1)
            vs = [_with_duration(v, max(1, round(short_s))) for v in variants]
        else:
            vs = list(variants)
        by_id = {v.variant_id: v for v in vs}
        ref_id = next(v.variant_id for v in vs if v.build == exp.variant(ref).build)
        arms.append(Arm(design, by_id, ref_id, values={vid: {} for vid in by_id}))
    return arms


def _with_duration(v: Variant, duration_s: int) -> Variant:
    workload = v.workload.model_copy(update={"duration_s": duration_s})
    return v.model_copy(update={"workload": workload, "label": f"{v.label} {duration_s}s"})


def run_round(lab: Lab, arm: Arm, seed: int, raw: Path) -> None:
    arm.rounds += 1
    r = arm.rounds
    slots = orders.round_slots(
        arm.design, list(arm.variants), reference=arm.reference, seed=seed, round_no=r
    )
    got: dict[tuple[str, int], float] = {}
    t0 = time.monotonic()
    for position, slot in enumerate(slots):
        v = arm.variants[slot.variant_id]
        rec = lab.run(
            v,
            experiment=f"bench-precision-{arm.design}",
            round_no=r,
            position=position,
            raw_dir=raw / arm.design / f"r{r:03d}-{position}-{slot.variant_id}",
        )
        if rec.status != "ok" or rec.tps is None:
            arm.failed += 1
            print(f"  {arm.design} r{r} {v.label}: FAILED {rec.reason[:200]}", flush=True)
            continue
        got[(slot.variant_id, slot.copy)] = rec.tps
        print(f"  {arm.design} r{r} #{position} {v.label} copy {slot.copy}: {rec.tps:.0f} tps")
    arm.seconds += time.monotonic() - t0
    for vid in arm.variants:
        copies = [got[(vid, c)] for c in (0, 1) if (vid, c) in got]
        if copies and all((vid, c) in got for c in range(len(copies))):
            arm.values[vid][r] = copies


def report(arms: list[Arm]) -> None:
    print(
        f"\n{'design':12} {'rounds':>6} {'runs':>5} {'min':>5}  {'4k vs 8k tps':>14}  "
        f"{'CI +-%':>7}  {'at 20 min':>9}  {'model 20':>8}  {'noise %':>7}  "
        f"{'A/A (95 % CI)':>22}"
    )
    for arm in arms:
        result = analysis_designs.analyse(arm.design, arm.values, reference=arm.reference)
        (c,) = result.comparisons.values()
        minutes = arm.seconds / 60
        width = c.ci_half_width_pct
        at20 = None if width is None else width * math.sqrt(arm.seconds / TWENTY_MIN_S)
        ratios = [_log_ratios(arm, vid) for vid in arm.variants if vid != arm.reference]
        noise = precision.noise_from_rounds(ratios)
        runs = sum(len(xs) for rounds in arm.values.values() for xs in rounds.values())
        aa = "" if result.aa is None else _ci_text(result.aa)
        sigma_pct = None if noise is None else noise.sigma_pct
        model20 = None if noise is None else _model_at_20_min(noise.sigma_log, arm)
        print(
            f"{arm.design:12} {c.n_pairs:>6} {runs:>5} {minutes:>5.1f}  {_pct(c.gain_pct):>14}  "
            f"{_num(width):>7}  {_num(at20):>9}  {_num(model20):>8}  {_num(sigma_pct):>7}  "
            f"{aa:>22}"
        )
    print(
        "\n'at 20 min' scales each design's half-width to 20 minutes of its own measuring "
        "(x sqrt(min / 20));\n'model 20' is blocklab.analysis.precision's expected half-width for "
        "the "
        "rounds of this design that fit in 20 min, at the noise it showed;\nnoise % is the "
        "stdev of its per-round log ratios; the A/A CI should contain 1."
    )


def _model_at_20_min(sigma_log: float, arm: Arm) -> float | None:
    if not arm.rounds:
        return None
    rounds = int(TWENTY_MIN_S // (arm.seconds / arm.rounds))
    if rounds < precision.MIN_ROUNDS:
        return None
    return precision.expected_ci_half_width_pct(sigma_log, rounds)


def _log_ratios(arm: Arm, vid: str) -> list[float]:
    geo = {
        v: {r: math.exp(sum(map(math.log, xs)) / len(xs)) for r, xs in rounds.items()}
        for v, rounds in arm.values.items()
    }
    return precision.log_ratios(geo[arm.reference], geo[vid])


def _ci_text(c: Comparison) -> str:
    if c.ci95_low is None or c.ci95_high is None:
        return "n/a"
    return f"{c.ci95_low:.3f} .. {c.ci95_high:.3f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f} %"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-min", type=float, default=20.0, help="wall clock for all designs")
    ap.add_argument("--duration", type=int, default=20, help="seconds per run (short-runs: half)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    arms = make_arms(args.duration, args.scale)
    rng = random.Random(args.seed)
    references = {vid: arm.variants[arm.reference] for arm in arms for vid in arm.variants}
    with scratch_home("bench-precision-") as (paths, state):
        print(f"home {paths.home}; budget {args.budget_min:g} min, {len(arms)} designs", flush=True)
        log = lambda m: print(f"  {m}", flush=True)  # noqa: E731
        with Lab(paths, state, log=log, references=references) as lab:
            for arm in arms:
                for v in arm.variants.values():
                    lab.prepare(v)  # builds and datasets first: not part of any budget
            deadline = time.monotonic() + args.budget_min * 60
            while time.monotonic() < deadline:
                least = min(a.seconds for a in arms)
                arm = rng.choice([a for a in arms if a.seconds == least])
                run_round(lab, arm, args.seed, paths.home / "runs")
        report(arms)


if __name__ == "__main__":
    main()

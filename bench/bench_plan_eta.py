"""`blocklab plan`'s time per run against what the runs took (plan.per_run_fixed_s).

    nice -n 0 .venv/bin/python bench/bench_plan_eta.py [FILE] [--rounds 2] [--duration 10]
        [--scale 10]

Runs `blocklab run FILE` (examples/fillfactor.toml by default: a sequential design) with
the overrides in a throwaway home that shares the build cache, then reads the stored runs:
each run's time is from its start to the next run's start (the last run has none), which
holds everything a run costs besides its workload: restore, start, the prepare checkpoint,
probes, stop, the footprint step, storing. Its fixed cost is that time minus the warm-up
it ran (its own warmup_s phase: a steady warm-up may run longer than the file's) and
the measured window (its workload_s phase). It prints the median per-run fixed cost and
each phase's median against plan's per_run_fixed_s, and plan's seconds per round
against the rounds' own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from scratch_home import blocklab_argv, scratch_home

from blocklab.execution import plan
from blocklab.experiment_file import loader
from blocklab.store.sqlite import ResultsDB

PHASES = (
    "restore_s", "restore_sync_s", "prepare_data_s", "server_start_s", "prepare_checkpoint_s",
    "warmup_s", "workload_s", "plan_pass_s", "server_stop_s", "footprint_s",
)  # fmt: skip


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", default="examples/fillfactor.toml")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--scale", type=int, default=10)
    args = ap.parse_args()
    overrides = {"duration": args.duration, "scale": args.scale}
    exp = loader.load(Path(args.file), overrides)
    planned = plan.describe(exp)  # seconds per round do not depend on the rounds
    flags = [f"--{k}={v}" for k, v in overrides.items()] + [f"--rounds={args.rounds}"]
    with scratch_home("bench-plan-eta-") as (paths, _state):
        env = {**os.environ, "BLOCKLAB_HOME": str(paths.home), "BLOCKLAB_CACHE": str(paths.cache)}
        argv = blocklab_argv("run", args.file, *flags)
        t0 = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall_s = time.monotonic() - t0
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            return 1
        with ResultsDB(paths.results, create=False) as db:
            runs = sorted(db.runs(exp.name), key=lambda r: r["started_at"])
            phases = [db.metrics(r["id"]) for r in runs]
    report(args.rounds, planned, runs, phases, wall_s)
    return 0


def report(rounds: int, planned: plan.Plan, runs: list, phases: list, wall_s: float) -> None:  # type: ignore[type-arg]
    starts = [_epoch(r["started_at"]) for r in runs]
    v0 = planned.variants[0]
    fixed = []
    for i in range(len(runs) - 1):
        took = starts[i + 1] - starts[i]
        measured = (phases[i].get("warmup_s") or 0.0) + (phases[i].get("workload_s") or 0.0)
        fixed.append(took - measured)
    print(f"{len(runs)} runs in {rounds} rounds; `blocklab run` took {wall_s:.1f} s in all")
    print(
        f"fixed cost per run (start to next start, minus its warm-up and window), "
        f"median of {len(fixed)}: {statistics.median(fixed):.2f} s "
        f"(min {min(fixed):.2f}, max {max(fixed):.2f}); "
        f"plan counts {plan.per_run_fixed_s(v0):.2f} s: ratio "
        f"{statistics.median(fixed) / plan.per_run_fixed_s(v0):.2f}"
    )
    print(
        "phases, median s:",
        ", ".join(
            f"{p} {statistics.median(v):.2f}"
            for p in PHASES
            if (v := [x for ph in phases if (x := ph.get(p)) is not None])
        ),
    )
    span = _epoch(runs[-1]["ended_at"]) - starts[0]
    print(
        f"rounds: plan {planned.seconds_per_round:.1f} s each, measured {span / rounds:.1f} s "
        f"(first start to last end / rounds; the last run's storing not counted)"
    )


if __name__ == "__main__":
    sys.exit(main())

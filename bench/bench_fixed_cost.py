"""A run's fixed cost against the dataset's initialisation (issue 33, goal 0.10 x or less).

    nice -n 19 .venv/bin/python bench/bench_fixed_cost.py [--scale 100] [--runs 9]
        [--workload simple-update|select-only|tpcb-like] [--duration 2] [--storage dir]
        [--arms both|delta|full]

PostgreSQL 18 at 8 kB pages (the cached build), pgbench's dataset at --scale made once in
a throwaway home (its init time printed: initdb, start, pgbench -i, stop), then --runs
measured runs through blocklab.execution.lab.Lab.run, the product's own path: restore,
start, the prepare CHECKPOINT, --duration seconds of --workload, stop. Each run's fixed
phases are the runner's own timings (the record's restore_s, restore_sync_s,
server_start_s, prepare_checkpoint_s, server_stop_s); the restore's mode and bytes copied
come from its provenance when it records them. The first run restores over the loaded
cluster, not over an earlier restore: it is printed, and left out of the medians.
--arms both (the default): the later runs restore by delta and whole in turn (a whole
copy: the previous restore forgotten first, as before issue 33), so that both arms see
the same machine load; --arms delta or full: every later run restores so.

It prints each phase's median per arm and the ratio of the arm's fixed cost (median of
the per-run sums) to the dataset's initialisation.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from scratch_home import scratch_home

from blocklab.execution.lab import Lab
from blocklab.model import BuildRequest, DatasetRequest, StorageRequest, Variant, WorkloadRequest
from blocklab.workloads import dataset

GOAL = 0.10
PHASES = ("restore_s", "restore_sync_s", "server_start_s", "prepare_checkpoint_s", "server_stop_s")
BUILD = BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8)


def variant(args: argparse.Namespace) -> Variant:
    return Variant(
        build=BUILD,
        storage=StorageRequest(kind=args.storage),
        dataset=DatasetRequest(scale=args.scale),
        workload=WorkloadRequest(
            builtin=args.workload, clients=2, threads=2, duration_s=args.duration
        ),
        settings=(("shared_buffers", "128MB"), ("max_wal_size", "2GB")),
        label=f"fixed-cost-{args.workload}",
    )


def restore_note(provenance: dict[str, Any]) -> str:
    """The restore's own account (mode, files and bytes copied) when it gives one."""
    r = provenance.get("restore")
    if not isinstance(r, dict):
        return ""
    return (
        f"  {r.get('mode', '?')}: {r.get('files_copied', '?')} files differed, "
        f"{int(r.get('bytes_copied', 0)) / 1e6:.0f} MB; "
        f"{int(r.get('bytes_written', 0)) / 1e6:.1f} MB written"
    )


def arm_of(i: int, arms: str) -> str:
    """Run 1 restores over the loaded cluster ("first"); then `arms`, or delta and full
    in turn for "both" (each delta restore then undoes one run after a whole copy)."""
    if i == 1:
        return "first"
    return arms if arms != "both" else ("delta" if i % 2 == 0 else "full")


def run_phases(lab: Lab, v: Variant, args: argparse.Namespace, raw: Path) -> list[dict[str, Any]]:
    rows = []
    for i in range(1, args.runs + 1):
        arm = arm_of(i, args.arms)
        if arm == "full":
            dataset.forget_restore(lab.prepare(v).cluster.data_dir)
        rec = lab.run(
            v, experiment="bench-fixed-cost", round_no=i, position=0, raw_dir=raw / str(i)
        )
        if rec.status != "ok":
            raise SystemExit(f"run {i} failed: {rec.reason[:500]}")
        row: dict[str, Any] = {p: float(rec.metrics[p]) for p in PHASES}
        row["fixed_s"] = sum(row[p] for p in PHASES)
        row["arm"] = arm
        rows.append(row)
        cells = "  ".join(f"{p[:-2]} {row[p]:.2f}" for p in PHASES)
        print(
            f"  run {i} ({arm}): fixed {row['fixed_s']:.2f} s ({cells})"
            f"{restore_note(rec.provenance)}",
            flush=True,
        )
    return rows


def report(rows: list[dict[str, Any]], init_s: float) -> None:
    arms = [a for a in ("delta", "full") if any(r["arm"] == a for r in rows)] or ["first"]
    print("\nmedians (s) per arm (run 1 restores over the loaded cluster: left out):")
    print(f"  {'phase':22} " + " ".join(f"{a:>8}" for a in arms))
    for p in (*PHASES, "fixed_s"):
        cells = [statistics.median(r[p] for r in rows if r["arm"] == a) for a in arms]
        print(f"  {p:22} " + " ".join(f"{c:8.3f}" for c in cells))
    for a in arms:
        fixed = statistics.median(r["fixed_s"] for r in rows if r["arm"] == a)
        ratio = fixed / init_s
        verdict = "meets" if ratio <= GOAL else "misses"
        print(
            f"{a}: fixed/init = {fixed:.2f} / {init_s:.2f} = {ratio:.3f} "
            f"({verdict} the goal {GOAL:.2f})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=100)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--workload", default="simple-update")
    ap.add_argument("--duration", type=int, default=2, help="seconds of workload per run")
    ap.add_argument("--storage", default="dir", help="dir, ext4, xfs or btrfs")
    ap.add_argument(
        "--arms", choices=("both", "delta", "full"), default="both", help="how runs restore"
    )
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    v = variant(args)
    with scratch_home("bench-fixed-cost-") as (paths, state):
        with Lab(
            paths, state, log=lambda m: print(f"  {m}", flush=True), instrumentation=None
        ) as lab:
            lab.prepare(v)
            info = next(iter(lab.datasets.values()))
            print(
                f"dataset pgbench -i -s {args.scale}: init {info.init_s:.2f} s "
                f"(pgbench -i {info.pgbench_init_s:.2f} s), snapshot {info.snapshot_s:.2f} s, "
                f"{info.size_bytes / 1e6:.0f} MB (tables {info.table_bytes / 1e6:.0f} MB, "
                f"indexes {info.index_bytes / 1e6:.0f} MB)",
                flush=True,
            )
            rows = run_phases(lab, v, args, paths.home / "runs")
    report(rows, info.init_s)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

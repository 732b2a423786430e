"""Device bytes written per transaction: 4 kB vs 8 kB pages on ext4 (4k) and xfs (4k, 16k).

Each variant (PG 18 with 4 kB pages + 4 kB WAL blocks, and 8 kB + 8 kB, times three file
systems on direct-I/O loop devices) runs once per round in a fresh seeded order
(blocklab.execution.orders.round_order), through blocklab.execution.lab.Lab: restore the
dataset, CHECKPOINT,
pgbench, device counters and pg_stat_wal around the measured window. Prints, per variant,
mean ± stdev over rounds of device bytes written per transaction, WAL bytes per
transaction and tps, then the 4k/8k ratio of the device bytes per file system.

    .venv/bin/python bench/bench_storage_bytes.py [--rounds 3] [--duration 20] [--scale 10]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from scratch_home import scratch_home

from blocklab.execution.lab import Lab
from blocklab.execution.orders import round_order
from blocklab.model import (
    BuildRequest,
    DatasetRequest,
    StorageRequest,
    Variant,
    WorkloadRequest,
)

STORAGES = {
    "ext4-4k": StorageRequest(kind="ext4", block_size=4096, mount_options=("noatime",)),
    "xfs-4k": StorageRequest(kind="xfs", block_size=4096, mount_options=("noatime",)),
    "xfs-16k": StorageRequest(kind="xfs", block_size=16384, mount_options=("noatime",)),
}
BUILDS = {
    "4k": BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=4),
    "8k": BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8),
}
METRICS = ("device_data_write_bytes_per_xact", "wal_bytes_per_xact")


def variants(args: argparse.Namespace) -> dict[str, Variant]:
    workload = WorkloadRequest(
        builtin=args.script, clients=args.clients, duration_s=args.duration, query_mode="prepared"
    )
    out = {}
    for fs, storage in STORAGES.items():
        for page, build in BUILDS.items():
            label = f"{fs} page={page}"
            out[label] = Variant(
                build=build,
                storage=storage,
                dataset=DatasetRequest(scale=args.scale),
                workload=workload,
                settings=(("shared_buffers", "128MB"), ("max_wal_size", "2GB")),
                label=label,
            )
    return out


def run_rounds(
    lab: Lab, vs: dict[str, Variant], args: argparse.Namespace, raw: Path
) -> dict[str, list[dict[str, float]]]:
    by_id = {v.variant_id: label for label, v in vs.items()}
    results: dict[str, list[dict[str, float]]] = {label: [] for label in vs}
    for round_no in range(1, args.rounds + 1):
        for position, vid in enumerate(round_order(list(by_id), args.seed, round_no)):
            label = by_id[vid]
            rec = lab.run(
                vs[label],
                experiment="bench-storage-bytes",
                round_no=round_no,
                position=position,
                raw_dir=raw / f"r{round_no}-{vid}",
            )
            if rec.status != "ok":
                print(f"  round {round_no} {label}: FAILED {rec.reason[:300]}", flush=True)
                continue
            row = {m: float(rec.metrics.get(m) or 0.0) for m in METRICS}
            row["tps"] = float(rec.tps or 0.0)
            results[label].append(row)
            print(
                f"  round {round_no} {label}: device {row[METRICS[0]]:.0f} B/xact, "
                f"WAL {row[METRICS[1]]:.0f} B/xact, {row['tps']:.0f} tps",
                flush=True,
            )
    return results


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):8.0f} ± {sd:6.0f}"


def report(results: dict[str, list[dict[str, float]]]) -> None:
    print(f"\n{'variant':22} {'n':>2}  {'device B/xact':>17}  {'WAL B/xact':>17}  {'tps':>13}")
    for label, rows in results.items():
        dev = [r[METRICS[0]] for r in rows]
        wal = [r[METRICS[1]] for r in rows]
        tps = [r["tps"] for r in rows]
        print(f"{label:22} {len(rows):>2}  {_mean_sd(dev)}  {_mean_sd(wal)}  {_mean_sd(tps)}")
    print("\ndevice bytes per transaction, 4k pages / 8k pages (ratio of means):")
    for fs in STORAGES:
        a = [r[METRICS[0]] for r in results[f"{fs} page=4k"]]
        b = [r[METRICS[0]] for r in results[f"{fs} page=8k"]]
        if a and b and statistics.mean(b) > 0:
            print(f"  {fs:8} {statistics.mean(a) / statistics.mean(b):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--script", default="tpcb-like")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with scratch_home("bench-storage-") as (paths, state):
        n = len(STORAGES) * len(BUILDS)
        print(f"home {paths.home}; {args.rounds} rounds x {n} variants", flush=True)
        with Lab(paths, state, log=lambda m: print(f"  {m}", flush=True)) as lab:
            results = run_rounds(lab, variants(args), args, paths.home / "runs")
        report(results)


if __name__ == "__main__":
    main()

"""How far code layout alone moves the demo's workload on this machine.

    .venv/bin/python bench/bench_layout.py --builds 4 --rounds 8

K layout variants of the demo's reference build (PostgreSQL 18, 8 kB pages, 8 kB WAL
blocks; `blocklab build --layout-seed N`: the backend linked in an order drawn from N,
nothing else changed) run the demo's workload (pgbench simple-update -M prepared, 4
clients, 2 threads, scale 10) as the variants of one experiment in the paired design: each
round runs every build once in a Williams order, so every build takes every position
equally often over K rounds (use a multiple of K). It is `blocklab run` itself, on a file
this script writes into a throwaway home that shares the build cache (the K builds stay
cached for the next time).

It prints each build's mean against the builds' mean, the between-build sigma (two-way
analysis of variance with rounds as blocks: blocklab.analysis.layout) and the F test of
"layout moves nothing". A page-size difference smaller than the layout range it prints is
not a page-size finding on this workload and machine (docs/PRECISION.md).

    .venv/bin/python bench/bench_layout.py --env-pad 3000 --rounds 8

The environment-size effect instead (Mytkowicz et al.): the ordinary 8 kB build, its
server started with the canonical environment and with one more variable of N bytes
(`environment_pad_bytes = [0, N]`, which moves the stack's start by N bytes), in the demo's
interleaved design (both servers up, 5 s slices, the two swapping storage slots every two
rounds). It prints the summary's verdict on envpad=N against envpad=0 and the same spread.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from scratch_home import blocklab_argv, scratch_home

from blocklab.analysis import layout
from blocklab.analysis.stored_values import round_copies
from blocklab.experiment_file.loader import DEMO
from blocklab.store.sqlite import ResultsDB

NAME = "bench-layout"


def experiment_file(builds: int, rounds: int, duration_s: int, scale: int) -> str:
    seeds = ", ".join(str(s) for s in range(1, builds + 1))
    return f"""[experiment]
name = "{NAME}"
description = "layout variants of PostgreSQL 18 at 8 kB pages: link order only"
rounds = {rounds}
reference = {{ layout_seed = 1 }}
settings_policy = "bytes"

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
layout_seed = [{seeds}]
storage = {{ kind = "dir" }}
scale = {scale}
workload = {{ builtin = "simple-update", query_mode = "prepared" }}
clients = 4
threads = 2
duration = {duration_s}
warmup = 5

[matrix.settings]
shared_buffers = "128MB"
max_wal_size = "1GB"
"""


def env_experiment_file(pad_bytes: int, rounds: int, scale: int) -> str:
    """The demo's own file (blocklab/experiment_file/demo.toml) with its page sizes
    replaced by the 8 kB build at two environment sizes."""
    text = resources.files("blocklab.experiment_file").joinpath(DEMO).read_text()
    swaps = {
        'name = "demo-page-size-interleaved"': f'name = "{NAME}-env"',
        'description = "PostgreSQL 18: 4 kB vs 8 kB data pages': (
            f'description = "PostgreSQL 18: 8 kB pages, environment +0 vs +{pad_bytes} bytes'
        ),
        "rounds = 6": f"rounds = {rounds}",
        "reference = { block_size = 8 }": "reference = { environment_pad_bytes = 0 }",
        "block_size = [4, 8]": f"block_size = 8\nenvironment_pad_bytes = [0, {pad_bytes}]",
        "scale = 10": f"scale = {scale}",
    }
    for old, new in swaps.items():
        assert text.count(old) == 1, f"demo.toml changed: {old!r}"
        text = text.replace(old, new)
    return text


def per_build_rounds(results: Path, name: str = NAME) -> dict[str, dict[int, float]]:
    db = ResultsDB(results)
    out = {}
    for v in db.variants(name):
        copies = round_copies(db, db.runs(name, v["variant_id"]), "tps")
        out[str(v["label"])] = {r: c[0] for r, c in copies.items() if 0 in c}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", type=int, default=4, help="layout variants (seeds 1..K)")
    ap.add_argument("--rounds", type=int, default=8, help="a multiple of --builds balances")
    ap.add_argument("--duration", type=int, default=20, help="seconds per run")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument(
        "--env-pad", type=int, default=0, help="bytes: the environment-size bench instead"
    )
    args = ap.parse_args()
    with scratch_home("bench-layout-") as (paths, _state):
        spec = paths.home / "layout.toml"
        if args.env_pad:
            name, text = f"{NAME}-env", env_experiment_file(args.env_pad, args.rounds, args.scale)
        else:
            name = NAME
            text = experiment_file(args.builds, args.rounds, args.duration, args.scale)
        spec.write_text(text)
        env = os.environ | {"BLOCKLAB_HOME": str(paths.home), "BLOCKLAB_CACHE": str(paths.cache)}
        subprocess.run(blocklab_argv("run", str(spec), "--quiet"), env=env, check=True)
        if args.env_pad:
            subprocess.run(blocklab_argv("summary", name), env=env, check=True)
        found = layout.spread(per_build_rounds(paths.results, name))
    if found is None:
        sys.exit("bench_layout: fewer than 2 complete rounds of 2 builds")
    for label, offset in sorted(found.build_offsets_pct.items()):
        print(f"  {label:>10}  {offset:+.2f} % against the builds' mean")
    print(layout.sentence(found))


if __name__ == "__main__":
    main()

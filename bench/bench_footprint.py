"""Seconds of blocklab.probes.footprint on a 64 MiB image, half random, half zeros
(random blocks are stored raw, zero blocks compress to a few bytes): the measured
MB/s behind footprint.COMPRESS_MB_PER_S.

    PYTHONPATH=$PWD python bench/bench_footprint.py [--mib 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from blocklab.probes import footprint

CHUNK_BYTES = 1024 * 1024


def write_image(path: Path, mib: int) -> None:
    """Alternating 1 MiB of random bytes and 1 MiB of zeros (written, not holes)."""
    with open(path, "wb") as f:
        for i in range(mib):
            f.write(os.urandom(CHUNK_BYTES) if i % 2 == 0 else bytes(CHUNK_BYTES))


def seconds(image: Path) -> float:
    t0 = time.perf_counter()
    footprint.compress_blocks(footprint.image_blocks(image))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        image = Path(d) / "image"
        write_image(image, args.mib)
        runs = [seconds(image) for _ in range(args.repeat)]
    best = min(runs)
    print(
        f"{args.mib} MiB: best {best:.2f} s of {', '.join(f'{s:.2f}' for s in runs)}"
        f" -> {args.mib * CHUNK_BYTES / best / 1e6:.0f} MB/s"
    )


if __name__ == "__main__":
    main()

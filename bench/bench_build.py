"""Cold build time and cache-hit time of `blocklab.postgres.build.ensure_build`.

Cold: a fresh temporary cache (source indexes, source download, extract, configure, make,
install, contrib, verification). Cache hit: the same request again, on the warm cache.

    .venv/bin/python bench/bench_build.py [--block-size 4] [--wal-block-size 4] [--hits 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from blocklab import proc
from blocklab.model import BuildRequest
from blocklab.paths import Paths, ensure_dir
from blocklab.postgres.build import ensure_build

HIT_CODE = """
import sys, time
from blocklab import proc
from blocklab.postgres.build import ensure_build
from blocklab.model import BuildRequest
from blocklab.paths import Paths
req = BuildRequest.model_validate_json(sys.argv[1])
paths = Paths(home=Path(sys.argv[2]), cache=Path(sys.argv[3]), results=Path(sys.argv[2]))
t = time.monotonic()
ensure_build(req, paths, log=print)
print(time.monotonic() - t)
"""


def _hit_in_new_process(req: BuildRequest, paths: Paths) -> float:
    """The first ensure_build of a fresh process (compiler probe, index look-up)."""
    code = "from pathlib import Path\n" + HIT_CODE
    argv = [sys.executable, "-c", code, req.model_dump_json(), str(paths.home), str(paths.cache)]
    out = proc.run(argv, timeout_s=300).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg", default="18")
    ap.add_argument("--block-size", type=int, default=4)
    ap.add_argument("--wal-block-size", type=int, default=4)
    ap.add_argument("--hits", type=int, default=5)
    args = ap.parse_args()
    req = BuildRequest(
        pg=args.pg, block_size_kb=args.block_size, wal_block_size_kb=args.wal_block_size
    )
    home = Path(tempfile.mkdtemp(prefix="bench-build-", dir=ensure_dir(Path("/var/tmp"))))
    os.chmod(home, 0o755)
    paths = Paths(home=home, cache=home / "cache", results=home / "results")
    try:
        started = time.monotonic()
        inst = ensure_build(req, paths, log=lambda m: print(f"  {m}", flush=True))
        cold_s = time.monotonic() - started
        hits = []
        for _ in range(args.hits):
            t = time.monotonic()
            again = ensure_build(req, paths, log=print)
            hits.append(time.monotonic() - t)
            assert again.key == inst.key
        fresh_s = _hit_in_new_process(req, paths)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"build {inst.key} ({inst.version}, {args.block_size} kB pages, "
          f"{args.wal_block_size} kB WAL blocks) on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"cold build (fresh cache): {cold_s:.1f} s")
    print(f"cache hit in a new process (ensure_build only, no interpreter start): "
          f"{fresh_s * 1000:.0f} ms")  # fmt: skip
    print(
        f"cache hit in the same process: median {statistics.median(hits) * 1000:.0f} ms, "
        f"min {min(hits) * 1000:.0f} ms, max {max(hits) * 1000:.0f} ms over {len(hits)}"
    )


if __name__ == "__main__":
    main()

"""Record a sampled per-transaction log for the latency-percentile tests (run as root from
the repo root).

    .venv/bin/python tests/data/pgbench/record_translog.py <cache>/builds/<pg18 8k build>

A PG 18 server with shared_buffers 128MB, pgbench -i -s 10, then 10 s of simple-update
-M prepared -c 4 -j 2 with -P 1 and `-l --sampling-rate=0.1` (the driver's options,
blocklab.workloads.pgbench), written as pg18-translog-simple-update.{argv,stdout,stderr,
exitcode,logN} by record.bench().
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from record import BASE, bench, scale10_cluster  # type: ignore[import-not-found]

from blocklab.postgres.installation import Installation


def main() -> None:
    inst = Installation.from_manifest(Path(sys.argv[1]))
    c = scale10_cluster(inst)
    try:
        extra = ["-b", "simple-update", "-M", "prepared", "-c", "4", "-j", "2", "-T", "10"]
        log = ("--sampling-rate=0.1",)
        bench(c, "pg18", "translog-simple-update", extra, log=log, kind="log")
    finally:
        c.kill()
        shutil.rmtree(BASE, ignore_errors=True)


if __name__ == "__main__":
    main()

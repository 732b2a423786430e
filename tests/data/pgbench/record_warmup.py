"""Record a cold-start warm-up for the steady-state tests (run as root from the repo root).

    .venv/bin/python tests/data/pgbench/record_warmup.py <cache>/builds/<pg18 8k build>

A PG 18 server with shared_buffers 128MB: pgbench -i -s 10, a restart (empty shared
buffers), then 60 s of simple-update -M prepared -c 4 -j 2 with -P 1, written as
pg18-warmup-simple-update.{argv,stdout,stderr,exitcode,aggN} by record.bench().
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
        c.stop()
        c.start()
        extra = ["-b", "simple-update", "-M", "prepared", "-c", "4", "-j", "2", "-T", "60"]
        bench(c, "pg18", "warmup-simple-update", extra)
    finally:
        c.kill()
        shutil.rmtree(BASE, ignore_errors=True)


if __name__ == "__main__":
    main()

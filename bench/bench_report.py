"""Report generation at scale: 1,000 runs with 60-second series (SYNTHETIC data).

    .venv/bin/python bench/bench_report.py [--runs 1000] [--seconds 60]

Writes a temporary results database through ResultsDB (tests/report_fixture.py, made-up
numbers), generates the site and prints the time and the page weight. Removes it all.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from report_fixture import write_synthetic_results  # noqa: E402

from blocklab.report import build_site  # noqa: E402

# 5 page sizes x 4 fs block sizes x 2 WAL block sizes = 40 variants.
MATRIX = {
    "block_sizes_kb": (2, 4, 8, 16, 32),
    "fs_block_sizes": (1024, 2048, 4096, 65536),
    "wal_block_sizes_kb": (8, 16),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    args = ap.parse_args()
    variants = 5 * 4 * 2
    rounds = max(1, args.runs // variants)
    tmp = Path(tempfile.mkdtemp(prefix="blocklab-bench-report-"))
    try:
        t0 = time.monotonic()
        write_synthetic_results(
            tmp / "results", rounds=rounds, seconds=args.seconds, name="bench", **MATRIX
        )
        t1 = time.monotonic()
        r = build_site(tmp / "results", tmp / "site")
        t2 = time.monotonic()
        assets = sum(p.stat().st_size for p in (tmp / "site" / "assets").iterdir())
        csv_bytes = sum(p.stat().st_size for p in (tmp / "site").rglob("*.csv"))
        print(f"runs: {r.runs} ({variants} variants x {rounds} rounds), {args.seconds} s series")
        print(f"writing the synthetic results DB: {t1 - t0:.1f} s")
        print(f"generating the report: {t2 - t1:.1f} s")
        mean_kb = r.html_bytes / r.pages / 1e3
        print(f"pages: {r.pages}, HTML {r.html_bytes / 1e6:.1f} MB (mean {mean_kb:.0f} kB)")
        print(f"largest page: {r.largest_page} {r.largest_page_bytes / 1e3:.0f} kB")
        print(f"assets (plotly.min.js, css, js; loaded once): {assets / 1e6:.2f} MB")
        print(f"CSV downloads: {csv_bytes / 1e6:.1f} MB")
        print(f"site total: {r.total_bytes / 1e6:.1f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

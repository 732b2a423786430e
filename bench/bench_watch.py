"""One more run's update as `report --watch` makes it (with what it keeps between updates,
report.resident) against the same update without (as `blocklab report` makes it), in one
process, on the same store, in alternating order (SYNTHETIC runs).

    .venv/bin/python bench/bench_watch.py [--runs 10000] [--pairs 8]

Writes a temporary results database (tests/report_fixture.py, 40 variants of 60-second
series, each run's trends kept as the experiment loop keeps them), generates its site,
then for each pair records one more run before each of the two updates, the order of the
two alternating from pair to pair (the site made first in a process of its own, as a
watcher started on a site made before finds it: with nothing that site's build imported
or kept in this one), and prints each update's time and CPU, and the ratio
kept/not kept per pair (median, min, max). The first update with a resident reads every
run (it is measured, and the watcher pays it once). Last, it checks that the site equals
one made whole. Removes it all.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_report import MATRIX  # noqa: E402  (40 variants)
from report_fixture import add_synthetic_run, differing_files, write_synthetic_results  # noqa: E402

from blocklab.report import build_site  # noqa: E402
from blocklab.report.resident import Resident  # noqa: E402

NAME = "bench"


def update(results: Path, site: Path, resident: Resident | None) -> tuple[float, float]:
    """One more run recorded, then the site updated: (seconds, CPU seconds of this process)."""
    add_synthetic_run(results, NAME, seconds=60, keep_trends=True)
    started, cpu = time.monotonic(), time.process_time()
    build_site(results, site, resident=resident)
    return time.monotonic() - started, time.process_time() - cpu


def pairs(results: Path, site: Path, n: int) -> list[tuple[tuple[float, float], ...]]:
    """n pairs of (kept, not kept) updates, their order alternating."""
    resident = Resident()
    got = []
    for i in range(n):
        if i % 2 == 0:
            kept = update(results, site, resident)
            plain = update(results, site, None)
        else:
            plain = update(results, site, None)
            kept = update(results, site, resident)
        got.append((kept, plain))
        print(
            f"pair {i + 1}: kept {kept[0]:.2f} s ({kept[1]:.2f} s CPU), not kept "
            f"{plain[0]:.2f} s ({plain[1]:.2f} s CPU): {kept[0] / plain[0]:.3f}",
            flush=True,
        )
    return got


def _spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f} to {max(ratios):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10000, help="about; whole rounds of 40 variants")
    ap.add_argument("--pairs", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        results, site = Path(tmp) / "results", Path(tmp) / "site"
        rounds = max(1, args.runs // 40)
        write_synthetic_results(
            results, rounds=rounds, seconds=60, name=NAME, keep_trends=True, **MATRIX
        )
        made = multiprocessing.get_context("fork").Process(target=build_site, args=(results, site))
        made.start()
        made.join()
        assert made.exitcode == 0, made.exitcode
        got = pairs(results, site, args.pairs)
        kept, plain = [k[0] for k, _ in got], [p[0] for _, p in got]
        print(
            f"median: kept {statistics.median(kept):.2f} s, not kept "
            f"{statistics.median(plain):.2f} s; ratio kept/not kept "
            f"{_spread([k / p for k, p in zip(kept, plain, strict=True)])}, of CPU "
            f"{_spread([k[1] / p[1] for k, p in got])}"
        )
        whole = Path(tmp) / "whole"
        build_site(results, whole)
        print(f"the updated site equals one made whole: {differing_files(site, whole) == []}")


if __name__ == "__main__":
    main()

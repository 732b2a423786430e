"""A run page's packed data (report.pagedata.pack): the site's JSON encoder (orjson, through
report/jsontext.py) against the standard library's, on the same values (SYNTHETIC runs).

    .venv/bin/python bench/bench_pack.py [--runs 400] [--rounds 10]

Writes a temporary results database (tests/report_fixture.py, 40 variants of 60-second
series), makes each run page's value as the report does (its series read, its detail, its
JSON value), then packs them all in turn with each encoder, in alternating order, a round
at a time, and prints the CPU milliseconds a page of each (median over rounds) and the
ratio site/standard library per round (median, min, max). Then the same for gzip's level:
the site's (pagedata.PACK_LEVEL) against level 9, with the bytes of a packed page of
each. Removes it all.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_report import MATRIX  # noqa: E402  (40 variants)
from report_fixture import write_synthetic_results  # noqa: E402

from blocklab.report import data, jsontext, pagedata  # noqa: E402


def stdlib_pack(value: Any) -> str:
    """pack with the standard library's encoder (the same gzip level and base64)."""
    text = json.dumps(value, separators=(",", ":"), default=str)
    packed = gzip.compress(text.encode(), compresslevel=pagedata.PACK_LEVEL, mtime=0)
    return base64.b64encode(packed).decode()


def page_values(results: Path) -> list[Any]:
    db = data.open_results(results)
    try:
        exp = data.load_experiments(db)[0]
        runs = exp.runs
        stream = db.series_of_runs([r.id for r in runs])
        return [
            pagedata.run_json(
                data.run_detail(db, run.id, series),
                run,
                exp.variant(run.variant_id),
                exp.throughput_name,
            )
            for run, (_, series) in zip(runs, stream, strict=True)
        ]
    finally:
        db.close()


def _unpack(packed: str) -> Any:
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def level_9_pack(value: Any) -> str:
    """pack as it was before PACK_LEVEL: the site's encoder, gzip's level 9."""
    packed = gzip.compress(jsontext.dumps(value), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode()


def cpu_ms_per_page(pack: Callable[[Any], str], values: list[Any]) -> float:
    started = time.process_time()
    for v in values:
        pack(v)
    return (time.process_time() - started) / len(values) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400, help="about; whole rounds of 40 variants")
    ap.add_argument("--rounds", type=int, default=10, help="alternating rounds measured")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pack-") as tmp:
        results = Path(tmp) / "results"
        rounds = max(1, args.runs // 40)
        write_synthetic_results(results, rounds=rounds, seconds=60, name="bench", **MATRIX)
        values = page_values(results)
    same = sum(_unpack(pagedata.pack(v)) == _unpack(stdlib_pack(v)) for v in values)  # warm-up
    print(f"run pages: {len(values)}, {args.rounds} rounds, alternating order")
    print(f"pages whose data unpacks to the same value from both: {same} of {len(values)}")
    site, stdlib = paired(pagedata.pack, stdlib_pack, values, args.rounds)
    print(f"site's encoder (orjson):   {statistics.median(site):.3f} ms of CPU a page")
    print(f"standard library's:        {statistics.median(stdlib):.3f} ms of CPU a page")
    print_ratio("site/standard library", site, stdlib)
    level, nine = paired(pagedata.pack, level_9_pack, values, args.rounds)
    size = statistics.mean(len(pagedata.pack(v)) for v in values)
    size_9 = statistics.mean(len(level_9_pack(v)) for v in values)
    print(
        f"gzip level {pagedata.PACK_LEVEL}: {statistics.median(level):.3f} ms, {size:,.0f} bytes a "
        f"page; level 9: {statistics.median(nine):.3f} ms, {size_9:,.0f} bytes"
    )
    print_ratio(f"level {pagedata.PACK_LEVEL}/level 9", level, nine)


def paired(
    a: Callable[[Any], str], b: Callable[[Any], str], values: list[Any], rounds: int
) -> tuple[list[float], list[float]]:
    """CPU ms a page of `a` and of `b`, `rounds` times each, in alternating order."""
    got_a: list[float] = []
    got_b: list[float] = []
    for i in range(rounds):
        order = [(a, got_a), (b, got_b)]
        for pack, got in order if i % 2 == 0 else reversed(order):
            got.append(cpu_ms_per_page(pack, values))
    return got_a, got_b


def print_ratio(what: str, a: list[float], b: list[float]) -> None:
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    print(
        f"ratio {what}: median {statistics.median(ratios):.3f}"
        f" (min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()

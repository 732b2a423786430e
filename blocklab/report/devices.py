"""The report's device page: each stored profile's IOPS and latency against request size
(log axes, one line per pattern and queue depth) and its Five-Minute table at stated prices.
Page data is computed here (pure); blocklab.report.site writes the page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blocklab.economics import device_store
from blocklab.economics import rule as economics
from blocklab.store import ResultsStore, Row

# The report has no prices of its own: it states these; `blocklab economics` takes yours.
REPORT_RAM_PRICE_PER_GB = 3.0
REPORT_DEVICE_PRICE = 100.0


def profile_json(head: Row, points: Sequence[Row]) -> dict[str, Any]:
    """One profile: a line per (pattern, depth) over request size, and its economics."""
    lines: dict[str, dict[str, Any]] = {}
    for p in points:
        if p["status"] != "ok":
            continue
        key = f"{p['pattern']} qd{p['iodepth']}"
        line = lines.setdefault(
            key,
            {
                "name": key,
                "pattern": p["pattern"],
                "depth": p["iodepth"],
                "kb": [],
                "iops": [],
                "p50": [],
                "p99": [],
                "p999": [],
            },
        )
        line["kb"].append(p["request_bytes"] / 1024)
        for src, dst in (
            ("iops", "iops"),
            ("lat_p50_us", "p50"),
            ("lat_p99_us", "p99"),
            ("lat_p999_us", "p999"),
        ):
            line[dst].append(p[src])
    failed = [
        f"{p['pattern']} {p['request_bytes'] // 1024}k qd{p['iodepth']}: {p['reason']}"
        for p in points
        if p["status"] != "ok"
    ]
    return {
        "name": head["name"],
        "created_at": head["created_at"],
        "state": head["state"],
        "fio": f"{head['fio_version']} {head['ioengine']}",
        "runtime_s": head["runtime_s"],
        "size_bytes": head["size_bytes"],
        "lines": list(lines.values()),
        "failed": failed,
        "economics": economics_rows(head["name"], points),
    }


def economics_rows(name: str, points: Sequence[Row]) -> list[dict[str, Any]]:
    """The RAM-device Five-Minute table at the report's stated prices, per depth."""
    out = []
    for depth in sorted({p["iodepth"] for p in points}):
        iops = {
            p["request_bytes"]: p["iops"]
            for p in points
            if p["pattern"] == "randread" and p["iodepth"] == depth and p["status"] == "ok"
        }
        sizes = [s for s in sorted(iops) if s // 1024 in (1, 2, 4, 8, 16, 32)]
        if not sizes:
            continue
        dev = economics.Device(name, iops, REPORT_DEVICE_PRICE)
        rows = economics.table(REPORT_RAM_PRICE_PER_GB, [dev], sizes)
        best = economics.verdicts(rows)[0].shortest.page_bytes
        for r in rows:
            out.append(
                {
                    "depth": depth,
                    "page_kb": r.page_bytes // 1024,
                    "pages_per_mb": r.pages_per_mb,
                    "iops": r.accesses_per_s,
                    "break_even_s": r.break_even_s,
                    "favoured": r.page_bytes == best,
                }
            )
    return out


def devices_json(db: ResultsStore) -> list[dict[str, Any]]:
    return [
        profile_json(head, device_store.points(db, head["id"]))
        for head in device_store.profiles(db)
    ]

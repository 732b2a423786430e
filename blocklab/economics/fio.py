"""fio command lines and the pure parser of its JSON output (one job per run).

One point of a device profile is one fio run: one pattern, one request size, one queue
depth, direct I/O, time based. Latency is fio's completion latency (clat): the time from
submission to completion as the device and kernel see it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blocklab.errors import UserError

PATTERNS = ("randread", "randwrite", "read", "write")
REQUEST_SIZES_KB = (1, 2, 4, 8, 16, 32, 64)
DEPTHS = (1, 32)
IOENGINES = ("libaio", "io_uring", "psync")
_PERCENTILES = {"lat_p50_us": "50.000000", "lat_p99_us": "99.000000", "lat_p999_us": "99.900000"}


@dataclass(frozen=True)
class Point:
    """What to measure: one fio run."""

    pattern: str
    request_bytes: int
    iodepth: int


@dataclass(frozen=True)
class Result:
    """What fio measured for one point (None where fio gave nothing)."""

    iops: float
    bw_bytes_per_s: float
    lat_mean_us: float | None
    lat_p50_us: float | None
    lat_p99_us: float | None
    lat_p999_us: float | None
    runtime_s: float
    version: str


def command(
    point: Point,
    filename: Path | str,
    *,
    size_bytes: int,
    runtime_s: float,
    ioengine: str = "libaio",
) -> list[str]:
    """fio argv for one point, JSON on stdout."""
    return [
        "fio",
        f"--name={point.pattern}-{point.request_bytes // 1024}k-qd{point.iodepth}",
        f"--filename={filename}",
        f"--size={size_bytes}",
        f"--rw={point.pattern}",
        f"--bs={point.request_bytes}",
        f"--iodepth={point.iodepth}",
        f"--ioengine={ioengine}",
        "--direct=1",
        "--time_based",
        f"--runtime={runtime_s:g}s",
        "--randrepeat=0",
        "--norandommap",
        "--numjobs=1",
        "--output-format=json",
    ]


def parse(text: str, pattern: str) -> Result:
    """fio's JSON (warnings before it are skipped) -> Result. UserError-free: a ValueError
    says what is wrong with the output."""
    data = _json(text)
    jobs = data.get("jobs") or []
    if len(jobs) != 1:
        raise ValueError(f"fio output has {len(jobs)} jobs, expected 1")
    job = jobs[0]
    if job.get("error"):
        raise ValueError(f"fio job error {job['error']}")
    side = job["write" if pattern in ("randwrite", "write") else "read"]
    if not side.get("total_ios"):
        raise ValueError("fio completed no I/O")
    clat = side.get("clat_ns") or {}
    pct = clat.get("percentile") or {}
    return Result(
        iops=float(side["iops"]),
        bw_bytes_per_s=float(side["bw_bytes"]),
        lat_mean_us=_us(clat.get("mean")),
        runtime_s=float(side.get("runtime", 0)) / 1000,
        version=str(data.get("fio version", "")),
        **{k: _us(pct.get(v)) for k, v in _PERCENTILES.items()},
    )


def _json(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ValueError("fio printed no JSON")
    value = json.loads(text[start:])
    if not isinstance(value, dict):
        raise ValueError("fio's JSON is not an object")
    return value


def _us(ns: Any) -> float | None:
    return None if ns is None else float(ns) / 1000


def grid(patterns: list[str], sizes_kb: list[int], depths: list[int]) -> list[Point]:
    """Every point, in the order measured: pattern, then depth, then request size."""
    return [Point(p, kb * 1024, d) for p in patterns for d in depths for kb in sizes_kb]


def parse_list(text: str, flag: str, allowed: tuple[Any, ...], unit: str = "") -> list[Any]:
    """'4,8' -> [4, 8] checked against `allowed`; UserError naming the flag otherwise."""
    kind = type(allowed[0])
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = kind(part.removesuffix("k") if kind is int else part)
        except ValueError:
            value = None
        if value not in allowed:
            raise UserError(
                f"{flag}: {part!r} is not allowed; use one or more of "
                f"{', '.join(f'{a}{unit}' for a in allowed)}"
            )
        if value not in out:
            out.append(value)
    if not out:
        raise UserError(f"{flag}: give one or more of {', '.join(map(str, allowed))}")
    return out

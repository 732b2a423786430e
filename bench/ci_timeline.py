"""Where CI's time goes: which test ran when on which worker, and how busy the CPUs were.

As a pytest plugin it appends one JSON line per test start and end (with the xdist worker)
and, in the controlling process, the machine's /proc/stat CPU counters every 5 s:

    PYTHONPATH=bench PYTEST_ADDOPTS="-p ci_timeline" CI_TIMELINE=/tmp/ci.jsonl .ci/run

Then it prints the summary: each worker's busy minutes and its last test's end, the
longest tests, and the CPUs' busy share per 5-minute stretch of the session (on a quiet
machine, the share CI left idle):

    .venv/bin/python bench/ci_timeline.py /tmp/ci.jsonl
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

SAMPLE_S = 5.0
STRETCH_MIN = 5


def _write(event: dict[str, Any]) -> None:
    with open(os.environ.get("CI_TIMELINE", "/tmp/ci-timeline.jsonl"), "a") as f:
        f.write(json.dumps(event) + "\n")


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def _cpu_s() -> float:
    """CPU seconds of this process and of its children it (or they) waited for: a test's
    blocklab commands, pgbench, servers blocklab started; not the background builds."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if _worker():
        _write({"ev": "start", "id": nodeid, "t": time.time(), "w": _worker(), "cpu_s": _cpu_s()})


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    if _worker():
        _write({"ev": "end", "id": nodeid, "t": time.time(), "w": _worker(), "cpu_s": _cpu_s()})


def _cpu_counters() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def _sample_forever() -> None:
    while True:
        busy, total = _cpu_counters()
        _write({"ev": "cpu", "t": time.time(), "busy": busy, "total": total})
        time.sleep(SAMPLE_S)


def pytest_configure(config: object) -> None:
    if not _worker():  # the controlling process samples the machine
        threading.Thread(target=_sample_forever, daemon=True).start()


def summary(events: list[dict[str, Any]]) -> list[str]:
    """The report's lines (pure)."""
    tests = [e for e in events if e["ev"] in ("start", "end")]
    if not tests:
        return ["no test events"]
    t0 = min(e["t"] for e in tests)
    open_at: dict[tuple[str, str], dict[str, Any]] = {}
    spans: list[tuple[str, float, float, str]] = []
    cpu: list[tuple[float, str]] = []
    for e in tests:
        key = (e["id"], e["w"])
        if e["ev"] == "start":
            open_at[key] = e
        elif key in open_at:
            began = open_at.pop(key)
            spans.append((e["w"], began["t"] - t0, e["t"] - t0, e["id"]))
            if "cpu_s" in e and "cpu_s" in began:
                cpu.append((e["cpu_s"] - began["cpu_s"], e["id"]))
    lines = [f"session: {(max(s[2] for s in spans)) / 60:.1f} min from the first test"]
    busy: dict[str, float] = defaultdict(float)
    last: dict[str, float] = defaultdict(float)
    for w, start, end, _ in spans:
        busy[w] += end - start
        last[w] = max(last[w], end)
    for w in sorted(busy):
        lines.append(f"{w}: {busy[w] / 60:.1f} min in tests, last test ended at {last[w] / 60:.1f}")
    lines.append("longest tests (start min, seconds):")
    for w, start, end, nodeid in sorted(spans, key=lambda s: s[1] - s[2])[:15]:
        lines.append(f"  {start / 60:5.1f} {end - start:6.0f} s  {w}  {nodeid}")
    if cpu:
        total = sum(c for c, _ in cpu)
        lines.append(
            f"CPU of the test processes and the children they waited for: {total / 60:.1f} min;"
            " the most:"
        )
        for c, nodeid in sorted(cpu, reverse=True)[:15]:
            lines.append(f"  {c:6.0f} s  {nodeid}")
    lines += _cpu_lines([e for e in events if e["ev"] == "cpu"], t0)
    return lines


def _cpu_lines(samples: list[dict[str, Any]], t0: float) -> list[str]:
    if len(samples) < 2:
        return []
    out = [f"CPUs busy per {STRETCH_MIN} min (all processes on the machine):"]
    stretch = STRETCH_MIN * 60
    first = samples[0]
    for s in samples[1:]:
        if s["t"] - first["t"] >= stretch or s is samples[-1]:
            share = (s["busy"] - first["busy"]) / max(1, s["total"] - first["total"])
            since, until = (first["t"] - t0) / 60, (s["t"] - t0) / 60
            out.append(f"  {since:5.1f} .. {until:5.1f} min: {share:.0%}")
            first = s
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    events = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line]
    print("\n".join(summary(events)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""bench/ci_timeline.py's summary of a CI session (events as its pytest hooks write them)."""

from __future__ import annotations

import ci_timeline


def _events() -> list[dict[str, object]]:
    t0 = 1000.0
    ev: list[dict[str, object]] = []
    for w, nodeid, start, end, cpu_s in (
        ("gw0", "tests/a.py::test_short", 0, 60, 50.0),
        ("gw1", "tests/b.py::test_long", 0, 600, 20.0),
        ("gw0", "tests/c.py::test_mid", 60, 360, 10.0),
    ):
        ev.append({"ev": "start", "id": nodeid, "t": t0 + start, "w": w, "cpu_s": 5.0})
        ev.append({"ev": "end", "id": nodeid, "t": t0 + end, "w": w, "cpu_s": 5.0 + cpu_s})
    for i, busy in enumerate((0, 300, 300)):  # 2 CPUs: 100 busy jiffies of 200 a 300 s
        ev.append({"ev": "cpu", "t": t0 + 300 * i, "busy": busy * i // 3, "total": 200 * i})
    return ev


def test_the_summary_names_each_workers_time_the_longest_tests_and_the_cpu_share() -> None:
    lines = ci_timeline.summary(_events())
    assert lines[0] == "session: 10.0 min from the first test"
    assert "gw0: 6.0 min in tests, last test ended at 6.0" in lines
    assert "gw1: 10.0 min in tests, last test ended at 10.0" in lines
    longest = lines[lines.index("longest tests (start min, seconds):") + 1]
    assert longest.split() == ["0.0", "600", "s", "gw1", "tests/b.py::test_long"]
    most = lines.index(
        "CPU of the test processes and the children they waited for: 1.3 min; the most:"
    )
    assert [ln.split() for ln in lines[most + 1 : most + 3]] == [
        ["50", "s", "tests/a.py::test_short"],
        ["20", "s", "tests/b.py::test_long"],
    ]
    cpu = lines[lines.index("CPUs busy per 5 min (all processes on the machine):") + 1 :]
    assert cpu == ["    0.0 ..   5.0 min: 50%", "    5.0 ..  10.0 min: 50%"]


def test_without_events_it_says_so() -> None:
    assert ci_timeline.summary([]) == ["no test events"]

"""The order of the test session for `make test`'s two workers (-n 2 --dist load
--maxschedchunk 1: one test handed out at a time, so this order is the order they start).

The workers take the tests that need a build first, by the build they wait for, in the
order the background process makes them (tests/prebuild.py), the longest
(`alongside(minutes)`) first among equals; the ~1,500 that need none come last. The
builds' make runs at niceness -10, so while it compiles the tests get about a tenth of
the CPUs: a test that mostly waits on servers, checkpoints and timers (most that need a
build) gets on at the clock's pace then, while the tests that need none are pure CPU and
crawled (CI, 2026-11-29: 6.8 min of both workers before the first build test started,
about 3 on the free CPUs). A worker that reaches a build not made yet waits on its lock,
which costs no CPU the builds could use.

Not --dist loadgroup: with pytest 9.2 it ignores every xdist_group (pytest-xdist issue
1386), so the tests have run two at a time, in any pairing, since then."""

from __future__ import annotations

import prebuild
import pytest

# The session build each fixture of tests/conftest.py gives: (page kB, WAL block kB).
FIXTURE_GEOMETRY = {"pg18_8k": (8, 8), "pg18_4k": (4, 8), "pg18_wal4k": (8, 4)}
BUILD_FIXTURES = set(FIXTURE_GEOMETRY)


def asked(item: pytest.Item) -> set[str]:
    """The fixtures a test asks for, with those a parametrized test gets by name."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:  # request.getfixturevalue(param) of a parametrized test
        names |= {v for v in callspec.params.values() if isinstance(v, str)}
    return names


def ready_at(item: pytest.Item) -> int:
    """When a test's builds are made: -1 for a test that needs none, else the place of the
    last of them in prebuild.PREBUILT (its `builds(...)` markers and its build fixtures);
    a build test that names none, or a build the background process does not make, waits
    for them all."""
    if item.get_closest_marker("build") is None:
        return -1
    wanted = {FIXTURE_GEOMETRY[name] for name in BUILD_FIXTURES & asked(item)}
    for marker in item.iter_markers("builds"):
        wanted |= {tuple(g) for g in marker.args}
    last = len(prebuild.PREBUILT)
    if not wanted:
        return last
    order = {g: i for i, g in enumerate(prebuild.PREBUILT)}
    return max(order.get(g, last) for g in wanted)


def sort_key(item: pytest.Item) -> tuple[int, float]:
    """By the time a test's builds are ready, then the longest first; last, the tests
    that need no build (ready_at -1)."""
    ready = ready_at(item)
    alongside = item.get_closest_marker("alongside")
    phase = len(prebuild.PREBUILT) + 1 if ready < 0 else ready
    return (phase, -float(alongside.args[0]) if alongside is not None else 0.0)

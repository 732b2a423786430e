"""The background builds of the test session (tests/prebuild.py): what it runs, and that
it ends what it started, by the PID it started, when the session ends early."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import prebuild
import pytest


def test_every_geometry_is_one_blocklab_build_and_a_failure_does_not_stop_the_rest() -> None:
    lines = prebuild.script(((8, 8), (2, 8), (8, 8, 1))).splitlines()
    assert lines[0] == "set -u"
    assert all("nice -n -10 " in line for line in lines[1:])  # before the tests
    # only the geometry relinked later goes through the compiler cache (its cold cost)
    assert lines[1].startswith("BLOCKLAB_CCACHE=1 nice ")
    assert lines[2].startswith("nice ") and lines[3].startswith("nice ")
    assert lines[1].endswith("blocklab.cli build --pg 18 --block-size 8 --wal-block-size 8 || true")
    assert lines[2].endswith("blocklab.cli build --pg 18 --block-size 2 --wal-block-size 8 || true")
    assert lines[3].endswith("--block-size 8 --wal-block-size 8 --layout-seed 1 || true")
    assert len(set(prebuild.PREBUILT)) == len(prebuild.PREBUILT) == 6  # five geometries, a layout


FIXTURES = {(8, 8), (4, 8), (8, 4)}  # tests/conftest.py: pg18_8k, pg18_4k, pg18_wal4k


def test_the_session_builds_only_what_the_examples_run_end_to_end_ask_for() -> None:
    """Each build is minutes of both cores on CI's empty cache: the build fixtures take
    geometries that an example run end to end needs anyway, and the only other build is
    the layout variant of tests/postgres/test_link_order.py."""
    from test_examples import RUN_END_TO_END

    examples = set().union(*(prebuild.example_geometries(p) for p in RUN_END_TO_END))
    assert FIXTURES <= examples
    assert set(prebuild.PREBUILT) == examples | {(8, 8, 1)}


def test_what_is_still_building_at_the_end_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prebuild, "script", lambda _g: "sleep 300 & wait")
    log = tmp_path / "logs" / "prebuild.log"
    with prebuild.in_background([(8, 8)], log) as pid:
        time.sleep(0.2)
        os.kill(pid, 0)  # running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert log.is_file()


def test_the_tests_run_in_the_order_their_builds_are_made(request: pytest.FixtureRequest) -> None:
    """tests/run_order.py sorts the session: by the last build a test waits for in
    prebuild.PREBUILT's order, each example by the builds its matrix names, then the tests
    that need no build (ready_at -1)."""
    from run_order import ready_at

    items = request.session.items
    ready = [ready_at(item) for item in items]
    built = [r for r in ready if r >= 0]
    assert ready == built + [-1] * (len(ready) - len(built))
    assert built == sorted(built)
    order = {g: i for i, g in enumerate(prebuild.PREBUILT)}
    examples = [i for i in items if i.originalname == "test_example_runs_end_to_end"]
    for item in examples:
        wanted = prebuild.example_geometries(item.callspec.params["example"])
        assert ready_at(item) == max(order[g] for g in wanted), item.nodeid
    demo = [i for i in items if "test_make_demo" in i.nodeid]
    assert all(ready_at(i) == order[(4, 8)] for i in demo)


def test_main_runs_the_command_beside_the_builds_and_ends_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make test`'s wrapper: the command's exit code, the builds ended when it ends, the
    test session told to start none, the builds in the test cache with a parent make's
    variables."""
    started: list[dict[str, str]] = []
    real = prebuild.in_background

    def recorded(geometries, log, env=None):  # type: ignore[no-untyped-def]
        started.append(dict(env or {}))
        return real(geometries, log, env)

    monkeypatch.setattr(prebuild, "script", lambda _g: "sleep 300 & wait")
    monkeypatch.setattr(prebuild, "in_background", recorded)
    monkeypatch.setenv("BLOCKLAB_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(prebuild.NO_PREBUILD, raising=False)
    told = 'test "$BLOCKLAB_TEST_PREBUILD" = 0'
    before = signal.getsignal(signal.SIGTERM)
    assert prebuild.main(["sh", "-c", told]) == 0
    # the pytest worker's handler back: a left one went into forked report workers
    assert signal.getsignal(signal.SIGTERM) is before
    assert prebuild.main(["sh", "-c", "exit 3"]) == 3
    assert prebuild.main([]) == 2
    env = started[0]
    assert env["BLOCKLAB_CACHE"] == str(tmp_path / "cache")
    assert env["MAKELEVEL"] == "1" and Path(env["BLOCKLAB_HOME"]).name.startswith("prebuild-")
    assert not Path(env["BLOCKLAB_HOME"]).exists()  # removed at the end
    assert (tmp_path / "cache" / "logs" / "prebuild.log").is_file()


def test_the_background_builds_compile_as_the_session_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background builds (prebuild.session_env, from make's environment) and a test's
    own ensure_build (this session's, set by conftest) have the same compiler variables,
    -Og included: else every test that needs a build would make it again beside them."""
    from blocklab.postgres import build

    session = build.compiler_environment()
    assert session["COPT"] == "-Og"
    outside = {k: v for k, v in os.environ.items() if k not in prebuild.TEST_COMPILE}
    env = prebuild.session_env(outside, tmp_path)
    for name in build.COMPILER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        if name in env:
            monkeypatch.setenv(name, env[name])
    assert build.compiler_environment() == session
    assert prebuild.session_env({"COPT": "-O0"}, tmp_path)["COPT"] == "-O0"  # a user's wins

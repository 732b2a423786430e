"""Shared fixtures: a private BLOCKLAB_HOME per test session, a build cache shared
between sessions (so real PostgreSQL builds are made once), and cached builds.

BLOCKLAB_TEST_CACHE names the shared cache (CI gives each run an empty one of its own);
every test sees it as BLOCKLAB_CACHE, so none reads /var/lib/blocklab/cache then."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import prebuild
import pytest
import run_order
from pg_results import pg_server, pg_uri, store  # noqa: F401 - fixtures shared by the store, fleet and summary tests

from blocklab.paths import Paths, ensure_dir

SHARED_CACHE = Path(os.environ.get("BLOCKLAB_TEST_CACHE", prebuild.DEFAULT_CACHE))


# What the README's `make test` (a parent make) exports. Every build the tests make runs
# under them, also when pytest is started by hand: a cold cache is a build under make.
PARENT_MAKE = prebuild.PARENT_MAKE


@pytest.fixture(scope="session", autouse=True)
def paths() -> Iterator[Paths]:
    """Autouse: no test, not even one that never asks for it, reads the default home."""
    # Not under pytest's tmp_path: that is 0700 and the server user must reach it.
    home = ensure_dir(Path("/var/tmp/blocklab-tests") / uuid.uuid4().hex[:8])
    os.environ["BLOCKLAB_HOME"] = str(home)
    os.environ["BLOCKLAB_CACHE"] = str(SHARED_CACHE)
    os.environ.update(PARENT_MAKE)
    for name, value in prebuild.TEST_COMPILE.items():
        os.environ.setdefault(name, value)
    ensure_dir(SHARED_CACHE)
    yield Paths.from_env(results=home / "results")
    shutil.rmtree(home, ignore_errors=True)


# The session's builds are only those that an example or the demo asks for anyway (each
# is minutes of both cores on CI's empty cache: tests/prebuild.py), plus one layout
# variant. Page size and WAL block size are checked one at a time: 4/8 and 8/4.
@pytest.fixture(scope="session")
def pg18_4k(paths: Paths):  # type: ignore[no-untyped-def]
    """A real PostgreSQL 18 build with 4 kB pages and 8 kB WAL blocks (cached): the demo's
    4 kB build."""
    from blocklab.model import BuildRequest
    from blocklab.postgres.build import ensure_build

    return ensure_build(BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=8), paths)


@pytest.fixture(scope="session")
def pg18_8k(paths: Paths):  # type: ignore[no-untyped-def]
    """A real PostgreSQL 18 build with the default 8 kB pages and 8 kB WAL blocks (cached)."""
    from blocklab.model import BuildRequest
    from blocklab.postgres.build import ensure_build

    return ensure_build(BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8), paths)


@pytest.fixture(scope="session")
def pg18_wal4k(paths: Paths):  # type: ignore[no-untyped-def]
    """A real PostgreSQL 18 build with 8 kB pages and 4 kB WAL blocks (cached): the WAL
    block examples' (seed004-sysbench-walblock, wal-block-clients)."""
    from blocklab.model import BuildRequest
    from blocklab.postgres.build import ensure_build

    return ensure_build(BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=4), paths)


@pytest.fixture(scope="session")
def pg15_system():  # type: ignore[no-untyped-def]
    """Debian's packaged PostgreSQL 15 binaries (installed by `make setup`)."""
    from blocklab.postgres.installation import Installation

    inst = Installation.system(15)
    if not inst.bin("postgres").exists():
        pytest.fail("Debian's postgresql-15 is missing: run `make setup`")
    return inst


# The worker whose session makes the builds in the background (tests/prebuild.py).
PREBUILD_WORKER = "gw0"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a real build (directly or through another fixture) is a
    `build` test, marked or not: `make check` (-m "not build") never compiles PostgreSQL.
    Then the tests are sorted for the two workers of `make test` (tests/run_order.py)."""
    for item in items:
        if run_order.BUILD_FIXTURES & run_order.asked(item):
            item.add_marker(pytest.mark.build)
    items.sort(key=run_order.sort_key)


@pytest.fixture(scope="session", autouse=True)
def builds_in_background(paths: Paths, request: pytest.FixtureRequest) -> Iterator[None]:
    """The session's builds, made in the background while the tests run (tests/prebuild.py),
    when any selected test needs a build, by one worker only. BLOCKLAB_TEST_PREBUILD=0 turns
    it off: `make test` sets it, having started them before ruff and mypy (prebuild.main)."""
    selected = request.session.items  # under xdist: the whole collection, on every worker
    if (
        os.environ.get(prebuild.NO_PREBUILD, "1") == "0"
        or os.environ.get("PYTEST_XDIST_WORKER", PREBUILD_WORKER) != PREBUILD_WORKER
        or not any(item.get_closest_marker("build") for item in selected)
    ):
        yield
        return
    with prebuild.in_background(prebuild.PREBUILT, paths.cache / "logs" / "prebuild.log"):
        yield

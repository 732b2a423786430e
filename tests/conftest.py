"""Shared fixtures: a private BLOCKLAB_HOME per test session, a build cache shared
between sessions (so real PostgreSQL builds are made once), and cached builds."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from blocklab.paths import Paths, ensure_dir

SHARED_CACHE = Path(os.environ.get("BLOCKLAB_TEST_CACHE", "/var/lib/blocklab/cache"))


@pytest.fixture(scope="session")
def paths() -> Iterator[Paths]:
    # Not under pytest's tmp_path: that is 0700 and the server user must reach it.
    home = ensure_dir(Path("/var/tmp/blocklab-tests") / uuid.uuid4().hex[:8])
    os.environ["BLOCKLAB_HOME"] = str(home)
    os.environ["BLOCKLAB_CACHE"] = str(SHARED_CACHE)
    ensure_dir(SHARED_CACHE)
    yield Paths.from_env(results=home / "results")
    shutil.rmtree(home, ignore_errors=True)

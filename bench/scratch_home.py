"""A throwaway BLOCKLAB home for a benchmark script, sharing the build cache.

    with scratch_home("bench-x-") as (paths, state):
        with Lab(paths, state) as lab: ...

On the way out every storage the state file names is released and the home removed.
`blocklab_argv(...)` is the command line of a blocklab command run in it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.storage.cleanup import release_all


@contextmanager
def scratch_home(prefix: str) -> Iterator[tuple[Paths, State]]:
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=ensure_dir(Path("/var/tmp"))))
    os.chmod(home, 0o755)
    shared = Paths.from_env()  # the shared build cache (BLOCKLAB_CACHE or the default)
    paths = Paths(home=home, cache=shared.cache, results=home / "results")
    state = State(paths.state_file)
    try:
        yield paths, state
    finally:
        left = release_all(state, only_dead_owners=False)
        if left:
            print("released leftovers:", left)
        shutil.rmtree(home, ignore_errors=True)


def blocklab_argv(*args: str) -> list[str]:
    """A blocklab command as a new process of this Python. -P: the blocklab it imports is
    PYTHONPATH's (a tree under test, e.g. a "before" worktree) or the installed one, never
    the working directory's, which `-m` would otherwise put first on sys.path."""
    return [sys.executable, "-P", "-m", "blocklab.cli", *args]

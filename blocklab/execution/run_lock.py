"""One `blocklab run` per experiment and results: an flock beside the results.

The lock file `.run-<experiment>.lock` in the results directory holds the PID of the
process that has it. A second `blocklab run` of the same experiment into the same
results refuses at once (BusyError, naming that PID) instead of writing runs beside the
first; the kernel drops the lock when its process ends, SIGKILL included.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from blocklab.errors import BusyError


def lock_path(directory: Path, experiment: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", experiment)[:100]
    return directory / f".run-{safe}.lock"


@contextmanager
def held(directory: Path, experiment: str, location: str) -> Iterator[None]:
    """Hold the experiment's run lock, or raise BusyError if another process holds it."""
    path = lock_path(directory, experiment)
    directory.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise BusyError(
                f"experiment '{experiment}' in {location} is being run by another "
                f"blocklab process (PID {holder}); wait for it to end (it resumes "
                "nothing twice), or give another --results"
            ) from None
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

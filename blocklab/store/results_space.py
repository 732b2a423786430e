"""The results directory's own disk: room checked before a run, a full disk stops the
experiment with a clear error (ResultsFullError) and no stored run is lost.

The database writes one transaction per run; when the disk is full that transaction is
rolled back (SQLite: "database or disk is full"), the runs stored before stay, and the
run that could not be stored is run again by the same command once there is room.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from blocklab.errors import ResultsFullError

# A run's raw files (pgbench's sampled per-transaction log, server log, argv) and its rows;
# tiny runs need far less, long ones at high client counts a few MiB (the log: 3.1 bytes
# per transaction, 0.75 MB for 60 s at 4,000 tps).
HEADROOM_BYTES = 8 * 1024 * 1024


def free_bytes(directory: Path) -> int:
    """Free bytes of the file system `directory` is (or will be) on: its nearest existing
    ancestor's (a PostgreSQL store's raw directory is made with the first run)."""
    while not directory.exists() and directory.parent != directory:
        directory = directory.parent
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def message(directory: Path, free: int | None = None) -> str:
    room = (
        ""
        if free is None
        else f" ({free // 1024} KiB free, a run needs {HEADROOM_BYTES // 1024} KiB)"
    )
    return (
        f"no space left on the results directory {directory}{room}: the experiment stops; "
        "every stored run is kept. Free some space and run the same command to resume."
    )


def check(directory: Path) -> None:
    """ResultsFullError when the results directory has no room for another run."""
    free = free_bytes(directory)
    if free < HEADROOM_BYTES:
        raise ResultsFullError(message(directory, free))


@contextmanager
def guard(directory: Path) -> Iterator[None]:
    """Turn a write into the results that failed for want of space into ResultsFullError."""
    try:
        yield
    except sqlite3.OperationalError as e:
        if "full" not in str(e).lower():
            raise
        raise ResultsFullError(message(directory)) from e
    except OSError as e:
        # another disk's ENOSPC (the work directory's, say) is not the results' to report
        if e.errno != errno.ENOSPC or not _nearly_full(directory):
            raise
        raise ResultsFullError(message(directory)) from e


def _nearly_full(directory: Path) -> bool:
    try:
        return free_bytes(directory) < HEADROOM_BYTES
    except OSError:
        return False

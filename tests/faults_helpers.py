"""Helpers of the reliability tests: `blocklab` as a child process with a home of its
own, what is left of a home (servers, mounts, loop devices), what a results database holds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

from blocklab import proc
from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.storage.cleanup import release_all
from blocklab.workloads.execution import DRIVER_DIR_PREFIX


def own_home(paths: Paths, tag: str) -> Path:
    return ensure_dir(paths.home / f"{tag}-{uuid.uuid4().hex[:6]}")


def env_for(home: Path, paths: Paths, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BLOCKLAB_KILL_AT"}
    env.update({"BLOCKLAB_HOME": str(home), "BLOCKLAB_CACHE": str(paths.cache), **extra})
    return env


def blocklab(
    *args: str, env: dict[str, str], timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def stored_runs(results: Path) -> list[tuple[str, int, str, str]]:
    """(variant_id, round, status, reason) of every stored run."""
    db = results / "blocklab.sqlite"
    if not db.exists():
        return []
    # closing(): a connection's `with` ends its transaction, not the connection, and a
    # connection left to the garbage collector keeps the results disk busy
    with closing(sqlite3.connect(db, timeout=30)) as c:
        try:
            rows = c.execute("SELECT variant_id, round, status, reason FROM runs ORDER BY id")
            return [(str(v), int(r), str(s), str(why or "")) for v, r, s, why in rows]
        except sqlite3.OperationalError:  # killed before the schema was made
            return []


def integrity_ok(results: Path) -> bool:
    db = results / "blocklab.sqlite"
    with closing(sqlite3.connect(db, timeout=30)) as c:
        return c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def leftovers(home: Path) -> dict[str, list[str]]:
    """Servers (processes whose cwd is under `home`), mounts and loop devices of `home`,
    drivers' working directories in home/tmp (a test's TMPDIR: own_tmp), and what its
    state file still records."""
    servers = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            exe = os.path.basename(os.readlink(entry / "exe"))
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        mine = cwd.startswith(str(home)) or str(home) in argv  # pgbench: its -h socket dir
        if mine and exe in ("postgres", "pgbench"):
            servers.append(f"{exe} PID {entry.name}")
    mounts = [ln for ln in Path("/proc/mounts").read_text().splitlines() if str(home) in ln]
    loops = [ln for ln in proc.run(["losetup", "-a"]).stdout.splitlines() if str(home) in ln]
    drivers = [str(p) for p in (home / "tmp").glob(f"{DRIVER_DIR_PREFIX}*")]
    state = [f"{e.kind} {e.ident}" for e in State(home / "state.json").entries()]
    found = {"servers": servers, "mounts": mounts, "loops": loops, "drivers": drivers}
    found["state"] = state
    return {k: v for k, v in found.items() if v}


def release_home(home: Path) -> None:
    """Release whatever a test's blocklab left in `home` (also after a failure)."""
    release_all(State(home / "state.json"), only_dead_owners=False)


def nothing_left(home: Path, wait_s: float = 15.0) -> dict[str, list[str]]:
    """leftovers(home), polled until empty or `wait_s` passed (a pgbench whose server was
    stopped needs a moment to notice)."""
    deadline = time.monotonic() + wait_s
    left = leftovers(home)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftovers(home)
    return left

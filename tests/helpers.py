"""Helpers shared by tests: throwaway servers, waiting on a child's output, small results."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from blocklab import proc
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.report import make_server
from blocklab.state import State
from blocklab.store import ResultsDB, RunRecord


def scratch_cluster(paths: Paths, inst: Installation, group: str) -> Cluster:
    """A cluster (not yet initialised) in a fresh directory under paths.work/GROUP,
    with a state file of its own."""
    base = paths.work / group / uuid.uuid4().hex[:8]
    return Cluster(
        inst,
        base / "data",
        socket_dir=base / "sock",
        user=server_user(),
        state=State(paths.home / f"state-{base.name}.json"),
        log_path=base / "server.log",
    )


def remove_cluster(c: Cluster) -> None:
    """Kill the server by PID (if any) and delete its directory, also after a failure."""
    c.kill()
    shutil.rmtree(c.data_dir.parent, ignore_errors=True)


@contextmanager
def running_cluster(
    paths: Paths, inst: Installation, group: str, settings: dict[str, str]
) -> Iterator[Cluster]:
    """initdb, settings, start; killed and removed on the way out."""
    c = scratch_cluster(paths, inst, group)
    try:
        c.initdb(data_checksums=False)
        c.write_settings(settings)
        c.start()
        yield c
    finally:
        remove_cluster(c)


def first_line(path: Path, pid: int, timeout_s: float, what: str) -> str:
    """The first complete line a child process writes to `path`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return text.splitlines()[0]
        if not proc.pid_alive(pid):
            raise AssertionError(f"the child died: {text}")
        time.sleep(0.1)
    raise AssertionError(f"the child did not {what} in time")


def small_experiment(
    db: ResultsDB,
    name: str,
    reference: str,
    variants: list[tuple[str, str, str, dict[str, object]]],
    references: dict[str, str] | None = None,
    spec: dict[str, object] | None = None,
) -> None:
    """An experiment with hand-written variants, for runs recorded by the test itself."""
    db.upsert_experiment(
        name,
        description="",
        spec={"name": name, **(spec or {})},
        seed=1,
        reference=reference,
        created_at="2026-11-22T00:00:00+00:00",
        host={},
        variants=variants,
        references=references,
    )


DATA = Path(__file__).parent / "data"


def recorded_catalogue(block_kb: int):  # type: ignore[no-untyped-def]
    """The settings catalogue blocklab recorded from a real PG 18 build with these page
    and WAL block sizes (4 or 8 kB), replayed."""
    import json

    from blocklab.postgres import settings_catalogue

    path = DATA / "settings" / f"pg18-bs{block_kb}k-wal{block_kb}k.json"
    return settings_catalogue.parse(json.loads(path.read_text()))


@contextmanager
def serving(site: Path) -> Iterator[tuple[str, int]]:
    """The report server for `site` on 127.0.0.1 and a free port, in a thread; stopped on
    the way out."""
    server = make_server(site, port=0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield str(server.server_address[0]), int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def tiny_experiment_toml(name: str, *matrix_lines: str) -> str:
    """A one-round, one-variant experiment file (PG 18, 8 kB pages, scale 1, 1 s) with
    extra [matrix] lines."""
    lines = ["[experiment]", f'name = "{name}"', "rounds = 1", "[matrix]", 'postgres = "18"']
    lines += ["block_size = 8", "wal_block_size = 8", "scale = 1", "clients = 1"]
    lines += ["duration = 1", "warmup = 0", *matrix_lines]
    return "\n".join(lines) + "\n"


def kill_postmaster_after(
    marker: Path, cluster: Cluster, after_s: float
) -> tuple[threading.Thread, list[int]]:
    """A started thread that SIGKILLs the cluster's postmaster `after_s` seconds after
    `marker` (a driver's argv file in the run's raw directory) appears; the list gets the
    killed PID. Join the thread after the run."""
    import os
    import signal

    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if marker.exists() and cluster.pid:
                time.sleep(after_s)
                killed.append(cluster.pid)
                os.kill(cluster.pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    return t, killed


def postgres_running_in(data_dir: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == os.path.realpath(data_dir):
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def blocklab_in_home(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`blocklab ARGS` as a user runs it, with BLOCKLAB_HOME=home and a plain PATH."""
    env = {"BLOCKLAB_HOME": str(home), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def blocklab_wide(*args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess[str]:
    """`blocklab ARGS` in this test's environment, 220 columns wide (tables unwrapped)."""
    env = {**os.environ, "COLUMNS": "220"}
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        capture_output=True, text=True, timeout=timeout_s, env=env,
    )  # fmt: skip


class Silent:
    """A Progress (blocklab.execution.experiment) that shows nothing: for loop tests."""

    def begin(self, total_runs: int, done_runs: int) -> None: ...
    def run_started(self, label: str, round_no: int, position: int) -> None: ...
    def run_finished(self, record: RunRecord, elapsed_s: float) -> None: ...
    def note(self, message: str) -> None: ...
    def grow(self, extra_runs: int) -> None: ...

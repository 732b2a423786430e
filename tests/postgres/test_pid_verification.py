"""Root signals only a PID it has verified: a postmaster.pid (or a state file) naming a
process that is not that data directory's postmaster, started by blocklab, is left alone
and the refusal is said (blocklab.proc.postmaster_refusal). Real processes: Debian's
PostgreSQL 15 and `sleep`s started here, each ended by its PID in a finally."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab import proc
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, private_dir, server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State
from blocklab.storage.cleanup import release_report


@pytest.fixture
def cluster(paths: Paths, pg15_system: Installation) -> Iterator[Cluster]:
    c = scratch_cluster(paths, pg15_system, "pid-verify")
    yield c  # pytest runs the teardown below after a failed test, too
    remove_cluster(c)


def _sleeper(where: Path, *, as_server_user: bool) -> proc.subprocess.Popen[bytes]:
    """A `sleep` working in `where` (as the server user: everything a postmaster of
    `where` would be but its binary)."""
    user = server_user() if as_server_user else None
    return proc.spawn(
        ["sleep", "120"], stdout_path=where.parent / "sleep.out", cwd=where, user=user
    )


def _end(p: proc.subprocess.Popen[bytes]) -> None:
    proc.terminate(p.pid, grace_s=2.0)


def test_a_postmaster_pid_naming_another_process_is_not_signalled(cluster: Cluster) -> None:
    private_dir(cluster.data_dir, cluster.user)  # a data directory with no server
    fakes = [_sleeper(cluster.data_dir, as_server_user=s) for s in (True, False)]
    try:
        for fake in fakes:
            (cluster.data_dir / "postmaster.pid").write_text(f"{fake.pid}\n{cluster.data_dir}\n")
            cluster.refused.clear()
            cluster._after_failed_start()  # reads postmaster.pid, would SIGKILL it
            cluster.pid = fake.pid
            cluster.stop(timeout_s=1.0)  # would SIGINT, then SIGKILL
            cluster.pid = fake.pid
            cluster.kill()
            assert proc.pid_alive(fake.pid), "root signalled a PID it had not verified"
            assert len(cluster.refused) == 3
            assert all(f"PID {fake.pid} runs " in r for r in cluster.refused), cluster.refused
            assert all("not /usr/lib/postgresql/15/bin/postgres" in r for r in cluster.refused)
    finally:
        for fake in fakes:
            _end(fake)


def test_cleanup_leaves_an_unverified_pid_alone_and_says_so(paths: Paths, cluster: Cluster) -> None:
    private_dir(cluster.data_dir, cluster.user)
    fake = _sleeper(cluster.data_dir, as_server_user=True)
    state = State(paths.home / "pid-verify-state.json")
    try:
        (cluster.data_dir / "postmaster.pid").write_text(f"{fake.pid}\n")
        state.add("server", str(cluster.data_dir), data_dir=str(cluster.data_dir), pid=None)
        report = release_report(state, only_dead_owners=False)
        assert proc.pid_alive(fake.pid)
        [line] = report.released
        assert f"PID {fake.pid} not signalled: PID {fake.pid} is not a postgres" in line
        assert state.entries() == []
    finally:
        _end(fake)


def test_the_real_postmaster_is_verified_and_a_reused_pid_is_not(cluster: Cluster) -> None:
    cluster.initdb(data_checksums=False)
    cluster.write_settings({})
    pid = cluster.start()
    exe = str(cluster.inst.bin("postgres"))
    ticks = cluster.state.entries()[0].info["pid_ticks"]
    assert ticks == proc.start_ticks(pid) and ticks is not None
    assert proc.postmaster_refusal(pid, cluster.data_dir, started_ticks=ticks, exe=exe) == ""
    assert cluster.verified_pid() == pid
    later = proc.postmaster_refusal(pid, cluster.data_dir, started_ticks=ticks + 1, exe=exe)
    assert "(reused)" in later
    other = cluster.data_dir.parent / "other"
    private_dir(other, cluster.user)
    assert f"not in {other}" in proc.postmaster_refusal(pid, other, exe=exe)
    cluster.pid_ticks = ticks + 1  # as if the PID had been reused since the start
    cluster.kill()
    assert any("(reused)" in r for r in cluster.refused)
    # what runs this build's postgres in this data directory is still ended (by /proc's
    # word on binary and working directory: blocklab.postgres.cluster.server_pids)
    assert cluster.server_pids() == [] and not proc.pid_alive(pid)

"""A real server as the unprivileged user, on a private socket, stopped by PID."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab import proc
from blocklab.model import ENV_PAD_VARIABLE, Variant
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, quote_setting, render_settings, server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State


@pytest.fixture
def cluster(paths: Paths, pg15_system: Installation) -> Iterator[Cluster]:
    c = scratch_cluster(paths, pg15_system, "test-cluster")
    try:
        yield c
    finally:
        remove_cluster(c)


def test_server_user_is_unprivileged() -> None:
    user = server_user()
    assert user.name == "blocklab"
    assert user.uid != 0 and pwd.getpwnam("blocklab").pw_uid == user.uid
    assert server_user() == user  # idempotent


def test_lifecycle(cluster: Cluster) -> None:
    cluster.initdb(data_checksums=False)
    cluster.write_settings({"shared_buffers": "32MB", "cluster_name": "bl test"})
    pid = cluster.start()
    assert [e.ident for e in cluster.state.entries()] == [str(cluster.data_dir)]
    assert cluster.state.entries()[0].info["pid"] == pid
    assert cluster.alive()
    assert _owner_uid(pid) == cluster.user.uid
    settings = cluster.settings_readback()
    assert settings["shared_buffers"] == {"setting": "4096", "unit": "8kB"}
    assert settings["cluster_name"]["setting"] == "bl test"
    assert settings["listen_addresses"]["setting"] == ""
    assert settings["log_checkpoints"]["setting"] == "on"
    assert settings["lc_messages"]["setting"] == "C"
    assert settings["log_line_prefix"]["setting"] == "%n [%p] "
    assert settings["unix_socket_directories"]["setting"] == str(cluster.socket_dir)
    assert settings["data_checksums"]["setting"] == "off"
    assert int(settings["port"]["setting"]) == cluster.port
    assert (cluster.socket_dir / f".s.PGSQL.{cluster.port}").exists()
    assert cluster.psql("SELECT 1+1").strip() == "2"
    assert cluster.version_num() // 10000 == 15
    assert cluster.stop() is True
    assert not proc.pid_alive(pid)
    assert cluster.state.entries() == []
    log = cluster.log_path.read_text()
    assert "checkpoint complete" in log  # log_checkpoints, C messages
    first = log.splitlines()[0].split()
    assert float(first[0]) > 1e9 and first[1] == f"[{pid}]"  # epoch-ms prefix


def test_the_server_environment_is_canonical_whoever_starts_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The postmaster's environment is proc.canonical_env, not the caller's: a long
    variable in the caller's environment (which would move the server's stack) and
    PGOPTIONS (which would change its settings) do not reach it."""
    monkeypatch.setenv("BLOCKLAB_TEST_PADDING", "x" * 4096)
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=77MB")
    cluster.initdb(data_checksums=False)
    cluster.write_settings({})
    pid = cluster.start()
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        seen = dict(e.split("=", 1) for e in raw.decode().split("\0") if "=" in e)
    finally:
        cluster.stop()
    assert "BLOCKLAB_TEST_PADDING" not in seen and "PGOPTIONS" not in seen
    expected = proc.canonical_env(cluster.user)
    assert {k: seen[k] for k in expected} == expected  # pg_ctl may add its own (PGDATA...)
    assert len(raw) < 1024


def test_an_environment_pad_reaches_the_server_and_nothing_else_does(cluster: Cluster) -> None:
    """Variant.environment_pad_bytes: the postmaster (whose backends it forks with its
    environment) gets the canonical environment plus one variable of N bytes."""
    v = Variant(environment_pad_bytes=3000)
    cluster.initdb(data_checksums=False)
    cluster.write_settings({})
    pid = cluster.start(env=v.server_environment())
    try:
        seen = _environ(pid)
    finally:
        cluster.stop()
    assert seen[ENV_PAD_VARIABLE] == "x" * 3000
    expected = proc.canonical_env(cluster.user)
    assert {k: seen[k] for k in expected} == expected
    assert Variant().server_environment() == {}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(e.split("=", 1) for e in raw.decode().split("\0") if "=" in e)


def test_no_tcp_listener(cluster: Cluster) -> None:
    cluster.initdb(data_checksums=True)
    cluster.write_settings({})
    cluster.start()
    ports = _listening_tcp_ports()
    assert cluster.port not in ports
    assert cluster.settings_readback()["data_checksums"]["setting"] == "on"


def test_kill_ends_postmaster_and_backends(cluster: Cluster) -> None:
    cluster.initdb(data_checksums=False)
    cluster.write_settings({})
    pid = cluster.start()
    backends = cluster.server_pids()
    assert pid in backends and len(backends) > 2
    cluster.kill()
    assert cluster.server_pids() == []
    assert all(not proc.pid_alive(p) for p in backends)
    assert cluster.state.entries() == []


def test_stop_after_the_postmaster_was_killed_outside(cluster: Cluster) -> None:
    cluster.initdb(data_checksums=False)
    cluster.write_settings({})
    pid = cluster.start()
    os.kill(pid, 9)
    assert cluster.stop() is True  # nothing left to stop cleanly: gone already
    assert cluster.server_pids() == []


def test_checksum_flags_by_version(paths: Paths) -> None:
    u = server_user()
    st = State(paths.home / "unused.json")
    pg15 = Cluster(Installation.system(15), Path("/x"), socket_dir=Path("/s"), user=u, state=st)
    pg18 = Cluster(
        Installation(Path("/p"), "k", "18.1", 4096, 4096),
        Path("/x"),
        socket_dir=Path("/s"),
        user=u,
        state=st,
    )
    assert pg15._checksum_args(False) == []
    assert pg15._checksum_args(True) == ["--data-checksums"]
    assert pg18._checksum_args(False) == ["--no-data-checksums"]
    assert pg18._checksum_args(True) == ["--data-checksums"]


def test_settings_rendering() -> None:
    assert quote_setting("128MB") == "128MB"
    assert quote_setting("'x'") == "'x'"
    assert quote_setting("a b") == "'a b'"
    assert quote_setting("it's") == "'it''s'"
    assert render_settings({"a": "1"}).endswith("a = 1\n")


def _owner_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


def _listening_tcp_ports() -> set[int]:
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports

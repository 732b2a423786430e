"""A real server and real pgbench on loop file systems: the device sees at least the WAL
PostgreSQL says it wrote; a killed blocklab leaves a server and a mount that
`blocklab cleanup` releases; a memory cap holds the server's processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import first_line

from blocklab import proc
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.proc import child_pids
from blocklab.state import State
from blocklab.storage import Provisioned, cgroup, loopfs, provision
from blocklab.storage.cleanup import release_all
from blocklab.storage.devices import read_stat

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root"),
]
MIB = 1024 * 1024


@pytest.fixture
def state(paths: Paths) -> Iterator[State]:
    st = State(paths.home / f"state-{uuid.uuid4().hex[:8]}.json")
    yield st
    leftovers = release_all(st, only_dead_owners=False)
    assert leftovers == [] and st.entries() == [], f"left behind: {leftovers}"


def _server(inst: Installation, prov: Provisioned, state: State, **kw: object) -> Cluster:
    base = prov.data_dir.parent
    return Cluster(
        inst,
        prov.data_dir,
        socket_dir=base / "sock",
        user=server_user(),
        state=state,
        wal_dir=prov.wal_dir,
        log_path=base / "server.log",
        **kw,  # type: ignore[arg-type]
    )


def _pgbench(inst: Installation, c: Cluster, *args: str) -> proc.Result:
    return proc.run([inst.bin("pgbench"), *c.conn_args(), *args, "postgres"], user=c.user)


def _wal_lsn(c: Cluster) -> str:
    return c.psql("SELECT pg_current_wal_flush_lsn()").strip()


@pytest.mark.parametrize(
    "req",
    [
        StorageRequest(kind="ext4", mount_options=("noatime",)),
        StorageRequest(kind="xfs", wal=StorageRequest(kind="ext4", block_size=1024)),
    ],
    ids=["ext4", "xfs+ext4-wal"],
)
def test_device_bytes_cover_the_wal(
    req: StorageRequest, paths: Paths, state: State, pg15_system: Installation
) -> None:
    name = "pgb" + uuid.uuid4().hex[:6]
    with provision(req, name=name, paths=paths, state=state, min_size_bytes=64 * MIB) as prov:
        c = _server(pg15_system, prov, state)
        try:
            c.initdb(data_checksums=False)
            c.write_settings({"shared_buffers": "16MB", "synchronous_commit": "on"})
            c.start()
            _pgbench(pg15_system, c, "-i", "-s", "1", "-q")
            c.psql("CHECKPOINT")
            wal_dev = prov.devices[-1].name  # the WAL device (the data device without one)
            start, before = _wal_lsn(c), read_stat(wal_dev)
            _pgbench(pg15_system, c, "-n", "-N", "-c", "2", "-T", "3")
            end, after = _wal_lsn(c), read_stat(wal_dev)
        finally:
            c.stop()
        wal_bytes = _lsn_diff(start, end)
        device_bytes = after.delta(before).write_bytes
        assert wal_bytes > 100_000  # pgbench really wrote
        assert device_bytes >= wal_bytes, (device_bytes, wal_bytes)


def _lsn_diff(start: str, end: str) -> int:
    """Bytes between two LSNs written as 'X/Y' (hex high and low 32 bits)."""

    def value(lsn: str) -> int:
        hi, lo = lsn.split("/")
        return (int(hi, 16) << 32) | int(lo, 16)

    return value(end) - value(start)


# -- a killed blocklab with a server on a loop file system ---------------------------------
CHILD = """
import json, sys, time
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.storage import provision
paths = Paths.from_env()
state = State(paths.state_file)
prov = provision(StorageRequest(kind="ext4"), name=sys.argv[1], paths=paths, state=state,
                 min_size_bytes=0)
c = Cluster(Installation.system(15), prov.data_dir, socket_dir=prov.data_dir.parent / "sock",
            user=server_user(), state=state, log_path=prov.data_dir.parent / "server.log")
c.initdb(data_checksums=False)
c.write_settings({"shared_buffers": "16MB"})
pid = c.start()
print(json.dumps({"pid": pid, "mount_point": prov.facts["data"]["mount_point"],
                  "image": prov.facts["data"]["image_path"]}), flush=True)
time.sleep(600)
"""


def test_blocklab_cleanup_after_sigkill_stops_the_server_and_unmounts(
    paths: Paths, pg15_system: Installation, tmp_path: Path
) -> None:
    home = paths.home / ("kill" + uuid.uuid4().hex[:6])  # the killed blocklab's own home
    env = {"BLOCKLAB_HOME": str(home), "BLOCKLAB_CACHE": str(paths.cache)}
    state = State(home / "state.json")
    out = tmp_path / "child.out"
    child = proc.spawn([sys.executable, "-c", CHILD, home.name], stdout_path=out, env=env)
    try:
        try:
            info = json.loads(first_line(out, child.pid, 180.0, "start its server"))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        assert proc.pid_alive(info["pid"])  # the server outlived blocklab
        assert Path(info["mount_point"]).is_mount()
        assert {e.kind for e in state.entries()} == {"server", "mount", "loop"}
        cleanup = [sys.executable, "-m", "blocklab.cli", "cleanup"]
        result = proc.run(cleanup, env=env, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"server PID {info['pid']}" in result.stdout
        assert f"mount {info['mount_point']} (unmounted)" in result.stdout
        assert not proc.pid_alive(info["pid"])
        assert info["mount_point"] not in Path("/proc/mounts").read_text()
        assert loopfs.loops_backed_by(Path(info["image"])) == []
        assert not Path(info["image"]).exists()
        assert state.entries() == []
        assert "nothing to release" in proc.run(cleanup, env=env).stdout
    finally:
        release_all(state, only_dead_owners=False)


# -- a memory cap around a real server ------------------------------------------------
@pytest.mark.skipif(cgroup.available() is None, reason="no memory cgroup controller")
def test_memory_cap_holds_the_server(paths: Paths, state: State, pg15_system: Installation) -> None:
    name = "cap" + uuid.uuid4().hex[:6]
    cap = cgroup.hook(name, 256 * MIB, state=state)
    with provision(
        StorageRequest(kind="ext4"), name=name, paths=paths, state=state, min_size_bytes=0
    ) as prov:
        c = _server(pg15_system, prov, state, memory_hook=cap)
        try:
            c.initdb(data_checksums=False)
            c.write_settings({"shared_buffers": "16MB"})
            pid = c.start()
            members = set(cap.pids())
            assert pid in members and set(child_pids(pid)) <= members
            c.psql("SELECT count(*) FROM generate_series(1, 100000)")
            usage = cap.usage()
            assert usage["memory_limit_bytes"] == 256 * MIB
            assert 0 < usage["memory_peak_bytes"] <= 256 * MIB
        finally:
            c.stop()
            cap.close()


# -- the whole chain: Lab -> storage.provision -> runner -> probes ---------------------
def test_lab_run_on_ext4_counts_device_bytes_above_wal(
    paths: Paths, pg15_system: Installation
) -> None:
    from blocklab.execution.lab import Lab
    from blocklab.model import BuildRequest, DatasetRequest, Variant, WorkloadRequest

    home = paths.home / ("lab" + uuid.uuid4().hex[:6])
    state = State(home / "state.json")
    pg15 = BuildRequest(pg="15")
    v = Variant(
        build=pg15,
        storage=StorageRequest(kind="ext4", mount_options=("noatime",)),
        dataset=DatasetRequest(scale=1),
        workload=WorkloadRequest(clients=2, duration_s=3),
    )
    try:
        with Lab(paths, state, log=lambda _m: None, installations={pg15: pg15_system}) as lab:
            rec = lab.run(v, experiment="t", round_no=1, position=0, raw_dir=home / "raw")
            mounted = [e.ident for e in state.entries() if e.kind == "mount"]
            assert len(mounted) == 1 and Path(mounted[0]).is_mount()
        assert rec.status == "ok", rec.reason
        wal, device = rec.metrics["wal_bytes"], rec.metrics["device_data_write_bytes"]
        assert wal is not None and device is not None and wal > 100_000
        assert device >= wal, (device, wal)
        assert state.entries() == []  # the lab released its storage
        assert not Path(mounted[0]).exists()
    finally:
        release_all(state, only_dead_owners=False)


# Device bytes are named for what they count: a loop file system of blocklab's own is
# `device_<role>`; the disk under a plain directory is the host's, shared: `host_device`.
# Data and WAL in two directories on one disk are one device, never a WAL-only figure.
LOOP, DIR = StorageRequest(kind="ext4"), StorageRequest(kind="dir")
DEVICE_LAYOUTS = {
    "loop-data-loop-wal": (
        StorageRequest(kind="ext4", wal=LOOP),
        {"device_data", "device_wal"},
        "device_wal",
    ),
    "dir-data-dir-wal": (StorageRequest(kind="dir", wal=DIR), {"host_device"}, "host_device"),
    "loop-data-dir-wal": (
        StorageRequest(kind="ext4", wal=DIR),
        {"device_data", "host_device"},
        "host_device",
    ),
}


@pytest.mark.parametrize("layout", sorted(DEVICE_LAYOUTS))
def test_lab_run_names_device_bytes_for_what_they_count(
    paths: Paths, pg15_system: Installation, layout: str
) -> None:
    from blocklab.analysis.metrics import metric_info
    from blocklab.execution.lab import Lab
    from blocklab.model import BuildRequest, DatasetRequest, Variant, WorkloadRequest

    storage, scopes, wal_scope = DEVICE_LAYOUTS[layout]
    home = paths.home / ("lab" + uuid.uuid4().hex[:6])
    state = State(home / "state.json")
    pg15 = BuildRequest(pg="15")
    v = Variant(
        build=pg15,
        storage=storage,
        dataset=DatasetRequest(scale=1),
        workload=WorkloadRequest(clients=2, duration_s=3),
    )
    try:
        with Lab(paths, state, log=lambda _m: None, installations={pg15: pg15_system}) as lab:
            rec = lab.run(v, experiment="t", round_no=1, position=0, raw_dir=home / "raw")
            server_dirs = [c.log_path.parent for c in lab._clusters.values()]
        assert rec.status == "ok", rec.reason
        assert server_dirs and not any(d.exists() for d in server_dirs)  # removed at close
        assert (home / "raw" / "server.log").stat().st_size > 0  # the run's part is kept
    finally:
        release_all(state, only_dead_owners=False)
    m = rec.metrics
    written = {k.removesuffix("_write_bytes") for k in m if k.endswith("_write_bytes")}
    # the server's own counts (by writer, WAL, relation pages in all) beside the devices'
    assert written - {"checkpointer", "bgwriter", "backend", "wal", "relation"} == scopes
    # the WAL reached the device its scope names (the WAL is synced at every commit)
    wal = m["wal_bytes"]
    assert wal is not None and wal > 100_000
    assert (m[f"{wal_scope}_write_bytes"] or 0) >= wal, (m[f"{wal_scope}_write_bytes"], wal)
    devices = rec.provenance["probe_facts"]["devices"]
    assert {d["role"] for d in devices} == {"data", "wal"}
    assert {d["counted_as"] for d in devices} == scopes
    for scope in scopes:
        label = metric_info(f"{scope}_write_bytes_per_xact").label
        shared = scope.startswith("host_device")
        assert ("host device (shared)" in label) == shared, label


# -- `blocklab run` killed mid-run -----------------------------------------------------
EXPERIMENT = """
[experiment]
name = "killed"
description = "a run that is SIGKILLed while pgbench runs"
rounds = 1

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
storage = { kind = "ext4", mount_options = ["noatime"] }
scale = 1
workload = { builtin = "simple-update", query_mode = "prepared" }
clients = 2
duration = 120
"""


@pytest.mark.build
def test_blocklab_run_sigkilled_mid_run_then_cleanup(
    paths: Paths, pg18_8k: Installation, tmp_path: Path
) -> None:
    home = paths.home / ("run" + uuid.uuid4().hex[:6])
    env = {"BLOCKLAB_HOME": str(home), "BLOCKLAB_CACHE": str(paths.cache)}
    state = State(home / "state.json")
    exp = tmp_path / "killed.toml"
    exp.write_text(EXPERIMENT)
    run = proc.spawn(
        [sys.executable, "-m", "blocklab.cli", "run", str(exp), "--results", str(home / "res")],
        stdout_path=tmp_path / "run.out",
        env=env,
    )
    try:
        try:
            server_pid = _wait_for_pgbench(state, run.pid, home)
        finally:
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
        mounts = [e.ident for e in state.entries() if e.kind == "mount"]
        assert len(mounts) == 1 and Path(mounts[0]).is_mount()
        assert proc.pid_alive(server_pid)
        result = proc.run([sys.executable, "-m", "blocklab.cli", "cleanup"], env=env, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert not proc.pid_alive(server_pid)
        assert state.entries() == []
        assert not any(str(home) in line for line in Path("/proc/mounts").read_text().splitlines())
        assert str(home) not in proc.run(["losetup", "-a"]).stdout
    finally:
        release_all(state, only_dead_owners=False)


def _wait_for_pgbench(state: State, run_pid: int, home: Path, timeout_s: float = 600.0) -> int:
    """The server PID once the measured pgbench (on a socket under `home`) is running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.pid_alive(run_pid):
            raise AssertionError("blocklab run ended before pgbench started")
        servers = [e for e in state.entries() if e.kind == "server" and e.info.get("pid")]
        for pid in _pids_named("pgbench"):
            argv = _cmdline(pid)
            if servers and "-T" in argv and any(a.startswith(str(home)) for a in argv):
                return int(servers[0].info["pid"])
        time.sleep(0.5)
    raise AssertionError("pgbench did not start in time")


def _pids_named(comm: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == comm:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []

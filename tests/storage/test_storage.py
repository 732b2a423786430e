"""Real loop devices, file systems and cgroups at tiny sizes (needs root)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import first_line

from blocklab import proc
from blocklab.errors import CommandError, StorageError, UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.storage import Provisioned, capabilities, cgroup, loopfs, provision, validate
from blocklab.storage.cleanup import release_all
from blocklab.storage.devices import device_for_path, read_stat
from blocklab.storage.kinds import CANDIDATE_BLOCK_SIZES, DEFAULT_BLOCK_SIZE, FS_KINDS
from blocklab.workloads import dataset
from blocklab.workloads.dataset import Snapshot

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root"),
]
MIB = 1024 * 1024
FILE_BYTES = 8 * MIB


# -- helpers --------------------------------------------------------------------------
def ours_in_losetup(paths: Paths) -> list[str]:
    out = proc.run(["losetup", "-a"]).stdout
    return [line for line in out.splitlines() if str(paths.home) in line]


def ours_in_mounts(paths: Paths) -> list[str]:
    text = Path("/proc/mounts").read_text()
    return [line for line in text.splitlines() if str(paths.home) in line]


@pytest.fixture
def state(paths: Paths) -> Iterator[State]:
    """A state file per test; whatever it still records at the end is released."""
    st = State(paths.home / f"state-{uuid.uuid4().hex[:8]}.json")
    yield st
    leftovers = release_all(st, only_dead_owners=False)
    assert st.entries() == []
    assert leftovers == [], f"the test left these behind: {leftovers}"


@pytest.fixture
def name() -> str:
    return "t" + uuid.uuid4().hex[:8]


def write_and_fsync(directory: Path, nbytes: int) -> Path:
    path = directory / "payload"
    with open(path, "wb") as f:
        f.write(os.urandom(nbytes))
        f.flush()
        os.fsync(f.fileno())
    return path


def probed(paths: Paths, fstype: str) -> list[int]:
    """The block sizes this machine's kernel mounts for `fstype` (the probe's answer)."""
    return capabilities.supported_block_sizes(paths)[fstype]


def require_block_size(paths: Paths, req: StorageRequest) -> None:
    """Skip, with the reason, a case this machine's kernel cannot mount."""
    size = req.block_size or DEFAULT_BLOCK_SIZE
    supported = probed(paths, req.kind)
    if size not in supported:
        pytest.skip(f"{req.kind} does not mount {size}-byte blocks on {os.uname().release}")


def written_while(device: str, action: object) -> int:
    before = read_stat(device)
    assert callable(action)
    action()
    return read_stat(device).delta(before).write_bytes


# -- provision/release of each kind --------------------------------------------------------
KINDS = [
    StorageRequest(kind="ext4", mount_options=("noatime", "data=writeback", "nobarrier")),
    StorageRequest(kind="ext4", block_size=1024, mount_options=("data=journal",)),
    StorageRequest(kind="xfs", block_size=4096),
    StorageRequest(kind="xfs", block_size=16384, mount_options=("noatime",)),  # > page size
    StorageRequest(kind="btrfs", mount_options=("nodatacow",)),
    StorageRequest(kind="btrfs", mount_options=("compress=zstd",)),
]


@pytest.mark.parametrize("req", KINDS, ids=[r.label() for r in KINDS])
def test_loop_fs_counts_the_bytes_written(
    req: StorageRequest, paths: Paths, state: State, name: str
) -> None:
    require_block_size(paths, req)
    validate(req, paths=paths)
    prov = provision(req, name=name, paths=paths, state=state, min_size_bytes=32 * MIB)
    try:
        _check_fresh_fs(prov, req, state)
        dev = prov.devices[0]
        assert (dev.role, dev.shared) == ("data", False) and dev.name.startswith("loop")
        written = written_while(dev.name, lambda: write_and_fsync(prov.data_dir, FILE_BYTES))
        assert written >= FILE_BYTES
    finally:
        prov.release()
    prov.release()  # idempotent
    _check_released(prov, paths, state)


def _check_fresh_fs(prov: Provisioned, req: StorageRequest, state: State) -> None:
    facts = prov.facts["data"]
    assert prov.data_dir.is_dir() and list(prov.data_dir.iterdir()) == []
    assert prov.data_dir.stat().st_mode & 0o777 == 0o755
    assert prov.wal_dir is None
    assert facts["loop_direct_io"] is True
    assert "-L blocklab" in facts["mkfs_command"]
    assert str(req.block_size or 4096) in facts["mkfs_command"]
    effective = facts["mount_options_effective"].split(",")
    for opt in req.mount_options:
        if opt != "nobarrier":  # the kernel does not echo nobarrier for ext4
            assert any(e.startswith(opt) for e in effective), (opt, effective)
    if req.kind == "ext4":
        assert f"Block size:               {req.block_size or 4096}" in facts["fs_info"]
        # inode tables zeroed by mkfs: no ext4lazyinit writes inside the first runs
        groups = _ext4_groups(prov.devices[0].name)
        assert groups and all("ITABLE_ZEROED" in g for g in groups), groups[:3]
    if req.kind == "xfs":
        assert f"bsize={req.block_size}" in facts["fs_info"]
    kinds = sorted(e.kind for e in state.entries())
    assert kinds == ["loop", "mount"]


def _ext4_groups(device: str) -> list[str]:
    out = proc.run(["dumpe2fs", f"/dev/{device}"], timeout_s=60).stdout
    return [line for line in out.splitlines() if re.match(r"Group \d+:", line)]


def _check_released(prov: Provisioned, paths: Paths, state: State) -> None:
    facts = prov.facts["data"]
    assert state.entries() == []
    assert not Path(facts["image_path"]).exists()
    assert not Path(facts["mount_point"]).exists()
    assert loopfs.loops_backed_by(Path(facts["image_path"])) == []
    assert not any(facts["image_path"] in line for line in ours_in_losetup(paths))
    assert ours_in_mounts(paths) == []


def test_dir_kind_counts_the_shared_host_device(paths: Paths, state: State, name: str) -> None:
    req = StorageRequest(kind="dir")
    validate(req, paths=paths)
    prov = provision(req, name=name, paths=paths, state=state, min_size_bytes=0)
    try:
        (dev,) = prov.devices
        assert dev.shared and "other activity" in dev.note
        assert dev.name == device_for_path(paths.home)
        assert prov.data_dir.is_relative_to(paths.work) and list(prov.data_dir.iterdir()) == []
        written = written_while(dev.name, lambda: write_and_fsync(prov.data_dir, FILE_BYTES))
        assert written >= FILE_BYTES
    finally:
        prov.release()
    assert not prov.data_dir.exists()
    assert state.entries() == []


def test_wal_on_its_own_device(paths: Paths, state: State, name: str) -> None:
    req = StorageRequest(kind="xfs", wal=StorageRequest(kind="ext4", mount_options=("noatime",)))
    validate(req, paths=paths)
    prov = provision(req, name=name, paths=paths, state=state, min_size_bytes=32 * MIB)
    try:
        data, wal = prov.devices
        assert (data.role, wal.role) == ("data", "wal") and data.name != wal.name
        assert prov.wal_dir is not None and prov.wal_dir.is_dir()
        assert prov.facts["wal"]["fstype"] == "ext4" and prov.facts["data"]["fstype"] == "xfs"
        before = read_stat(data.name)
        wal_written = written_while(wal.name, lambda: write_and_fsync(prov.wal_dir, FILE_BYTES))
        assert wal_written >= FILE_BYTES
        assert read_stat(data.name).delta(before).write_bytes < FILE_BYTES
    finally:
        prov.release()
    assert state.entries() == [] and ours_in_mounts(paths) == []


def test_size_too_small_for_the_dataset(paths: Paths, state: State, name: str) -> None:
    req = StorageRequest(kind="ext4", size_mb=64)
    validate(req, paths=paths)
    with pytest.raises(UserError, match="storage.size_mb"):
        provision(req, name=name, paths=paths, state=state, min_size_bytes=100 * MIB)
    assert state.entries() == []


def test_failed_mount_releases_what_was_made(paths: Paths, state: State, name: str) -> None:
    # commit=abc passes neither validate (not run here) nor the kernel: provision must undo
    req = StorageRequest(kind="ext4", mount_options=("commit=abc",))
    with pytest.raises(CommandError, match="mount"):
        provision(req, name=name, paths=paths, state=state, min_size_bytes=0)
    assert state.entries() == []
    image = paths.work / "images" / f"{name}-data.img"
    assert loopfs.loops_backed_by(image) == [] and not image.exists()
    assert not (paths.work / "mnt" / f"{name}-data").exists()


# -- validation -----------------------------------------------------------------------
BAD = [
    (StorageRequest(kind="ext4", mount_options=("data=fast",)), "storage.mount_options"),
    (StorageRequest(kind="xfs", mount_options=("nobarrier",)), "storage.mount_options"),
    (StorageRequest(kind="ext4", mkfs_options=("-b", "2048")), "storage.mkfs_options"),
    (StorageRequest(kind="xfs", size_mb=100), "storage.size_mb: xfs needs at least 300"),
    (StorageRequest(kind="ext4", path="/dev/vda"), "storage.path"),
    (StorageRequest(kind="dir", block_size=4096), "storage.block_size"),
    (StorageRequest(kind="dir", path="relative/dir"), "storage.path"),
    (StorageRequest(kind="dir", path="/dev/shm/x"), "storage.path"),
    (StorageRequest(kind="device", path="/dev/vda"), "storage.erase_confirmed"),
    (StorageRequest(kind="device", path="/etc/hostname", erase_confirmed=True), "not a block"),
    (StorageRequest(kind="device"), "storage.path"),
    (StorageRequest(kind="ext4", erase_confirmed=True), "storage.erase_confirmed"),
    (StorageRequest(kind="ext4", memory_limit_bytes=1024), "storage.memory_limit_bytes"),
    (StorageRequest(wal=StorageRequest(kind="ext4", block_size=3000)), "storage.wal.block_size"),
    (StorageRequest(wal=StorageRequest(memory_limit_bytes=1 << 30)), "storage.wal.memory_limit"),
]


@pytest.mark.parametrize(("req", "message"), BAD, ids=[m for _, m in BAD])
def test_validation_refuses(
    req: StorageRequest, message: str, paths: Paths, tmp_path: Path
) -> None:
    # a home of its own: the session's work directory holds other tests' live servers
    # (the PostgreSQL results store's), whose files change meanwhile (a CI run failed so)
    own = Paths(home=tmp_path / "home", cache=paths.cache, results=tmp_path / "results")
    own.work.mkdir(parents=True)
    before = _tree(own.work)
    with pytest.raises(UserError) as e:
        validate(req, paths=own)
    assert message in str(e.value)
    assert _tree(own.work) == before  # validate creates nothing


def _tree(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize("fstype", FS_KINDS)
def test_validation_allows_exactly_what_the_probe_mounted(fstype: str, paths: Paths) -> None:
    supported = probed(paths, fstype)
    allowed = f"storage.block_size: {fstype} allows {', '.join(map(str, supported))} here"
    for size in supported:
        validate(StorageRequest(kind=fstype, block_size=size), paths=paths)
    for size in [3000, *(b for b in CANDIDATE_BLOCK_SIZES[fstype] if b not in supported)]:
        with pytest.raises(UserError) as e:
            validate(StorageRequest(kind=fstype, block_size=size), paths=paths)
        assert allowed in str(e.value) and f"not {size}" in str(e.value)


def test_probe_is_remembered(paths: Paths) -> None:
    validate(StorageRequest(kind="ext4"), paths=paths)
    cached = json.loads((paths.cache / "storage-capabilities.json").read_text())
    assert cached["block_sizes"] == capabilities.supported_block_sizes(paths)
    assert cached["key"]["kernel"] == os.uname().release
    # Linux mounts ext4 at every power of two from 1 kB up to the page size
    page = os.sysconf("SC_PAGE_SIZE")
    assert [b for b in cached["block_sizes"]["ext4"] if b <= page] == [
        b for b in CANDIDATE_BLOCK_SIZES["ext4"] if b <= page
    ]


def test_the_largest_probed_block_size_really_mounts(paths: Paths, state: State, name: str) -> None:
    """xfs blocks above the page size exist on recent kernels only: take the probe's word
    and check it on a real file system (skipped where the kernel stops at the page size)."""
    page = os.sysconf("SC_PAGE_SIZE")
    largest = max(probed(paths, "xfs"), default=0)
    if largest <= page:
        pytest.skip(f"xfs mounts no block larger than the {page}-byte page on this kernel")
    req = StorageRequest(kind="xfs", block_size=largest)
    with provision(req, name=name, paths=paths, state=state, min_size_bytes=0) as prov:
        assert f"bsize={largest}" in prov.facts["data"]["fs_info"]


# -- real block devices ----------------------------------------------------------------
@pytest.fixture
def spare_device(paths: Paths, state: State, name: str) -> Iterator[str]:
    """A blank loop device that stands in for a real disk."""
    image = paths.work / "images" / f"{name}-spare.img"
    loopfs.create_image(image, 64 * MIB, state)
    try:
        yield loopfs.attach(image, state)
    finally:
        loopfs.detach_and_delete(image, state)


def test_device_needs_confirmation_and_is_marked(
    spare_device: str, paths: Paths, state: State, name: str
) -> None:
    with pytest.raises(UserError, match="erase_confirmed"):
        validate(StorageRequest(kind="device", path=spare_device), paths=paths)
    req = StorageRequest(kind="device", path=spare_device, erase_confirmed=True)
    validate(req, paths=paths)  # blank: fine
    with provision(req, name=name, paths=paths, state=state, min_size_bytes=0) as prov:
        assert prov.devices[0].name == Path(spare_device).name
        assert prov.facts["data"]["fstype"] == "ext4"
        written = written_while(
            prov.devices[0].name, lambda: write_and_fsync(prov.data_dir, FILE_BYTES)
        )
        assert written >= FILE_BYTES
        with pytest.raises(UserError, match="is mounted at"):
            validate(req, paths=paths)
    validate(req, paths=paths)  # blocklab's own file system: may be erased again
    assert [e.kind for e in state.entries()] == ["loop"]  # only the spare's own entry


def test_device_gets_the_file_system_it_asks_for(paths: Paths, state: State, name: str) -> None:
    image = paths.work / "images" / f"{name}-spare-xfs.img"
    loopfs.create_image(image, 320 * MIB, state)  # xfs wants 300 MB at least
    try:
        spare = loopfs.attach(image, state)
        req = StorageRequest(kind="device", path=spare, erase_confirmed=True, fs="xfs")
        validate(req, paths=paths)
        with provision(req, name=name, paths=paths, state=state, min_size_bytes=0) as prov:
            assert prov.facts["data"]["fstype"] == "xfs"
            assert f" {prov.data_dir.parent} xfs " in Path("/proc/mounts").read_text()
    finally:
        loopfs.detach_and_delete(image, state)
    with pytest.raises(UserError, match="storage.fs: only for kind 'device'"):
        validate(StorageRequest(kind="ext4", fs="xfs"), paths=paths)


def test_device_with_foreign_file_system_is_refused(spare_device: str, paths: Paths) -> None:
    proc.run(["mkfs.ext4", "-q", "-F", "-L", "family-photos", spare_device])
    req = StorageRequest(kind="device", path=spare_device, erase_confirmed=True)
    with pytest.raises(UserError, match="ext4 file system labelled 'family-photos'"):
        validate(req, paths=paths)


def test_mounted_loop_fs_is_refused_as_a_device(paths: Paths, state: State, name: str) -> None:
    prov = provision(
        StorageRequest(kind="ext4"), name=name, paths=paths, state=state, min_size_bytes=0
    )
    try:
        req = StorageRequest(kind="device", path=prov.facts["data"]["device"], erase_confirmed=True)
        with pytest.raises(UserError, match="is mounted at"):
            validate(req, paths=paths)
        with pytest.raises(UserError, match="is mounted at"):  # provision re-checks
            provision(req, name=name + "x", paths=paths, state=state, min_size_bytes=0)
    finally:
        prov.release()


# -- a killed blocklab -----------------------------------------------------------------
CHILD = """
import json, sys, time
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.storage import provision
paths = Paths.from_env()
prov = provision(StorageRequest(kind=sys.argv[1]), name=sys.argv[2], paths=paths,
                 state=State(paths.home / sys.argv[3]), min_size_bytes=0)
print(json.dumps({k: str(v) for k, v in prov.facts["data"].items()}), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", ["ext4", "xfs"])
def test_sigkill_then_cleanup_leaves_nothing(
    kind: str, paths: Paths, state: State, name: str, tmp_path: Path
) -> None:
    out = tmp_path / "child.out"
    child = proc.spawn(
        [sys.executable, "-c", CHILD, kind, name, state.path.name],
        stdout_path=out,
        env={"BLOCKLAB_HOME": str(paths.home), "BLOCKLAB_CACHE": str(paths.cache)},
    )
    try:
        facts = json.loads(first_line(out, child.pid, 120.0, "provision"))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert Path(facts["mount_point"]).is_mount()
    assert loopfs.loops_backed_by(Path(facts["image_path"])) == [facts["loop_device"]]
    assert {e.owner_pid for e in state.entries()} == {child.pid}
    released = release_all(state)
    assert any(r.startswith(f"mount {facts['mount_point']} (unmounted)") for r in released)
    assert any(facts["loop_device"] in r for r in released)
    assert state.entries() == []
    assert loopfs.loops_backed_by(Path(facts["image_path"])) == []
    assert facts["mount_point"] not in Path("/proc/mounts").read_text()
    assert not Path(facts["image_path"]).exists()


def test_release_all_spares_a_live_owner_and_a_reused_pid(paths: Paths, state: State) -> None:
    sleeper = proc.spawn(["sleep", "60"], stdout_path=paths.home / "sleeper.out")
    try:
        # a server entry whose PID now belongs to something that is not that postgres
        state.add("server", "/nonexistent/data", data_dir="/nonexistent/data", pid=sleeper.pid)
        assert release_all(state) == []  # the owner (this process) is alive
        [line] = release_all(state, only_dead_owners=False)
        assert line.startswith("server on /nonexistent/data (PID ") and "not signalled" in line
        assert proc.pid_alive(sleeper.pid)  # not a postgres on that data dir: untouched
    finally:
        proc.terminate(sleeper.pid)


# -- memory caps and the page cache ----------------------------------------------------
@pytest.mark.skipif(cgroup.available() is None, reason="no memory cgroup controller")
def test_memory_cap_holds_a_process_and_limits_it(paths: Paths, state: State, name: str) -> None:
    cap = cgroup.MemoryCap(64 * MIB, name, state)
    path = cap.create()
    try:
        assert [e.kind for e in state.entries()] == ["cgroup"]
        sleeper = proc.spawn(["sleep", "60"], stdout_path=paths.home / f"{name}.out")
        try:
            cap.add_pid(sleeper.pid)
            assert cap.pids() == [sleeper.pid]
            assert str(path).endswith(_cgroup_of(sleeper.pid))
            assert cap.usage()["memory_limit_bytes"] == 64 * MIB
        finally:
            proc.terminate(sleeper.pid)
        hog = "b = b'x' * (256 << 20); print(len(b))"
        r = proc.run([*cap.argv_prefix(), sys.executable, "-c", hog], check=False)
        assert r.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), r
        fits = proc.run([*cap.argv_prefix(), sys.executable, "-c", "print(len(b'x' * (8 << 20)))"])
        assert fits.stdout.strip() == str(8 << 20)
    finally:
        cap.close()
    assert not path.exists() and state.entries() == []


def _cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, p = line.split(":", 2)
        if "memory" in controllers.split(","):
            return p
    raise AssertionError("no memory cgroup line")


def test_drop_caches_empties_the_page_cache(paths: Paths, state: State, name: str) -> None:
    with provision(
        StorageRequest(kind="ext4"), name=name, paths=paths, state=state, min_size_bytes=0
    ) as prov:
        f = write_and_fsync(prov.data_dir, FILE_BYTES)
        f.read_bytes()
        assert _cached_bytes(f) > 0
        cgroup.drop_caches()
        assert _cached_bytes(f) == 0
        dev = prov.devices[0].name
        read = read_stat(dev)
        f.read_bytes()
        assert read_stat(dev).delta(read).read_bytes >= FILE_BYTES  # read from the device


def _cached_bytes(path: Path) -> int:
    out = proc.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)]).stdout
    return int(out.split()[0])


def test_provision_refuses_an_occupied_mount_point(paths: Paths, state: State, name: str) -> None:
    with provision(
        StorageRequest(kind="ext4"), name=name, paths=paths, state=state, min_size_bytes=0
    ):
        with pytest.raises(StorageError, match="already a mount point"):
            provision(
                StorageRequest(kind="ext4"), name=name, paths=paths, state=state, min_size_bytes=0
            )
        assert sorted(e.kind for e in state.entries()) == ["loop", "mount"]


# -- restores never clone --------------------------------------------------------------
def shared_extents(path: Path) -> int:
    """Extents filefrag flags as shared (a clone's)."""
    out = proc.run(["filefrag", "-v", str(path)]).stdout
    return sum(1 for line in out.splitlines() if "shared" in line)


@pytest.mark.parametrize("kind", ["xfs", "btrfs"])
def test_restore_copies_where_cp_would_clone(
    kind: str, paths: Paths, state: State, name: str
) -> None:
    """A restore never leaves the target's blocks shared with the snapshot's (issue 33):
    on xfs and btrfs, where `cp -a` of coreutils 9 clones by default, a snapshot and a
    target on one file system (a `dir` storage on such a host) get a real copy."""
    req = StorageRequest(kind=kind)  # type: ignore[arg-type]
    prov = provision(req, name=name, paths=paths, state=state, min_size_bytes=64 * MIB)
    try:
        root = prov.data_dir / "snap"
        (root / "data/base").mkdir(parents=True)
        (root / "data/base/16384").write_bytes(os.urandom(4 * MIB))
        proc.run(["sync", "-f", str(root)])
        clone = prov.data_dir / "clone"
        proc.run(["cp", "-a", "--", str(root / "data/base/16384"), str(clone)])
        assert shared_extents(clone) > 0  # the test sees a clone when there is one
        snap = Snapshot(
            key="k", root=root, has_wal=False, scale=1, fillfactor=100, init_s=1.0,
            pgbench_init_s=1.0, snapshot_s=1.0, size_bytes=0,
        )  # fmt: skip
        target = prov.data_dir / "target"
        for mode in ("full", "delta"):
            (target / "base/16384").parent.mkdir(parents=True, exist_ok=True)
            (target / "base/16384").unlink(missing_ok=True)  # copied again by the delta
            assert dataset.restore(snap, target).mode == mode
            assert dataset.tree_digest(target) == dataset.tree_digest(snap.data)
            assert shared_extents(target / "base/16384") == 0
    finally:
        prov.release()

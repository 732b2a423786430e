"""Datasets: initialise once (initdb + the workload driver's load, e.g. `pgbench -i`,
`sysbench ... prepare`, `go-tpc tpcc prepare`), snapshot the stopped data directory,
restore the snapshot before every run so that every run starts from identical bytes.

A snapshot lives in `paths.work/datasets/<key>/` with `data/` (and `wal/` when pg_wal is
separate) and `meta.json`; the completion marker `COMPLETE` is written last, so a
snapshot directory without it is garbage and is rebuilt. Copies are made with `cp -a`
(ownership, permissions, symlinks preserved); rsync is not assumed. A restore into a
target that holds this process's previous restore of the same snapshot copies only the
files that differ from the snapshot (blocklab.workloads.restore_delta); restores never
clone (`--reflink=never`): the target's blocks are its own, whatever the file system.

The load, for every driver alike (blocklab.workloads.base): the driver's database is
created unless it is "postgres"; the table fillfactor is set on every table the load
creates (blocklab.workloads.fillfactor's event trigger) unless the driver's own load sets
it (pgbench -F); the load is the driver's own `load(cluster, request)` when it has one
(the queries driver's pg_restore of a user's dump), then its init commands; the index
fillfactor, when given, is set on every B-tree index and applied with REINDEX; VACUUM
(ANALYZE) when the driver asks for it; the database and its tables are handed to the
workload role (blocklab.workloads.role), which the runs connect as. Then every table's
and index's reloptions and bytes are read from the catalogue into the snapshot's meta.
The load's commands run as the server's unprivileged OS user
(blocklab.workloads.execution.run_driver), never as root. The server runs the load with
PostgreSQL's defaults, but for the variant's settings that shape what a load stores
(model.LOAD_SETTINGS: default_toast_compression, default_statistics_target), which are
also part of the dataset's key.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from blocklab import faults, proc
from blocklab.model import DatasetRequest
from blocklab.paths import Paths, ensure_dir, safe_remove_tree, tree_size_bytes
from blocklab.postgres.cluster import Cluster, clear_dir, private_dir
from blocklab.postgres.sources import file_lock
from blocklab.workloads import drivers, fillfactor, restore_delta, role
from blocklab.workloads.base import WorkloadDriver, endpoint
from blocklab.workloads.execution import run_driver

MARKER = "COMPLETE"
META = "meta.json"


@dataclass(frozen=True)
class Snapshot:
    key: str
    root: Path
    has_wal: bool
    scale: int
    fillfactor: int
    init_s: float  # initdb + start + pgbench -i + stop
    pgbench_init_s: float  # pgbench -i alone
    snapshot_s: float  # copying the stopped data directory into the snapshot
    size_bytes: int
    driver: str = drivers.DEFAULT
    options: dict[str, Any] = field(default_factory=dict)  # the driver's size keys
    index_fillfactor: int | None = None
    # every table and index after the load: name, kind, reloptions, bytes
    relations: list[dict[str, Any]] = field(default_factory=list)
    # the settings the load ran with (model.LOAD_SETTINGS of the variant; else defaults)
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def table_bytes(self) -> int:
        return sum(r["bytes"] for r in self.relations if r["kind"] == "table")

    @property
    def index_bytes(self) -> int:
        return sum(r["bytes"] for r in self.relations if r["kind"] == "index")

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def wal(self) -> Path | None:
        return self.root / "wal" if self.has_wal else None


@dataclass(frozen=True)
class Restored:
    restore_s: float  # making the target equal the snapshot (removing, copying)
    sync_s: float  # flushing the copied bytes to the device
    mode: str = "full"  # "full": cleared and copied whole; "delta": only what differed
    files_copied: int = 0  # files and symlinks that differed from the snapshot's
    bytes_copied: int = 0  # their bytes
    bytes_written: int = 0  # what was written of them (a patched file: its differing blocks)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "files_copied": self.files_copied,
            "bytes_copied": self.bytes_copied,
            "bytes_written": self.bytes_written,
        }


def snapshot_root(paths: Paths, key: str) -> Path:
    return paths.work / "datasets" / key


def lock(
    paths: Paths, key: str, on_wait: Callable[[], None] | None = None
) -> AbstractContextManager[None]:
    """An flock for making the dataset `key`: hold it around load() and create(), so that
    a second process waits for the first and then finds the snapshot complete (and never
    removes one that is being made)."""
    return file_lock(paths.work / "datasets" / f".{key}.lock", on_wait)


def load(paths: Paths, key: str) -> Snapshot | None:
    """The complete snapshot for `key`, or None (an incomplete one is removed)."""
    root = snapshot_root(paths, key)
    if not (root / MARKER).exists():
        safe_remove_tree(root, [paths.work])
        return None
    meta = json.loads((root / META).read_text())
    return Snapshot(root=root, **meta)


def create(
    cluster: Cluster,
    req: DatasetRequest,
    *,
    paths: Paths,
    key: str,
    wal_segsize_mb: int,
    data_checksums: bool,
    driver: WorkloadDriver | None = None,
    settings: Mapping[str, str] | None = None,
) -> Snapshot:
    """initdb, start, the driver's load (see the module's docstring; the dataset's driver
    when None) with `settings` (model.Variant.load_settings; else PostgreSQL's defaults),
    stop, snapshot. The cluster's data (and WAL) directories are emptied
    first; the server is stopped on any failure."""
    driver = driver or drivers.for_dataset(req)
    root = snapshot_root(paths, key)
    safe_remove_tree(root, [paths.work])
    cluster.remove_data()
    t0 = time.monotonic()
    cluster.initdb(wal_segsize_mb=wal_segsize_mb, data_checksums=data_checksums)
    cluster.write_settings(dict(settings or {}))
    try:
        cluster.start()
        t1 = time.monotonic()
        faults.step("dataset_load")
        relations = _load(cluster, driver, req)
        pgbench_init_s = time.monotonic() - t1
    finally:
        cluster.stop()
    init_s = time.monotonic() - t0
    t2 = time.monotonic()
    faults.step("snapshot")
    ensure_dir(root)
    copy_tree(cluster.data_dir, root / "data")
    if cluster.wal_dir is not None:
        copy_tree(cluster.wal_dir, root / "wal")
    snap = Snapshot(
        key=key,
        root=root,
        has_wal=cluster.wal_dir is not None,
        scale=req.scale,
        fillfactor=req.fillfactor,
        init_s=init_s,
        pgbench_init_s=pgbench_init_s,
        snapshot_s=time.monotonic() - t2,
        size_bytes=tree_size_bytes(root),
        driver=req.driver,
        options=dict(req.options),
        index_fillfactor=req.index_fillfactor,
        relations=relations,
        settings=dict(settings or {}),
    )
    _write_meta(snap)
    return snap


def _load(cluster: Cluster, driver: WorkloadDriver, req: DatasetRequest) -> list[dict[str, Any]]:
    """The driver's load into the running cluster, with fillfactors; the relations."""
    db = driver.database
    if db != "postgres":
        cluster.psql(f'CREATE DATABASE "{db}"')
    trigger = not driver.sets_fillfactor and req.fillfactor < 100
    if trigger:
        cluster.psql(fillfactor.install_trigger_sql(req.fillfactor), dbname=db)
    own_load = getattr(driver, "load", None)  # a driver whose load needs the cluster
    if own_load is not None:
        own_load(cluster, req)
    superuser = endpoint(cluster, role=cluster.user.name)
    for argv in driver.init_commands(cluster.inst, superuser, req):
        run_driver(argv, timeout_s=24 * 3600)
    if trigger:
        cluster.psql(fillfactor.drop_trigger_sql(), dbname=db)
    if req.index_fillfactor is not None:
        sql = fillfactor.index_fillfactor_sql(req.index_fillfactor)
        cluster.psql(sql, dbname=db, timeout_s=24 * 3600)
    if driver.vacuum_after_load:
        cluster.psql("VACUUM (ANALYZE)", dbname=db, timeout_s=24 * 3600)
    hand_over(cluster, driver)
    return fillfactor.parse_relations(cluster.psql(fillfactor.RELATIONS_SQL, dbname=db))


def hand_over(cluster: Cluster, driver: WorkloadDriver) -> None:
    """Give the driver's database and its tables to the workload role (made if missing):
    after the load, and before every run for a snapshot made before the role existed."""
    cluster.psql(role.handover_sql(), dbname=driver.database)


def _write_meta(snap: Snapshot) -> None:
    meta: dict[str, Any] = asdict(snap)
    meta.pop("root")
    (snap.root / META).write_text(json.dumps(meta, indent=1))
    (snap.root / MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")


def restore(snapshot: Snapshot, data_dir: Path, wal_dir: Path | None = None) -> Restored:
    """Make `data_dir` (and `wal_dir`) byte-identical to the snapshot; the server must be
    stopped. When the target holds this process's previous restore of the same snapshot,
    only what differs from the snapshot is copied (blocklab.workloads.restore_delta);
    otherwise it is cleared and copied whole. The target's file system is synced
    afterwards, so that no copied byte is flushed during the measurement."""
    if (wal_dir is None) != (snapshot.wal is None):
        raise ValueError("the snapshot and the target disagree about a separate WAL directory")
    pairs = [(snapshot.data, data_dir)]
    if wal_dir is not None and snapshot.wal is not None:
        pairs.append((snapshot.wal, wal_dir))
    t0 = time.monotonic()
    done = [_restore_tree(source, target) for source, target in pairs]
    if wal_dir is not None:
        _point_pg_wal(data_dir, wal_dir)
    t1 = time.monotonic()
    for _source, target in pairs:
        proc.run(["sync", "-f", str(target)], timeout_s=3600)
    sync_s = time.monotonic() - t1
    for source, target in pairs:
        restore_delta.remember(source, target)
    return Restored(
        restore_s=t1 - t0,
        sync_s=sync_s,
        mode="delta" if all(d[0] == "delta" for d in done) else "full",
        files_copied=sum(d[1] for d in done),
        bytes_copied=sum(d[2] for d in done),
        bytes_written=sum(d[3] for d in done),
    )


def forget_restore(target: Path) -> None:
    """The next restore into `target` copies the snapshot whole."""
    restore_delta.forget(target)


def _restore_tree(source: Path, target: Path) -> tuple[str, int, int, int]:
    """(mode, files copied, bytes copied, bytes written) of making `target` equal
    `source`."""
    memory = restore_delta.recall(source, target)
    restore_delta.forget(target)  # until this restore is complete and synced
    private_dir(target, None)
    src = restore_delta.scan(source)
    if memory is not None:
        dst = restore_delta.scan(target)
        plan = restore_delta.plan(src, dst, memory)
        in_place = restore_delta.rewrites_in_place(target)
        written = restore_delta.apply(plan, source, target, dst, in_place=in_place)
        return "delta", len(plan.copy), plan.copy_bytes, written
    clear_dir(target)
    proc.run([*restore_delta.CP, "--", f"{source}/.", f"{target}/"], timeout_s=24 * 3600)
    st = source.stat()
    os.chown(target, st.st_uid, st.st_gid)
    os.chmod(target, st.st_mode & 0o7777)
    files = [st for st in src.values() if not stat.S_ISDIR(st.st_mode)]
    size = sum(st.st_size for st in files if stat.S_ISREG(st.st_mode))
    return "full", len(files), size, size


def _point_pg_wal(data_dir: Path, wal_dir: Path) -> None:
    link = data_dir / "pg_wal"
    if link.is_symlink() and Path(os.readlink(link)) == wal_dir:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(wal_dir)
    st = wal_dir.stat()
    os.chown(link, st.st_uid, st.st_gid, follow_symlinks=False)


def copy_tree(source: Path, target: Path) -> None:
    """cp -a source target (target must not exist)."""
    proc.run(["cp", "-a", "--", str(source), str(target)], timeout_s=24 * 3600)


def tree_digest(path: Path) -> str:
    """SHA-256 over every entry's relative path, mode and owner, every file's bytes and
    every symlink's target, in sorted order: equal digests mean identical trees (empty
    directories included)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files + dirs):
            full = os.path.join(root, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, path)
            h.update(f"{rel}\0{st.st_mode:o}\0{st.st_uid}\0{st.st_gid}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(full).encode())
            elif not stat.S_ISDIR(st.st_mode):
                with open(full, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest()

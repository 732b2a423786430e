"""The lab: everything an experiment's runs need, made once and released at the end.

`Lab(paths, state)` is a context manager. It installs builds lazily (blocklab.postgres.build, or
an explicit Installation per BuildRequest), provisions each StorageRequest once
(blocklab.storage.provision), makes each dataset once (blocklab.workloads.dataset) and runs
variants (blocklab.execution.runner). On exit, normal or not, it stops every server it started
and releases every storage it provisioned.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from blocklab import storage
from blocklab.errors import BlocklabError, StorageError, UserError
from blocklab.execution import interleaved, run_record, run_state, runner
from blocklab.execution.controls import RunControls
from blocklab.experiment_file.design import RunDesign
from blocklab.model import BuildRequest, StorageRequest, Variant
from blocklab.paths import Paths, ensure_dir, safe_remove_tree
from blocklab.postgres import settings_catalogue, settings_policy
from blocklab.postgres.cluster import Cluster, open_home
from blocklab.postgres.installation import Installation
from blocklab.postgres.settings_policy import Catalogue
from blocklab.proc import User
from blocklab.state import State
from blocklab.storage import cgroup
from blocklab.store import RunRecord
from blocklab.workloads import dataset, drivers, sizing
from blocklab.workloads.dataset import Snapshot

_DEFAULT = object()


class ProvisionedLike(Protocol):
    @property
    def data_dir(self) -> Path: ...
    @property
    def wal_dir(self) -> Path | None: ...
    @property
    def devices(self) -> Sequence[Any]: ...
    @property
    def facts(self) -> Mapping[str, Any]: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class DatasetInfo:
    key: str
    build_key: str
    scale: int
    fillfactor: int
    made_now: bool
    init_s: float
    pgbench_init_s: float
    snapshot_s: float
    size_bytes: int
    description: str = ""  # the driver's load, e.g. "pgbench -i -s 10 -F 100"
    table_bytes: int = 0  # every table of the dataset, from the catalogue after the load
    index_bytes: int = 0


def storage_name(req: StorageRequest, instance: str = "") -> str:
    """A storage's name: its kind and request digest, and the Lab instance's token, so
    that two experiments running at once never share a mount, a loop image, a data
    directory or a server (each process provisions its own)."""
    base = f"{req.kind}-{req.digest(8)}"
    return f"{base}-{instance}" if instance else base


def instance_token() -> str:
    """This process's PID and 4 random hex digits (a reused PID stays distinct)."""
    return f"{os.getpid()}-{secrets.token_hex(2)}"


class Lab:
    def __init__(
        self,
        paths: Paths,
        state: State,
        *,
        log: Callable[[str], None] = print,
        installations: Mapping[BuildRequest, Installation] | None = None,
        instrumentation: Any = _DEFAULT,
        references: Mapping[str, Variant] | None = None,
        variants: Sequence[Variant] = (),
        controls: RunControls | None = None,
    ):
        self.paths = paths
        self.state = state
        self.log = log
        self._installs: dict[BuildRequest, Installation] = dict(installations or {})
        self._instrumentation = instrumentation
        self._references = dict(references or {})  # variant_id -> its reference variant
        self._variants = list(variants)  # every variant to run: storages are sized for all
        self._storages: dict[str, ProvisionedLike] = {}
        self._clusters: dict[tuple[str, str], Cluster] = {}
        self._snapshots: dict[str, dataset.Snapshot] = {}
        self._settings_catalogues: dict[str, Catalogue] = {}  # build key -> catalogue
        self._caps: list[Any] = []  # memory cgroups (blocklab.storage.cgroup.MemoryCap)
        self.datasets: dict[str, DatasetInfo] = {}
        self._user: User | None = None
        self.instance = instance_token()
        self.controls = controls  # the design's run controls (blocklab.execution.controls)

    # -- context ------------------------------------------------------------------------
    def __enter__(self) -> Lab:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop every server, then release every storage (each attempted)."""
        errors: list[str] = []
        for cluster in self._clusters.values():
            try:
                cluster.stop()
                # its socket directory and log (each run keeps its part of the log)
                safe_remove_tree(cluster.log_path.parent, [self.paths.work / "servers"])
            except (BlocklabError, OSError) as e:
                errors.append(f"stopping {cluster.data_dir}: {e}")
        self._clusters.clear()
        for cap in self._caps:
            try:
                cap.close()
            except (BlocklabError, OSError) as e:
                errors.append(f"removing memory cgroup: {e}")
        self._caps.clear()
        for name, provisioned in list(self._storages.items()):
            try:
                provisioned.release()
            except (BlocklabError, OSError) as e:
                errors.append(f"releasing {name}: {e}")
        self._storages.clear()
        if errors:
            raise StorageError("; ".join(errors))

    # -- resources ----------------------------------------------------------------------
    @property
    def user(self) -> User:
        if self._user is None:
            self._user = open_home(self.paths, self.log)
        return self._user

    def install(self, req: BuildRequest) -> Installation:
        if req not in self._installs:
            from blocklab.postgres.build import ensure_build

            shares = any(req.shares_objects_with(v.build) for v in self._variants)
            self._installs[req] = ensure_build(req, self.paths, log=self.log, shares_objects=shares)
        return self._installs[req]

    def storage(
        self, req: StorageRequest, *, needs: sizing.StorageNeeds, owner: str = ""
    ) -> ProvisionedLike:
        """The storage of `req` (each made once); `owner`: a storage of its own for that
        owner (interleaved: one per variant, both servers up at once)."""
        name = storage_name(req, self._instance_of(owner))
        if name not in self._storages:
            self._storages[name] = self._provision(req, name, needs)
        return self._storages[name]

    def _provision(
        self, req: StorageRequest, name: str, needs: sizing.StorageNeeds
    ) -> ProvisionedLike:
        return storage.provision(
            req,
            name=name,
            paths=self.paths,
            state=self.state,
            min_size_bytes=needs.data.bytes,
            wal_min_size_bytes=needs.wal.bytes if needs.wal else 0,
        )

    def _instance_of(self, owner: str) -> str:
        return f"{self.instance}-{owner}" if owner else self.instance

    def cluster(
        self, inst: Installation, req: StorageRequest, store: ProvisionedLike, owner: str = ""
    ) -> Cluster:
        key = (storage_name(req, self._instance_of(owner)), inst.key)
        if key not in self._clusters:
            short = hashlib.sha256(repr(key).encode()).hexdigest()[:10]
            server_dir = ensure_dir(self.paths.work / "servers" / short)
            self._clusters[key] = Cluster(
                inst,
                store.data_dir,
                socket_dir=server_dir / "sock",
                user=self.user,
                state=self.state,
                wal_dir=store.wal_dir,
                log_path=server_dir / "server.log",
                memory_hook=self._memory_hook(req, short),
            )
        return self._clusters[key]

    def _memory_hook(self, req: StorageRequest, name: str) -> Callable[[int], None] | None:
        """A cgroup memory cap for the server when the storage asks for one."""
        if req.memory_limit_bytes is None:
            return None
        cap = cgroup.hook(name, req.memory_limit_bytes, state=self.state)
        self._caps.append(cap)
        return cap

    def dataset(self, variant: Variant, inst: Installation, cluster: Cluster) -> dataset.Snapshot:
        key = variant.dataset_key(inst.key)
        if key in self._snapshots:
            return self._snapshots[key]
        # one process makes a dataset; another wanting it waits, then finds it complete
        with dataset.lock(self.paths, key, on_wait=lambda: self.log(f"waiting for {key}")):
            snap, made_now = self._load_or_create(variant, inst, cluster, key)
        self._snapshots[key] = snap
        self.datasets[key] = DatasetInfo(
            key,
            inst.key,
            snap.scale,
            snap.fillfactor,
            made_now,
            snap.init_s,
            snap.pgbench_init_s,
            snap.snapshot_s,
            snap.size_bytes,
            drivers.for_dataset(variant.dataset).dataset_label(variant.dataset),
            snap.table_bytes,
            snap.index_bytes,
        )
        return snap

    def _load_or_create(
        self, variant: Variant, inst: Installation, cluster: Cluster, key: str
    ) -> tuple[Snapshot, bool]:
        snap = dataset.load(self.paths, key)
        if snap is not None:
            return snap, False
        driver = drivers.for_dataset(variant.dataset)
        load = " ".join(f"{k}={v}" for k, v in sorted(variant.load_settings().items()))
        with_load = f", loaded with {load}" if load else ""
        self.log(
            f"making dataset {key}: {driver.dataset_label(variant.dataset)} ({inst.key}{with_load})"
        )
        snap = dataset.create(
            cluster,
            variant.dataset,
            paths=self.paths,
            key=key,
            wal_segsize_mb=variant.wal_segsize_mb,
            data_checksums=variant.data_checksums,
            driver=driver,
            settings=variant.load_settings(),
        )
        return snap, True

    def prepare(self, variant: Variant) -> run_state.RunTarget:
        """Build, storage, server and dataset for a variant (each made once)."""
        inst = self.install(variant.build)
        needs = sizing.needs_by_storage([*self._variants, variant])[variant.storage]
        store = self.storage(variant.storage, needs=needs)
        cluster = self.cluster(inst, variant.storage, store)
        snap = self.dataset(variant, inst, cluster)
        ref = self._references.get(variant.variant_id, variant)
        settings = settings_policy.for_variant(variant, ref, self._catalogue_of)
        assert settings is not None  # a made build's catalogue is always known
        return run_state.RunTarget(
            variant=variant,
            cluster=cluster,
            snapshot=snap,
            settings=settings,
            devices=list(store.devices),
            storage_facts=dict(store.facts),
        )

    def own_target(self, variant: Variant, slot: int) -> run_state.RunTarget:
        """The variant's run target on storage slot `slot` (0 or 1) of the kind it asks
        for (the same build, dataset snapshot and settings), so that two variants' servers
        can be up at once; the variants swap slots every two rounds
        (blocklab.execution.interleaved), so a slot is sized for every variant on it."""
        shared = self.prepare(variant)  # the build and the dataset, made once
        owner = f"slot{slot}"
        needs = sizing.needs_by_storage([*self._variants, variant])[variant.storage]
        store = self.storage(variant.storage, needs=needs, owner=owner)
        cluster = self.cluster(shared.cluster.inst, variant.storage, store, owner)
        return dataclasses.replace(
            shared, cluster=cluster, devices=list(store.devices), storage_facts=dict(store.facts)
        )

    def _catalogue_of(self, req: BuildRequest) -> Catalogue:
        """A build's settings catalogue: what the bytes settings policy converts with (for
        the variant's build and its reference's; the native policy asks for none)."""
        inst = self.install(req)
        if inst.key not in self._settings_catalogues:
            self._settings_catalogues[inst.key] = settings_catalogue.load(inst, self.paths)
        return self._settings_catalogues[inst.key]

    # -- runs ---------------------------------------------------------------------------
    def run(
        self, variant: Variant, *, experiment: str, round_no: int, position: int, raw_dir: Path
    ) -> RunRecord:
        """One measured run. A failure to prepare (build, storage, dataset) or to run is
        a failed RunRecord with the reason; bad input raises UserError."""
        label = run_state.RunLabel(experiment, round_no, position)
        try:
            target = self.prepare(variant)
        except UserError:
            raise
        except (BlocklabError, OSError) as e:
            return _failed_preparation(variant, label, raw_dir, e)
        record = runner.run_one(
            target,
            label,
            raw_dir,
            instrumentation=self._factory(),
            log=self.log,
            controls=self.controls,
        )
        if record.reason.startswith(runner.NO_SPACE_PREFIX):
            self.release_storage(variant.storage)
        return record

    def release_storage(self, req: StorageRequest) -> None:
        """Stop the servers on a storage and release it (a full volume is not reused: the
        next run that needs it gets a fresh one)."""
        name = storage_name(req, self.instance)
        for key in [k for k in self._clusters if k[0] == name]:
            self._clusters.pop(key).stop()
        provisioned = self._storages.pop(name, None)
        if provisioned is not None:
            self.log(f"released the full storage {name}")
            provisioned.release()

    def run_interleaved(
        self,
        variants: Sequence[Variant],
        design: RunDesign,
        raw_dirs: Mapping[str, Path],
        *,
        label: run_state.RunLabel,
        seed: int,
    ) -> dict[str, RunRecord]:
        """One interleaved round of two variants (blocklab.execution.interleaved)."""
        return interleaved.run_round(
            self, variants, design, raw_dirs, label=label, seed=seed, probes=self._factory()
        )

    def _factory(self) -> runner.InstrumentationFactory | None:
        if self._instrumentation is _DEFAULT:
            return runner.default_instrumentation()
        return self._instrumentation


def _failed_preparation(
    variant: Variant, label: run_state.RunLabel, raw_dir: Path, e: BaseException
) -> RunRecord:
    return run_record.failed_without_running(
        variant, label, raw_dir, f"preparation failed: {type(e).__name__}: {e}"
    )

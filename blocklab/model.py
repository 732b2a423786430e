"""The nouns every module shares: what one variant asks for.

These are pydantic models, frozen and strict about unknown keys, so that the
experiment file (blocklab.experiment_file) validates straight into them and every run stores
its variant as JSON. A variant's identity is the hash of its JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

BLOCK_SIZES_KB = (1, 2, 4, 8, 16, 32)
WAL_BLOCK_SIZES_KB = (1, 2, 4, 8, 16, 32, 64)
SEGSIZES_GB = (1, 2, 4, 8, 16, 32)  # --with-segsize (relation segment), GB
BUILTIN_SCRIPTS = ("tpcb-like", "simple-update", "select-only")
QUERY_MODES = ("simple", "extended", "prepared")
STORAGE_KINDS = ("dir", "ext4", "xfs", "btrfs", "device")
DEFAULT_DRIVER = "pgbench"
ENV_PAD_VARIABLE = "BLOCKLAB_ENV_PAD"
MAX_ENV_PAD_BYTES = 65536
# a driver's own keys (dataset size, run options): name -> value, sorted by name
OptionValue = str | int | float | bool
Options = tuple[tuple[str, OptionValue], ...]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self, length: int = 12) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:length]


class BuildRequest(Frozen):
    """Which PostgreSQL to build: source, patches and compile-time geometry."""

    pg: str = "18"  # major version for source = "debian"; informative otherwise
    source: str = "debian"  # "debian", a tarball path or a source tree path
    patches: tuple[str, ...] = ()
    block_size_kb: int = 8
    wal_block_size_kb: int = 8
    segsize_gb: int = 1
    configure_args: tuple[str, ...] = ()
    # A build-layout variant (blocklab.postgres.link_order): the backend linked in an order
    # drawn from this seed; None is the ordinary link. Left out of the JSON when None, so
    # the ids of every variant and build made before it existed are unchanged.
    layout_seed: int | None = Field(default=None, ge=1, le=2**31 - 1)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _omit_defaults(handler(self), {"layout_seed": None})

    def shares_objects_with(self, other: BuildRequest) -> bool:
        """Another build that differs only in its link order or its patches: most of
        their compiled objects are the same (blocklab.postgres.compiler_cache)."""
        same: dict[str, object] = {"layout_seed": None, "patches": ()}
        return self != other and self.model_copy(update=same) == other.model_copy(update=same)

    @field_validator("block_size_kb")
    @classmethod
    def _bs(cls, v: int) -> int:
        if v not in BLOCK_SIZES_KB:
            raise ValueError(f"block size must be one of {', '.join(map(str, BLOCK_SIZES_KB))} kB")
        return v

    @field_validator("wal_block_size_kb")
    @classmethod
    def _wbs(cls, v: int) -> int:
        if v not in WAL_BLOCK_SIZES_KB:
            raise ValueError(
                "WAL block size must be a power of two from 1 to 64 kB "
                f"({', '.join(map(str, WAL_BLOCK_SIZES_KB))})"
            )
        return v

    @field_validator("segsize_gb")
    @classmethod
    def _seg(cls, v: int) -> int:
        if v not in SEGSIZES_GB:
            raise ValueError(f"segment size must be one of {', '.join(map(str, SEGSIZES_GB))} GB")
        return v


class StorageRequest(Frozen):
    """Where the data directory lives. Kind-specific options are checked by blocklab.storage."""

    kind: Literal["dir", "ext4", "xfs", "btrfs", "device"] = "dir"
    block_size: int | None = None  # file-system block size in bytes (mkfs -b / -s)
    size_mb: int | None = None  # loop image size; None = derived from the dataset
    mount_options: tuple[str, ...] = ()  # e.g. ("noatime", "data=writeback", "nobarrier")
    mkfs_options: tuple[str, ...] = ()
    path: str | None = None  # kind="dir": a directory; kind="device": a block device
    erase_confirmed: bool = False  # kind="device" only
    fs: Literal["ext4", "xfs", "btrfs"] | None = None  # kind="device": what to make (ext4)
    wal: StorageRequest | None = None  # pg_wal on a storage of its own
    memory_limit_bytes: int | None = None
    drop_caches: bool = False

    def label(self) -> str:
        parts: list[str] = [self.kind if self.fs is None else f"{self.kind}:{self.fs}"]
        if self.block_size:
            parts.append(
                f"{self.block_size // 1024}k" if self.block_size >= 1024 else f"{self.block_size}b"
            )
        parts.extend(self.mount_options)
        return "-".join(parts)


def _omit_defaults(data: dict[str, object], defaults: dict[str, object]) -> dict[str, object]:
    """The keys a driver adds are left out at their defaults, so that a pgbench variant's
    JSON (and its variant id, dataset key) is what it was before drivers had keys."""

    def default(k: str, v: object) -> bool:
        d = defaults.get(k, ...)
        return v == d or (d == () and isinstance(v, list | tuple) and not v)

    return {k: v for k, v in data.items() if not default(k, v)}


def options_of(items: Mapping[str, OptionValue]) -> Options:
    return tuple(sorted(items.items()))


class DatasetRequest(Frozen):
    """A workload's initialised data: its driver, the driver's size keys (`options`,
    e.g. sysbench tables and table_size; empty for pgbench, whose size is `scale`), the
    table fillfactor and the index fillfactor (None: the B-tree default)."""

    scale: int = Field(default=10, ge=1)
    fillfactor: int = Field(default=100, ge=10, le=100)
    driver: str = DEFAULT_DRIVER
    options: Options = ()
    index_fillfactor: int | None = Field(default=None, ge=10, le=100)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _omit_defaults(
            handler(self),
            {"driver": DEFAULT_DRIVER, "options": (), "index_fillfactor": None},
        )

    def option(self, name: str, default: OptionValue | None = None) -> OptionValue | None:
        return dict(self.options).get(name, default)


class WorkloadRequest(Frozen):
    """What runs against a dataset. `driver` names a blocklab.workloads driver; pgbench's
    keys are the fields builtin, scripts and query_mode, another driver's run keys are in
    `options` (e.g. sysbench's test). `clients` is the number of concurrent connections
    for every driver (pgbench -c, sysbench --threads, go-tpc -T); `threads` is pgbench -j
    (1 for other drivers)."""

    driver: str = DEFAULT_DRIVER
    options: Options = ()
    builtin: Literal["tpcb-like", "simple-update", "select-only"] | None = "simple-update"
    scripts: tuple[str, ...] = ()  # custom script files (absolute paths), "file@weight" allowed
    query_mode: Literal["simple", "extended", "prepared"] = "prepared"
    clients: int = Field(default=4, ge=1)
    threads: int = Field(default=1, ge=1)
    duration_s: int = Field(default=10, ge=1)
    warmup_s: int = Field(default=0, ge=0)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _omit_defaults(handler(self), {"driver": DEFAULT_DRIVER, "options": ()})

    def option(self, name: str, default: OptionValue | None = None) -> OptionValue | None:
        return dict(self.options).get(name, default)

    @model_validator(mode="after")
    def _one_script_kind(self) -> WorkloadRequest:
        if self.driver != DEFAULT_DRIVER:
            if self.builtin is not None or self.scripts:
                raise ValueError(f"pgbench scripts are not options of driver {self.driver!r}")
            return self
        if self.builtin is None and not self.scripts:
            raise ValueError("a workload needs a built-in script or script files")
        if self.threads > self.clients:
            raise ValueError("threads must not exceed clients")
        return self


# Settings that shape what a dataset's load stores: the values it TOASTs (compressed by
# default_toast_compression) and the planner statistics its ANALYZE keeps (of
# default_statistics_target). A variant's values of them are its load's too, and part of
# its dataset's key: variants that differ in them do not share a dataset.
LOAD_SETTINGS = frozenset({"default_toast_compression", "default_statistics_target"})


class Variant(Frozen):
    """One point of the matrix."""

    build: BuildRequest = BuildRequest()
    storage: StorageRequest = StorageRequest()
    dataset: DatasetRequest = DatasetRequest()
    workload: WorkloadRequest = WorkloadRequest()
    settings: tuple[tuple[str, str], ...] = ()  # GUCs as written to postgresql.conf
    settings_policy: Literal["native", "bytes"] = "native"
    wal_segsize_mb: int = 16
    data_checksums: bool = False
    # The server's environment grown by this many bytes (one variable, ENV_PAD_VARIABLE):
    # it moves the stack's alignment, the effect Mytkowicz et al. (ASPLOS 2009) measured;
    # a control for that effect, 0 otherwise. Left out of the JSON when 0, so the ids of
    # every variant made before it existed are unchanged.
    environment_pad_bytes: int = Field(default=0, ge=0, le=MAX_ENV_PAD_BYTES)
    label: str = ""  # human name, e.g. "bs=4k wal=8k"; not part of the identity

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _omit_defaults(handler(self), {"environment_pad_bytes": 0})

    def server_environment(self) -> dict[str, str]:
        """What the server's canonical environment gets added (blocklab.proc)."""
        pad = self.environment_pad_bytes
        return {ENV_PAD_VARIABLE: "x" * pad} if pad else {}

    @property
    def variant_id(self) -> str:
        data = self.model_dump(mode="json", exclude={"label"})
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def load_settings(self) -> dict[str, str]:
        """The variant's settings its dataset's load runs with (LOAD_SETTINGS)."""
        return {name: value for name, value in self.settings if name in LOAD_SETTINGS}

    def dataset_key(self, build_key: str) -> str:
        """Datasets are shared by variants with the same build, storage, data, initdb and
        load settings (those only when set: the keys of datasets made before are kept)."""
        parts: list[object] = [
            build_key,
            self.storage.model_dump(mode="json"),
            self.dataset.model_dump(mode="json"),
            self.wal_segsize_mb,
            self.data_checksums,
        ]
        if load := self.load_settings():
            parts.append(load)
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

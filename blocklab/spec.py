"""Experiment files: the matrix, validated before anything runs.

An experiment file is TOML with three parts. Every key is checked: an unknown key, a
wrong type or an impossible value is a UserError naming the key path and the allowed
values (exit code 2), before anything is built or started.

    [experiment]
    name = "page-size"               # required; letters, digits, . _ -
    description = "4 kB vs 8 kB"
    seed = 42                         # optional; default derived from the name
    rounds = 5                        # each round runs every variant once, fresh order
    reference = { block_size = 8 }    # a selector (see below) or a variant label
    settings_policy = "bytes"         # "native" (same numbers) or "bytes" (same bytes)
    until_ci_pct = 2.0                # optional: add rounds until every CI half-width <=
    max_rounds = 30                   # optional cap for until_ci_pct
    time_budget_s = 3600              # optional

    [matrix]                          # a list makes a dimension; a scalar is fixed
    postgres = "18"                   # or { version, source, patches, configure_args }
    block_size = [2, 4, 8]            # data page, kB: 1 2 4 8 16 32
    wal_block_size = 8                # WAL block, kB: 1 2 4 8 16 32 64
    wal_segsize_mb = 16               # initdb --wal-segsize: power of two, 1..1024
    segsize_gb = 1                    # relation segment, GB
    storage = { kind = "dir" }        # or a list of tables; see below
    fillfactor = [100, 75]            # pgbench -F, 10..100
    scale = 10                        # pgbench -s
    workload = "simple-update"        # built-in name, or { builtin | scripts, query_mode }
    clients = [1, 5, 10, 15]          # pgbench -c
    threads = 1                       # pgbench -j, capped at clients
    duration = 60                     # seconds (or "90s", "5min", "1h")
    warmup = 10                       # seconds run before the measured part
    data_checksums = false
    [matrix.settings]                 # GUCs; a list varies one GUC
    shared_buffers = "128MB"
    max_wal_size = ["1GB", "4GB"]

    [[exclude]]                       # drop combinations matching every key of a rule
    block_size = 2
    clients = [10, 15]

Storage tables take the keys of blocklab.model.StorageRequest: kind (dir, ext4, xfs,
btrfs, device), block_size (file-system block, bytes or "4k"; a list expands into one
storage per size), size_mb, mount_options, mkfs_options, path, erase_confirmed, fs (the
file system blocklab makes on a kind = "device": ext4, xfs or btrfs; default ext4), wal (a
storage table for pg_wal), memory_limit ("1GiB"), drop_caches. Kind-specific checks are
blocklab.storage.validate's.

Workloads: a built-in pgbench script (tpcb-like, simple-update, select-only) or script
files ("file.sql" or "file.sql@weight", relative to the experiment file), and a
query_mode (simple, extended, prepared; default prepared).

Selectors (reference, exclude) use these keys: postgres, block_size, wal_block_size,
wal_segsize_mb, segsize_gb, storage (a storage label), fs (kind), fs_block_size, fillfactor,
scale, workload, query_mode, clients, threads, duration, warmup, data_checksums,
settings.NAME (or a nested settings table); a value or a list of values. A reference
selector that matches several variants defines one reference per group: each variant is
compared with the matching variant that agrees on every dimension the selector does not
name (e.g. reference = { wal_block_size = 8 } across clients = [1, 5, 10]).

Sizes: "kB", "MB", "GB" count 1024 as PostgreSQL does; "KiB", "MiB", "GiB" are the same.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict

from blocklab import model
from blocklab import settings_policy as policies
from blocklab.errors import UserError
from blocklab.model import (
    BuildRequest,
    DatasetRequest,
    StorageRequest,
    Variant,
    WorkloadRequest,
)

Scalar = str | int | bool
Flat = dict[str, Scalar]

TOP_KEYS = ("experiment", "matrix", "exclude")
EXPERIMENT_KEYS = (
    "name",
    "description",
    "seed",
    "rounds",
    "reference",
    "settings_policy",
    "until_ci_pct",
    "max_rounds",
    "time_budget_s",
)
MATRIX_KEYS = (
    "postgres",
    "block_size",
    "wal_block_size",
    "wal_segsize_mb",
    "segsize_gb",
    "storage",
    "fillfactor",
    "scale",
    "workload",
    "clients",
    "threads",
    "duration",
    "warmup",
    "data_checksums",
    "settings",
)
POSTGRES_KEYS = ("version", "source", "patches", "configure_args")
STORAGE_KEYS = (
    "kind",
    "block_size",
    "size_mb",
    "mount_options",
    "mkfs_options",
    "path",
    "erase_confirmed",
    "fs",
    "wal",
    "memory_limit",
    "drop_caches",
)
WORKLOAD_KEYS = ("builtin", "scripts", "query_mode")
WAL_SEGSIZES_MB = tuple(2**i for i in range(11))  # 1 .. 1024
RESERVED_SETTINGS = (
    "port",
    "listen_addresses",
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
)
# selector key -> key in dims() (the rest are the same)
DIM_NAMES = {
    "block_size": "block_size_kb",
    "wal_block_size": "wal_block_size_kb",
    "duration": "duration_s",
    "warmup": "warmup_s",
}
ALIASES = {v: k for k, v in DIM_NAMES.items()}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
GUC_RE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
SIZE_RE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}
TIME_RE = re.compile(r"^\s*(\d+)\s*(s|sec|min|h)?\s*$")
TIME_UNITS = {None: 1, "s": 1, "sec": 1, "min": 60, "h": 3600}


# ---------------------------------------------------------------- small checkers


def _fail(path: str, problem: str, allowed: str = "") -> UserError:
    return UserError(f"{path}: {problem}" + (f"; allowed: {allowed}" if allowed else ""))


def _check_keys(table: dict[str, Any], allowed: Sequence[str], path: str) -> None:
    for key in table:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise _fail(where, "unknown key", ", ".join(allowed))


def _table(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected a table, got {_show(value)}")
    return value


def _show(value: Any) -> str:
    return f"{type(value).__name__} {json.dumps(value, default=str)}"


def _int(value: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {_show(value)}", _range(lo, hi))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise _fail(path, f"{value} is out of range", _range(lo, hi))
    return value


def _range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    if lo is not None:
        return f">= {lo}"
    return "" if hi is None else f"<= {hi}"


def _number(value: Any, path: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected a number, got {_show(value)}")
    if positive and value <= 0:
        raise _fail(path, f"{value} must be positive", "> 0")
    return float(value)


def _choice(value: Any, path: str, choices: Sequence[Any], unit: str = "") -> Any:
    if isinstance(value, bool) or value not in choices:
        allowed = ", ".join(map(str, choices)) + (f" ({unit})" if unit else "")
        raise _fail(path, f"{json.dumps(value, default=str)} is not allowed", allowed)
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {_show(value)}")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true or false, got {_show(value)}")
    return value


def _str_list(value: Any, path: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _fail(path, f"expected a string or a list of strings, got {_show(value)}")
    return [_str(v, f"{path}[{i}]") for i, v in enumerate(value)]


def parse_size(value: Any, path: str) -> int:
    """Bytes from 4096, "4k", "4kB", "1GiB" (1024-based, as PostgreSQL counts)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(value, path, 0)
    m = SIZE_RE.match(value) if isinstance(value, str) else None
    if not m or m.group(2).lower() not in SIZE_UNITS:
        raise _fail(path, f"not a size: {_show(value)}", 'bytes or "4k", "512MiB", "1GB"')
    return int(m.group(1)) * SIZE_UNITS[m.group(2).lower()]


def parse_seconds(value: Any, path: str, lo: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(value, path, lo)
    m = TIME_RE.match(value) if isinstance(value, str) else None
    if not m:
        raise _fail(path, f"not a duration: {_show(value)}", 'seconds, or "90s", "5min", "1h"')
    return _int(int(m.group(1)) * TIME_UNITS[m.group(2)], path, lo)


def _resolve(path_text: str, base: Path, path: str, what: str) -> str:
    p = Path(path_text).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.exists():
        raise _fail(path, f"{what} {str(p)!r} does not exist")
    return str(p.resolve())


def _guc_value(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float | str):
        return str(value)
    raise _fail(path, f"expected a string, number or boolean, got {_show(value)}")


# ---------------------------------------------------------------- dimensions


@dataclass(frozen=True)
class Option:
    """One value of one dimension: what it builds, how selectors see it, its JSON."""

    value: Any
    flat: Flat
    json: Any


@dataclass(frozen=True)
class Dimension:
    key: str  # a MATRIX_KEYS entry or "settings.NAME"
    options: tuple[Option, ...]


def _values(raw: Any, path: str) -> list[tuple[Any, str]]:
    """A scalar is one value; a list is a dimension. Returns (value, path) pairs."""
    if isinstance(raw, list):
        if not raw:
            raise _fail(path, "an empty list has no values")
        return [(v, f"{path}[{i}]") for i, v in enumerate(raw)]
    return [(raw, path)]


def _simple(key: str, raw: Any, check: Callable[[Any, str], Any]) -> Dimension:
    path = f"matrix.{key}"
    opts: list[Option] = []
    for v, p in _values(raw, path):
        value = check(v, p)
        opts.append(Option(value, {key: value}, value))
    return Dimension(key, _unique(opts, path))


def _unique(opts: list[Option], path: str) -> tuple[Option, ...]:
    seen: set[str] = set()
    for o in opts:
        blob = json.dumps(o.json, sort_keys=True, default=str)
        if blob in seen:
            raise _fail(path, f"the value {blob} is listed twice")
        seen.add(blob)
    return tuple(opts)


def _postgres(raw: Any, base: Path) -> Dimension:
    path = "matrix.postgres"
    opts = []
    for v, p in _values(raw, path):
        t = {"version": v} if isinstance(v, str | int) and not isinstance(v, bool) else v
        t = _table(t, p)
        _check_keys(t, POSTGRES_KEYS, p)
        version = str(t.get("version", "18"))
        if not version.isdigit():
            raise _fail(f"{p}.version", f"{version!r} is not a major version", '"15", "17", "18"')
        source = _str(t.get("source", "debian"), f"{p}.source")
        if source != "debian":
            source = _resolve(source, base, f"{p}.source", "source")
        patches = [
            _resolve(x, base, f"{p}.patches[{i}]", "patch")
            for i, x in enumerate(_str_list(t.get("patches", []), f"{p}.patches"))
        ]
        args = _str_list(t.get("configure_args", []), f"{p}.configure_args")
        value = {"pg": version, "source": source, "patches": patches, "configure_args": args}
        opts.append(Option(value, {"postgres": _pg_label(value)}, value))
    return Dimension("postgres", _unique_labels(_unique(opts, path), "postgres"))


def _pg_label(v: dict[str, Any]) -> str:
    label = f"pg{v['pg']}" if v["source"] == "debian" else Path(v["source"]).name
    for patch in v["patches"]:
        label += "+" + Path(patch).stem
    return label


def _unique_labels(opts: tuple[Option, ...], key: str) -> tuple[Option, ...]:
    """Distinct options whose labels collide get a #n suffix."""
    counts: dict[Scalar, int] = {}
    for o in opts:
        counts[o.flat[key]] = counts.get(o.flat[key], 0) + 1
    out, seen = [], dict.fromkeys(counts, 0)
    for o in opts:
        label = o.flat[key]
        if counts[label] > 1:
            seen[label] += 1
            o = Option(o.value, {**o.flat, key: f"{label}#{seen[label]}"}, o.json)
        out.append(o)
    return tuple(out)


def _storage(raw: Any, base: Path) -> Dimension:
    path = "matrix.storage"
    opts = []
    for v, p in _values(raw, path):
        for req in _storage_requests(_table(v, p), base, p, allow_wal=True):
            opts.append(Option(req, _storage_flat(req), req.model_dump(mode="json")))
    return Dimension("storage", _unique_labels(_unique(opts, path), "storage"))


def _storage_requests(
    t: dict[str, Any], base: Path, path: str, *, allow_wal: bool
) -> list[StorageRequest]:
    keys = STORAGE_KEYS if allow_wal else tuple(k for k in STORAGE_KEYS if k != "wal")
    _check_keys(t, keys, path)
    fields: dict[str, Any] = {}
    kind = t.get("kind", "dir")
    fields["kind"] = _choice(kind, f"{path}.kind", model.STORAGE_KINDS)
    if "size_mb" in t:
        fields["size_mb"] = _int(t["size_mb"], f"{path}.size_mb", 1)
    for key in ("mount_options", "mkfs_options"):
        if key in t:
            fields[key] = tuple(_str_list(t[key], f"{path}.{key}"))
    if "path" in t:
        text = _str(t["path"], f"{path}.path")
        fields["path"] = text if kind == "device" else str((base / text).resolve())
    for key in ("erase_confirmed", "drop_caches"):
        if key in t:
            fields[key] = _bool(t[key], f"{path}.{key}")
    if "fs" in t:
        fields["fs"] = _choice(t["fs"], f"{path}.fs", ("ext4", "xfs", "btrfs"))
    if "memory_limit" in t:
        limit = parse_size(t["memory_limit"], f"{path}.memory_limit")
        if limit < 16 * 1024**2:
            raise _fail(f"{path}.memory_limit", f"{limit} bytes is too small", '>= "16MiB"')
        fields["memory_limit_bytes"] = limit
    if "wal" in t:
        wal = _storage_requests(
            _table(t["wal"], f"{path}.wal"), base, f"{path}.wal", allow_wal=False
        )
        if len(wal) != 1:
            raise _fail(f"{path}.wal.block_size", "the WAL storage takes one block size")
        fields["wal"] = wal[0]
    return [_make_storage(fields, bs, path) for bs in _fs_block_sizes(t, path)]


def _fs_block_sizes(t: dict[str, Any], path: str) -> list[int | None]:
    if "block_size" not in t:
        return [None]
    out: list[int | None] = []
    for v, p in _values(t["block_size"], f"{path}.block_size"):
        size = parse_size(v, p)
        if size < 512 or size & (size - 1):
            raise _fail(
                p,
                f"{size} bytes is not a file-system block size (it is in bytes, not kB)",
                'a power of two >= 512 bytes, e.g. 4096 or "4k"',
            )
        out.append(size)
    return out


def _make_storage(fields: dict[str, Any], block_size: int | None, path: str) -> StorageRequest:
    try:
        return StorageRequest(**fields, block_size=block_size)
    except pydantic.ValidationError as e:
        raise _fail(path, _pydantic_message(e)) from e


def _storage_flat(req: StorageRequest) -> Flat:
    label = req.label()
    if req.wal is not None:
        label += "+wal-" + req.wal.label()
    if req.memory_limit_bytes:
        label += f"+mem{_human_bytes(req.memory_limit_bytes)}"
    return {
        "storage": label,
        "fs": req.fs or req.kind,
        "fs_block_size": req.block_size if req.block_size else "default",
    }


def _human_bytes(n: int) -> str:
    for unit, size in (("G", 1024**3), ("M", 1024**2), ("k", 1024)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def _workload(raw: Any, base: Path) -> Dimension:
    path = "matrix.workload"
    opts = []
    for v, p in _values(raw, path):
        t = {"builtin": v} if isinstance(v, str) else _table(v, p)
        _check_keys(t, WORKLOAD_KEYS, p)
        mode = _choice(t.get("query_mode", "prepared"), f"{p}.query_mode", model.QUERY_MODES)
        if ("builtin" in t) == ("scripts" in t):
            raise _fail(p, "give either builtin or scripts", ", ".join(model.BUILTIN_SCRIPTS))
        if "builtin" in t:
            name = _choice(t["builtin"], f"{p}.builtin", model.BUILTIN_SCRIPTS)
            value = {"builtin": name, "scripts": [], "query_mode": mode}
        else:
            scripts = _scripts(t["scripts"], base, f"{p}.scripts")
            name = "+".join(Path(s).stem + (s[s.rfind("@") :] if "@" in s else "") for s in scripts)
            value = {"builtin": None, "scripts": scripts, "query_mode": mode}
        opts.append(Option(value, {"workload": name, "query_mode": mode}, value))
    return Dimension("workload", _unique(opts, path))


def _scripts(raw: Any, base: Path, path: str) -> list[str]:
    out = []
    items = _str_list(raw, path)
    if not items:
        raise _fail(path, "no script files", "a list of .sql files, each optionally @weight")
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        file, _, weight = item.partition("@")
        if weight and not weight.isdigit():
            raise _fail(p, f"weight {weight!r} is not a whole number", '"file.sql@2"')
        resolved = _resolve(file, base, p, "script file")
        out.append(resolved + (f"@{weight}" if weight else ""))
    return out


def _settings(raw: Any) -> list[Dimension]:
    table = _table(raw, "matrix.settings")
    dims = []
    for name, raw_value in table.items():
        path = f"matrix.settings.{name}"
        if not GUC_RE.match(name):
            raise _fail(path, "not a setting name", "lower-case PostgreSQL GUC names")
        if name in RESERVED_SETTINGS:
            raise _fail(path, "blocklab sets this itself (private socket, data directory)")
        key = f"settings.{name}"
        opts = [
            Option(val, {key: val}, val)
            for val in (_guc_value(v, p) for v, p in _values(raw_value, path))
        ]
        dims.append(Dimension(key, _unique(opts, path)))
    return dims


def _matrix_dimensions(matrix: dict[str, Any], base: Path) -> list[Dimension]:
    _check_keys(matrix, MATRIX_KEYS, "matrix")
    m = matrix.get
    dims = [
        _postgres(m("postgres", "18"), base),
        _simple(
            "block_size",
            m("block_size", 8),
            lambda v, p: _choice(v, p, model.BLOCK_SIZES_KB, "kB"),
        ),
        _simple(
            "wal_block_size",
            m("wal_block_size", 8),
            lambda v, p: _choice(v, p, model.WAL_BLOCK_SIZES_KB, "kB"),
        ),
        _simple(
            "wal_segsize_mb", m("wal_segsize_mb", 16), lambda v, p: _choice(v, p, WAL_SEGSIZES_MB)
        ),
        _simple(
            "segsize_gb", m("segsize_gb", 1), lambda v, p: _choice(v, p, model.SEGSIZES_GB, "GB")
        ),
        _storage(m("storage", {"kind": "dir"}), base),
        _simple("fillfactor", m("fillfactor", 100), lambda v, p: _int(v, p, 10, 100)),
        _simple("scale", m("scale", 10), lambda v, p: _int(v, p, 1, 100000)),
        _workload(m("workload", "simple-update"), base),
        _simple("clients", m("clients", 4), lambda v, p: _int(v, p, 1, 10000)),
        _simple("threads", m("threads", 1), lambda v, p: _int(v, p, 1, 10000)),
        _simple("duration", m("duration", 60), lambda v, p: parse_seconds(v, p, 1)),
        _simple("warmup", m("warmup", 0), lambda v, p: parse_seconds(v, p, 0)),
        _simple("data_checksums", m("data_checksums", False), _bool),
    ]
    return dims + _settings(m("settings", {}))


# ---------------------------------------------------------------- selectors


@dataclass(frozen=True)
class Selector:
    path: str
    keys: dict[str, tuple[Scalar, ...]]  # flat key -> accepted values

    def matches(self, flat: Flat) -> bool:
        return all(flat[k] in vals for k, vals in self.keys.items())


def _selector(raw: Any, path: str, known: dict[str, list[Scalar]]) -> Selector:
    table = _flatten_settings(_table(raw, path), path)
    if not table:
        raise _fail(path, "an empty selector matches everything", ", ".join(known))
    keys: dict[str, tuple[Scalar, ...]] = {}
    for raw_key, raw_value in table.items():
        key = ALIASES.get(raw_key, raw_key)
        p = f"{path}.{raw_key}"
        if key not in known:
            raise _fail(p, "not a dimension of this matrix", ", ".join(known))
        vals = raw_value if isinstance(raw_value, list) else [raw_value]
        keys[key] = tuple(_selector_value(key, v, p, known[key]) for v in vals)
    return Selector(path, keys)


def _flatten_settings(table: dict[str, Any], path: str) -> dict[str, Any]:
    out = {k: v for k, v in table.items() if k != "settings"}
    if "settings" in table:
        for name, v in _table(table["settings"], f"{path}.settings").items():
            out[f"settings.{name}"] = v
    return out


def _selector_value(key: str, value: Any, path: str, allowed: list[Scalar]) -> Scalar:
    v: Any = value
    if key.startswith("settings."):
        v = _guc_value(value, path)
    elif key == "fs_block_size" and value != "default":
        v = parse_size(value, path)
    elif key in ("duration", "warmup") and isinstance(value, str):
        v = parse_seconds(value, path, 0)
    elif key == "postgres" and isinstance(value, int | str) and str(value).isdigit():
        v = f"pg{value}"
    if isinstance(v, bool) != any(isinstance(a, bool) for a in allowed) or v not in allowed:
        shown = ", ".join(json.dumps(a) for a in allowed)
        raise _fail(path, f"{json.dumps(value)} is not a value of this matrix", shown)
    return v


# ---------------------------------------------------------------- the experiment


class Experiment(BaseModel):
    """A validated experiment: its matrix expanded into labelled variants."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str = ""
    seed: int
    rounds: int
    reference: dict[str, Any] | str | None = None
    settings_policy: str = "native"
    until_ci_pct: float | None = None
    max_rounds: int | None = None
    time_budget_s: float | None = None
    matrix: dict[str, Any]  # normalized: dimension -> list of option JSON
    exclude: list[dict[str, Any]] = []
    variant_list: tuple[Variant, ...]
    reference_map: dict[str, str]  # variant_id -> its reference's variant_id
    dims_map: dict[str, dict[str, Scalar]]  # variant_id -> varying dimension values
    source: str | None = None  # the experiment file, if any (not part of the identity)

    def variants(self) -> list[Variant]:
        return list(self.variant_list)

    def reference_id(self) -> str:
        """The reference variant; with a grouped reference, the first group's."""
        return self.reference_map[self.variant_list[0].variant_id]

    def reference_for(self, variant: Variant | str) -> str:
        """The variant_id this variant is compared with (itself for a reference)."""
        vid = variant if isinstance(variant, str) else variant.variant_id
        return self.reference_map[vid]

    def reference_ids(self) -> list[str]:
        return list(dict.fromkeys(self.reference_map.values()))

    def dims(self, variant: Variant | str) -> dict[str, Scalar]:
        vid = variant if isinstance(variant, str) else variant.variant_id
        return dict(self.dims_map[vid])

    def effective_settings(
        self, variant: Variant, catalogue_of: Callable[[BuildRequest], policies.Catalogue | None]
    ) -> policies.Conversion | None:
        """The settings this variant's server gets under the experiment's policy (what the
        runner writes; shown by `plan`). The bytes policy needs the settings catalogues of
        the variant's build and its reference's build (`catalogue_of`); None when one is
        not known yet (the build is not made)."""
        ref = self.variant(self.reference_for(variant))
        if variant.settings_policy != "bytes":
            return policies.convert(dict(variant.settings), variant.settings_policy)
        own, theirs = catalogue_of(variant.build), catalogue_of(ref.build)
        if own is None or theirs is None:
            return None
        return policies.convert(
            dict(variant.settings),
            variant.settings_policy,
            catalogue=own,
            reference=theirs,
            reference_wal_segment_size_bytes=ref.wal_segsize_mb * 1024**2,
        )

    def variant(self, variant_id: str) -> Variant:
        for v in self.variant_list:
            if v.variant_id == variant_id:
                return v
        raise KeyError(variant_id)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON stored with the experiment (same file -> same JSON)."""
        return {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "rounds": self.rounds,
            "reference": self.reference,
            "settings_policy": self.settings_policy,
            "until_ci_pct": self.until_ci_pct,
            "max_rounds": self.max_rounds,
            "time_budget_s": self.time_budget_s,
            "matrix": self.matrix,
            "exclude": self.exclude,
            "variants": [v.variant_id for v in self.variant_list],
        }


def default_seed(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


def load(path: Path, overrides: Mapping[str, int] | None = None) -> Experiment:
    """Read, validate and expand an experiment file. Raises UserError on any bad input.
    `overrides` replace fixed matrix values (OVERRIDABLE, e.g. {"scale": 1}) and name
    the experiment after them, so its results are stored beside the file's own."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise UserError(f"experiment file {str(path)!r} does not exist") from e
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise UserError(f"experiment file {str(path)!r} cannot be read: {e}") from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML: {e}") from e
    if overrides:
        data = _overridden(data, overrides, path)
    try:
        return from_dict(data, base=path.resolve().parent, source=str(path))
    except UserError as e:
        raise UserError(f"{path}: {e}") from e


OVERRIDABLE = {"scale": "s", "clients": "c", "duration": "d"}  # matrix key -> name suffix


def overridden_name(name: str, overrides: Mapping[str, int | None]) -> str:
    """'page-size' with {"scale": 1, "duration": 2} -> 'page-size-s1-d2'."""
    parts = [f"{tag}{overrides[k]}" for k, tag in OVERRIDABLE.items() if overrides.get(k)]
    return "-".join([name, *parts])


def _overridden(data: dict[str, Any], overrides: Mapping[str, int], path: Path) -> dict[str, Any]:
    """A copy of the file's data with fixed matrix values replaced (a varying one is an
    error: an override must not collapse a dimension the experiment compares)."""
    matrix = dict(_table(data.get("matrix", {}), "matrix"))
    for key, value in overrides.items():
        if key not in OVERRIDABLE:
            raise UserError(f"--{key}: not an override; allowed: {', '.join(OVERRIDABLE)}")
        current = matrix.get(key)
        if isinstance(current, list) and len(current) > 1:
            raise UserError(
                f"--{key}: {path} varies matrix.{key} ({', '.join(map(str, current))}); "
                f"--{key} replaces a fixed value only (edit the file to change the list)"
            )
        matrix[key] = value
    head = dict(_table(data.get("experiment", {}), "experiment"))
    if isinstance(head.get("name"), str):
        head["name"] = overridden_name(head["name"], overrides)
    return {**data, "experiment": head, "matrix": matrix}


def from_dict(data: dict[str, Any], *, base: Path, source: str | None = None) -> Experiment:
    _check_keys(data, TOP_KEYS, "")
    head = _table(data.get("experiment", {}), "experiment")
    _check_keys(head, EXPERIMENT_KEYS, "experiment")
    if "experiment" not in data or "name" not in head:
        raise _fail("experiment.name", "missing", "a short name: letters, digits, . _ -")
    matrix = _table(data.get("matrix", {}), "matrix")
    dims = _matrix_dimensions(matrix, base)
    known = _known_values(dims)
    excludes = _excludes(data.get("exclude", []), known)
    combos = _combos(dims, excludes)
    meta = _experiment_meta(head)
    return _assemble(meta, dims, combos, excludes, data.get("exclude", []), known, source)


def _experiment_meta(head: dict[str, Any]) -> dict[str, Any]:
    name = _str(head["name"], "experiment.name")
    if not NAME_RE.match(name):
        raise _fail("experiment.name", f"{name!r} is not a usable name", "letters, digits, . _ -")
    rounds = _int(head.get("rounds", 5), "experiment.rounds", 1, 10000)
    meta: dict[str, Any] = {
        "name": name,
        "description": _str(head.get("description", ""), "experiment.description"),
        "seed": _int(head["seed"], "experiment.seed", 0, 2**63 - 1)
        if "seed" in head
        else default_seed(name),
        "rounds": rounds,
        "settings_policy": _choice(
            head.get("settings_policy", "native"),
            "experiment.settings_policy",
            policies.POLICIES,
        ),
        "reference": head.get("reference"),
    }
    if "until_ci_pct" in head:
        pct = _number(head["until_ci_pct"], "experiment.until_ci_pct")
        if pct >= 100:
            raise _fail(
                "experiment.until_ci_pct", f"{pct} is not a useful precision", "0 < pct < 100"
            )
        meta["until_ci_pct"] = pct
    if "max_rounds" in head:
        meta["max_rounds"] = _int(head["max_rounds"], "experiment.max_rounds", rounds, 10000)
    if "time_budget_s" in head:
        meta["time_budget_s"] = _number(head["time_budget_s"], "experiment.time_budget_s")
    return meta


def _known_values(dims: Sequence[Dimension]) -> dict[str, list[Scalar]]:
    known: dict[str, list[Scalar]] = {}
    for d in dims:
        for o in d.options:
            for k, v in o.flat.items():
                known.setdefault(k, [])
                if v not in known[k]:
                    known[k].append(v)
    return known


def _excludes(raw: Any, known: dict[str, list[Scalar]]) -> list[Selector]:
    if not isinstance(raw, list):
        raise _fail("exclude", "expected [[exclude]] tables", "[[exclude]] with dimension keys")
    return [_selector(r, f"exclude[{i}]", known) for i, r in enumerate(raw)]


@dataclass
class Combo:
    options: dict[str, Option]
    flat: Flat = field(default_factory=dict)


def _combos(dims: Sequence[Dimension], excludes: Sequence[Selector]) -> list[Combo]:
    combos = []
    for choice in itertools.product(*(d.options for d in dims)):
        flat: Flat = {}
        for o in choice:
            flat.update(o.flat)
        combos.append(Combo({d.key: o for d, o in zip(dims, choice, strict=True)}, flat))
    for rule in excludes:
        if not any(rule.matches(c.flat) for c in combos):
            raise _fail(rule.path, "matches no variant (left after the rules before it)")
        combos = [c for c in combos if not rule.matches(c.flat)]
        if not combos:
            raise _fail(rule.path, "excludes every remaining variant")
    return combos


def _varying(combos: Sequence[Combo]) -> list[str]:
    keys = list(combos[0].flat)
    return [k for k in keys if len({c.flat[k] for c in combos}) > 1]


LABEL_FORMAT: dict[str, Callable[[Scalar], str]] = {
    "postgres": str,
    "block_size": lambda v: f"bs={v}k",
    "wal_block_size": lambda v: f"wal={v}k",
    "wal_segsize_mb": lambda v: f"walseg={v}M",
    "segsize_gb": lambda v: f"relseg={v}G",
    "storage": str,
    "fillfactor": lambda v: f"ff={v}",
    "scale": lambda v: f"s={v}",
    "workload": str,
    "query_mode": lambda v: f"M={v}",
    "clients": lambda v: f"c={v}",
    "threads": lambda v: f"j={v}",
    "duration": lambda v: f"T={v}s",
    "warmup": lambda v: f"warmup={v}s",
    "data_checksums": lambda v: f"checksums={'on' if v else 'off'}",
}
LABEL_SKIP = ("fs", "fs_block_size")  # the storage label carries them


def _label(flat: Flat, varying: Sequence[str]) -> str:
    parts = []
    keys = [k for k in varying if k not in LABEL_SKIP] or ["block_size", "wal_block_size"]
    for k in keys:
        fmt = LABEL_FORMAT.get(k)
        parts.append(fmt(flat[k]) if fmt else f"{k.removeprefix('settings.')}={flat[k]}")
    return " ".join(parts)


def _dims(flat: Flat, varying: Sequence[str]) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for k in varying:
        v = flat[k]
        out[DIM_NAMES.get(k, k)] = ("on" if v else "off") if isinstance(v, bool) else v
    return out


def _references(
    raw: Any, combos: Sequence[Combo], labels: Sequence[str], varying: Sequence[str], known: Any
) -> list[int]:
    """For each combo, the index of its reference combo."""
    n = len(combos)
    if raw is None:
        if n == 1:
            return [0]
        raise _fail(
            "experiment.reference",
            "missing: which variant do the others compare with?",
            "a selector such as { block_size = 8 } or a label: " + ", ".join(map(repr, labels)),
        )
    if isinstance(raw, str):
        if raw not in labels:
            raise _fail(
                "experiment.reference", f"{raw!r} is not a variant", ", ".join(map(repr, labels))
            )
        return [labels.index(raw)] * n
    sel = _selector(raw, "experiment.reference", known)
    refs = [i for i, c in enumerate(combos) if sel.matches(c.flat)]
    if not refs:
        raise _fail("experiment.reference", "matches no variant (all excluded)", ", ".join(labels))
    if len(refs) == 1:
        return refs * n
    return [_group_reference(i, combos, refs, sel, varying, labels) for i in range(n)]


def _group_reference(
    i: int,
    combos: Sequence[Combo],
    refs: Sequence[int],
    sel: Selector,
    varying: Sequence[str],
    labels: Sequence[str],
) -> int:
    free = [k for k in varying if k not in sel.keys]
    mine = [r for r in refs if all(combos[r].flat[k] == combos[i].flat[k] for k in free)]
    if len(mine) != 1:
        found = ", ".join(repr(labels[r]) for r in mine) or "none"
        raise _fail(
            "experiment.reference",
            f"variant {labels[i]!r} needs exactly one reference that agrees on "
            f"{', '.join(free) or 'every other dimension'}; found {found}",
            "a selector naming more dimensions, or a label",
        )
    return mine[0]


def _assemble(
    meta: dict[str, Any],
    dims: Sequence[Dimension],
    combos: list[Combo],
    excludes: Sequence[Selector],
    raw_excludes: list[Any],
    known: dict[str, list[Scalar]],
    source: str | None,
) -> Experiment:
    varying = _varying(combos) if len(combos) > 1 else []
    labels = [_label(c.flat, varying) for c in combos]
    ref_index = _references(meta["reference"], combos, labels, varying, known)
    variants = [_variant(c, labels[i], meta["settings_policy"]) for i, c in enumerate(combos)]
    ids = [v.variant_id for v in variants]
    _validate_elsewhere(variants)
    return Experiment(
        **meta,
        matrix={d.key: [o.json for o in d.options] for d in dims},
        exclude=[_jsonable(r) for r in raw_excludes],
        variant_list=tuple(variants),
        reference_map={ids[i]: ids[r] for i, r in enumerate(ref_index)},
        dims_map={ids[i]: _dims(c.flat, varying) for i, c in enumerate(combos)},
        source=source,
    )


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _variant(combo: Combo, label: str, policy: str) -> Variant:
    """The variant carries the settings as written in the file; the runner applies the
    policy with blocklab.settings_policy.convert() and the settings catalogues of its
    build and its reference's build."""
    o = {k: opt.value for k, opt in combo.options.items()}
    settings = {k.removeprefix("settings."): v for k, v in o.items() if k.startswith("settings.")}
    pg, wl = o["postgres"], o["workload"]
    try:
        return Variant(
            build=BuildRequest(
                pg=pg["pg"],
                source=pg["source"],
                patches=tuple(pg["patches"]),
                block_size_kb=o["block_size"],
                wal_block_size_kb=o["wal_block_size"],
                segsize_gb=o["segsize_gb"],
                configure_args=tuple(pg["configure_args"]),
            ),
            storage=o["storage"],
            dataset=DatasetRequest(scale=o["scale"], fillfactor=o["fillfactor"]),
            workload=WorkloadRequest(
                builtin=wl["builtin"],
                scripts=tuple(wl["scripts"]),
                query_mode=wl["query_mode"],
                clients=o["clients"],
                threads=min(o["threads"], o["clients"]),
                duration_s=o["duration"],
                warmup_s=o["warmup"],
            ),
            settings=tuple(sorted(settings.items())),
            settings_policy="bytes" if policy == "bytes" else "native",
            wal_segsize_mb=o["wal_segsize_mb"],
            data_checksums=o["data_checksums"],
            label=label,
        )
    except pydantic.ValidationError as e:
        raise _fail("matrix", f"variant {label!r}: {_pydantic_message(e)}") from e


def _pydantic_message(e: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, err['loc']))}: {err['msg']}" if err["loc"] else err["msg"]
        for err in e.errors()
    )


def _validate_elsewhere(variants: Iterable[Variant]) -> None:
    """Build and storage checks belong to their modules (blocklab.build, blocklab.storage);
    each storage must hold what blocklab.sizing estimates its largest variant needs."""
    from blocklab import build, sizing, storage
    from blocklab.paths import Paths

    variants = list(variants)
    builds = {v.build.digest(): v.build for v in variants}
    storages = {v.storage.digest(): v.storage for v in variants}
    for req in builds.values():
        try:
            build.validate(req)
        except UserError as e:
            raise UserError(f"matrix.postgres (pg {req.pg}, source {req.source}): {e}") from e
    paths = Paths.from_env()
    for sreq in storages.values():
        storage.validate(sreq, paths=paths, key="matrix.storage")
    for sreq, needs in sizing.needs_by_storage(variants).items():
        storage.check_room(sreq, needs, paths=paths, key="matrix.storage")


# ---------------------------------------------------------------- the demo


def demo(
    *,
    rounds: int | None = None,
    duration_s: int | None = None,
    scale: int | None = None,
    clients: int | None = None,
) -> Experiment:
    """The built-in experiment: PostgreSQL 18, 4 kB vs 8 kB data pages, 8 kB WAL blocks.

    pgbench simple-update (-N) with prepared statements, 4 clients, scale 10, 6 rounds of
    20 s runs after a 5 s warmup: 12 runs, about 7 minutes on top of the two builds.
    """
    data = {
        "experiment": {
            "name": "demo-page-size",
            "description": "PostgreSQL 18: 4 kB vs 8 kB data pages (8 kB WAL blocks), "
            "pgbench simple-update -M prepared",
            "rounds": 6 if rounds is None else rounds,
            "reference": {"block_size": 8},
            "settings_policy": "bytes",
        },
        "matrix": {
            "postgres": "18",
            "block_size": [4, 8],
            "wal_block_size": 8,
            "storage": {"kind": "dir"},
            "scale": 10 if scale is None else scale,
            "fillfactor": 100,
            "workload": {"builtin": "simple-update", "query_mode": "prepared"},
            "clients": 4 if clients is None else clients,
            "threads": 2,
            "duration": 20 if duration_s is None else duration_s,
            "warmup": 5,
            "settings": {"shared_buffers": "128MB", "max_wal_size": "1GB"},
        },
    }
    return from_dict(data, base=Path.cwd(), source=None)

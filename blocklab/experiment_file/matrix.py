"""The [matrix] table: every dimension in one list (MATRIX), its expansion into
combinations, and each combination as a labelled Variant.

    [matrix]                          # a list makes a dimension; a scalar is fixed
    postgres = "18"                   # or { version, source, patches, configure_args }
    block_size = [2, 4, 8]            # data page, kB: 1 2 4 8 16 32
    wal_block_size = 8                # WAL block, kB: 1 2 4 8 16 32 64
    wal_segsize_mb = 16               # initdb --wal-segsize: power of two, 1..1024
    segsize_gb = 1                    # relation segment, GB
    layout_seed = [1, 2, 3]           # layout variants of the build: the backend linked in
                                      # an order drawn from each seed; absent: the ordinary link
    storage = { kind = "dir" }        # or a list of tables (blocklab.experiment_file.storage)
    fillfactor = [100, 75]            # every table of the workload, set before the load
    index_fillfactor = 90             # every B-tree index, after the load (REINDEX);
                                      # absent: the B-tree default (90)
    scale = 10                        # pgbench -s
    workload = "simple-update"        # built-in name, or { builtin | scripts, query_mode },
                                      # or { driver = "sysbench" | "tpcc", ... } (spec.workload)
    dataset = { dump = "app.dump" }   # your own database: the "queries" driver or scripts
    clients = [1, 5, 10, 15]          # pgbench -c; another driver's threads
    threads = 1                       # pgbench -j, capped at clients
    duration = 60                     # seconds (or "90s", "5min", "1h")
    warmup = 10                       # seconds run before the measured part
    data_checksums = false
    environment_pad_bytes = [0, 3000] # the server's environment grown by N bytes (moves the
                                      # stack's alignment: a control, not a geometry)
    [matrix.settings]                 # GUCs; a list varies one GUC
    shared_buffers = "128MB"
    max_wal_size = ["1GB", "4GB"]

Adding a dimension touches three files: a row in MATRIX here (a `plain(...)` row says
the key, its default, its check, the Variant field it sets, its label part) and a line above, the
field in blocklab.model, and the code that uses it (blocklab.postgres.build, a workload driver,
...). A family with a table of its own (postgres, storage, workload, settings) has its
module beside this one and a row here."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pydantic

from blocklab import model
from blocklab.experiment_file import dataset, postgres, settings, storage, workload
from blocklab.experiment_file.dimensions import (
    Dimension,
    Flat,
    LabelPart,
    Option,
    Scalar,
    SelectorValue,
    unique,
    values,
)
from blocklab.experiment_file.values import (
    boolean,
    check_keys,
    choice,
    fail,
    integer,
    parse_seconds,
    pydantic_message,
)
from blocklab.model import BuildRequest, DatasetRequest, Variant, WorkloadRequest

Reader = Callable[[Any, Path], list[Dimension]]  # (the file's value, its directory)
WAL_SEGSIZES_MB = tuple(2**i for i in range(11))  # 1 .. 1024


@dataclass(frozen=True)
class Family:
    """One matrix key: its value when the file leaves it out, and how it is read."""

    key: str
    default: Any
    read: Reader


def plain(
    key: str,
    default: Any,
    check: Callable[[Any, str], Any],
    into: str,
    label: str,
    *,
    name: str | None = None,
    select: SelectorValue | None = None,
) -> Family:
    """A dimension of plain values: `check` reads one, `into` is the Variant field it
    sets, `label` its label part ("bs={}k"), `name` its name in Experiment.dims() (default:
    the key), `select` how a selector's value for it is read (default: as written)."""
    return Family(key, default, partial(_read_plain, key, check, into, label, name, select))


def _read_plain(
    key: str,
    check: Callable[[Any, str], Any],
    into: str,
    label: str,
    name: str | None,
    select: SelectorValue | None,
    raw: Any,
    base: Path,
) -> list[Dimension]:
    path = f"matrix.{key}"
    opts = [
        Option(value, {key: value}, value) for value in (check(v, p) for v, p in values(raw, path))
    ]
    return [
        Dimension(
            key,
            unique(opts, path),
            lambda value: {into: value},
            labels={key: lambda v: label.format(_on_off(v))},
            names={key: name} if name else {},
            selector_values={key: select} if select else {},
        )
    ]


def _on_off(v: Scalar) -> Scalar:
    return ("on" if v else "off") if isinstance(v, bool) else v


def _int(lo: int, hi: int) -> Callable[[Any, str], int]:
    return lambda v, p: integer(v, p, lo, hi)


def _one_of(allowed: Sequence[int], unit: str = "") -> Callable[[Any, str], Any]:
    return lambda v, p: choice(v, p, allowed, unit)


def seconds(key: str, default: int, lo: int, into: str, label: str) -> Family:
    """A time in seconds (or "90s", "5min", "1h"), named KEY_s in Experiment.dims()."""
    return plain(
        key,
        default,
        lambda v, p: parse_seconds(v, p, lo),
        into,
        label,
        name=f"{key}_s",
        select=_selector_seconds,
    )


def _selector_seconds(value: Any, path: str) -> Any:
    return parse_seconds(value, path, 0) if isinstance(value, str) else value


KB, GB = _one_of(model.BLOCK_SIZES_KB, "kB"), _one_of(model.SEGSIZES_GB, "GB")
WAL_KB = _one_of(model.WAL_BLOCK_SIZES_KB, "kB")
# in the order of labels and of Experiment.matrix
MATRIX: tuple[Family, ...] = (
    Family("postgres", "18", postgres.read),
    plain("block_size", 8, KB, "build.block_size_kb", "bs={}k", name="block_size_kb"),
    plain(
        "wal_block_size", 8, WAL_KB, "build.wal_block_size_kb", "wal={}k", name="wal_block_size_kb"
    ),
    plain("wal_segsize_mb", 16, _one_of(WAL_SEGSIZES_MB), "wal_segsize_mb", "walseg={}M"),
    plain("segsize_gb", 1, GB, "build.segsize_gb", "relseg={}G"),
    plain("layout_seed", None, _int(1, 2**31 - 1), "build.layout_seed", "layout={}"),
    Family("storage", {"kind": "dir"}, storage.read),
    plain("fillfactor", 100, _int(10, 100), "dataset.fillfactor", "ff={}"),
    plain("index_fillfactor", None, _int(10, 100), "dataset.index_fillfactor", "iff={}"),
    plain("scale", 10, _int(1, 100000), "dataset.scale", "s={}"),
    Family("workload", "simple-update", workload.read),
    Family(dataset.KEY, None, dataset.read),  # after workload: it sets the dataset's options
    plain("clients", 4, _int(1, 10000), "workload.clients", "c={}"),
    plain("threads", 1, _int(1, 10000), "workload.threads", "j={}"),
    seconds("duration", 60, 1, "workload.duration_s", "T={}s"),
    seconds("warmup", 0, 0, "workload.warmup_s", "warmup={}s"),
    plain("data_checksums", False, boolean, "data_checksums", "checksums={}"),
    plain(
        "environment_pad_bytes",
        0,
        _int(0, model.MAX_ENV_PAD_BYTES),
        "environment_pad_bytes",
        "envpad={}",
    ),
    Family("settings", {}, settings.read),
)
MATRIX_KEYS = tuple(f.key for f in MATRIX)
OPTIONAL = (
    "index_fillfactor",
    "layout_seed",
    "environment_pad_bytes",
    dataset.KEY,
)  # keys that are a dimension only when the file gives them


def dimensions(matrix: dict[str, Any], base: Path) -> list[Dimension]:
    check_keys(matrix, MATRIX_KEYS, "matrix")
    out = []
    for f in MATRIX:
        if f.key in OPTIONAL and f.key not in matrix:
            continue  # absent: not a dimension, and not in the experiment's JSON
        raw = matrix.get(f.key, f.default)
        if f.key == "workload":  # a driver maps a given scale to its own size
            scale = matrix.get("scale")
            out += workload.read(raw, base, scale=scale if isinstance(scale, int) else None)
        else:
            out += f.read(raw, base)
    if "clients" in matrix and workload.has_own_clients(out):
        raise fail(
            "matrix.clients",
            "the workload table gives its driver's threads already",
            "threads in the workload table, or matrix.clients (a list varies it), not both",
        )
    _check_threads(matrix.get("threads"), workload.other_drivers(out))
    dataset.check_pairing(out)
    return out


def _check_threads(raw: Any, others: list[str]) -> None:
    """matrix.threads is pgbench -j: another driver's concurrency is its clients, so a
    threads value other than 1 would change nothing there (refused, not ignored)."""
    given = raw if isinstance(raw, list) else [raw]
    if not others or all(v in (None, 1) for v in given):
        return
    raise fail(
        "matrix.threads",
        f"is pgbench -j; the {' and '.join(others)} driver's concurrency is not set by it",
        "threads in the workload table (e.g. workload = { driver = "
        f'"{others[0]}", threads = 4 }}), or matrix.clients (a list varies it)',
    )


def check_distinct(variants: Sequence[Variant], combos: Sequence[Combo]) -> None:
    """Two combinations that make one variant (one id) are an error naming the dimensions
    that differ between them: they would be counted twice and run once."""
    seen: dict[str, int] = {}
    for i, v in enumerate(variants):
        j = seen.setdefault(v.variant_id, i)
        if j == i:
            continue
        a, b = combos[j].flat, combos[i].flat
        keys = [f"matrix.{k}" for k in a if a[k] != b.get(k)]
        raise fail(
            ", ".join(keys) or "matrix",
            f"variants {variants[j].label!r} and {v.label!r} are the same run (variant id "
            f"{v.variant_id}): these values change nothing here"
            + (" (threads is capped at clients)" if "matrix.threads" in keys else ""),
            "values that change the run, or an exclude for one of them",
        )


# ---------------------------------------------------------------- expansion


@dataclass
class Combo:
    options: dict[str, Option]  # dimension key -> its option in this combination
    flat: Flat = field(default_factory=dict)


def combos(dims: Sequence[Dimension]) -> list[Combo]:
    """Every combination of one option per dimension, in matrix order."""
    out = []
    for chosen in itertools.product(*(d.options for d in dims)):
        flat: Flat = {}
        for o in chosen:
            flat.update(o.flat)
        out.append(Combo({d.key: o for d, o in zip(dims, chosen, strict=True)}, flat))
    return out


def varying(combos: Sequence[Combo]) -> list[str]:
    """The selector keys whose value differs between combinations."""
    if len(combos) < 2:
        return []
    keys = list(combos[0].flat)
    return [k for k in keys if len({c.flat[k] for c in combos}) > 1]


def known_values(dims: Sequence[Dimension]) -> dict[str, list[Scalar]]:
    """Selector key -> the values the matrix gives it."""
    known: dict[str, list[Scalar]] = {}
    for d in dims:
        for o in d.options:
            for k, v in o.flat.items():
                known.setdefault(k, [])
                if v not in known[k]:
                    known[k].append(v)
    return known


def label(flat: Flat, varying: Sequence[str], dims: Sequence[Dimension]) -> str:
    """'bs=4k c=1': the varying dimensions' label parts (both block sizes when none varies)."""
    parts: dict[str, LabelPart | None] = {k: f for d in dims for k, f in d.labels.items()}
    shown = [k for k in varying if parts.get(k, str) is not None]
    out = []
    for k in shown or ["block_size", "wal_block_size"]:
        part = parts.get(k)
        out.append(part(flat[k]) if part else f"{k}={flat[k]}")
    return " ".join(out)


def dims_of(flat: Flat, varying: Sequence[str], dims: Sequence[Dimension]) -> dict[str, Scalar]:
    """What Experiment.dims() says of one variant: its varying dimensions' values."""
    names: Mapping[str, str] = {k: n for d in dims for k, n in d.names.items()}
    out: dict[str, Scalar] = {}
    for k in varying:
        v = flat[k]
        out[names.get(k, k)] = ("on" if v else "off") if isinstance(v, bool) else v
    return out


def to_variant(combo: Combo, dims: Sequence[Dimension], label: str, policy: str) -> Variant:
    """The variant carries the settings as written in the file; the runner applies the
    policy (blocklab.postgres.settings_policy.for_variant) with the builds' settings catalogues."""
    parts: dict[str, dict[str, Any]] = {"": {}, "build": {}, "dataset": {}, "workload": {}}
    parts["settings"] = {}
    for d in dims:
        for name, value in d.fields(combo.options[d.key].value).items():
            part, _, leaf = name.partition(".") if "." in name else ("", "", name)
            parts[part][leaf] = value
    w = parts["workload"]
    own_clients = w.pop(f"{workload.CLIENTS}_of_driver", None)
    if own_clients is not None:
        w["clients"] = own_clients
    if w.get("driver", model.DEFAULT_DRIVER) != model.DEFAULT_DRIVER:
        w["threads"] = 1  # pgbench -j; a driver's concurrency is its clients
    w["threads"] = min(w["threads"], w["clients"])
    try:
        return Variant(
            build=BuildRequest(**parts["build"]),
            dataset=DatasetRequest(**parts["dataset"]),
            workload=WorkloadRequest(**w),
            settings=tuple(sorted(parts["settings"].items())),
            settings_policy="bytes" if policy == "bytes" else "native",
            label=label,
            **parts[""],
        )
    except pydantic.ValidationError as e:
        raise fail("matrix", f"variant {label!r}: {pydantic_message(e)}") from e

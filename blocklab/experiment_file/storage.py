"""matrix.storage: tables with the keys of blocklab.model.StorageRequest; a list of
file-system block sizes expands into one storage per size. Only what the file says is
checked here; what the machine can provision is blocklab.execution.preflight's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic

from blocklab import model
from blocklab.experiment_file.dimensions import (
    Dimension,
    Flat,
    Option,
    unique,
    unique_labels,
    values,
)
from blocklab.experiment_file.values import (
    boolean,
    check_keys,
    choice,
    fail,
    integer,
    parse_size,
    pydantic_message,
    str_list,
    string,
    table,
)
from blocklab.model import StorageRequest

KEYS = (
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


def read(raw: Any, base: Path) -> list[Dimension]:
    path = "matrix.storage"
    opts = []
    for v, p in values(raw, path):
        for req in _requests(table(v, p), base, p, allow_wal=True):
            opts.append(Option(req, _flat(req), req.model_dump(mode="json")))
    return [
        Dimension(
            "storage",
            unique_labels(unique(opts, path), "storage"),
            lambda req: {"storage": req},
            labels={"storage": str, "fs": None, "fs_block_size": None},  # the label has them
            selector_values={"fs_block_size": _fs_block_size},
        )
    ]


def _requests(t: dict[str, Any], base: Path, path: str, *, allow_wal: bool) -> list[StorageRequest]:
    check_keys(t, KEYS if allow_wal else tuple(k for k in KEYS if k != "wal"), path)
    fields = _fields(t, base, path)
    if "wal" in t:
        wal = _requests(table(t["wal"], f"{path}.wal"), base, f"{path}.wal", allow_wal=False)
        if len(wal) != 1:
            raise fail(f"{path}.wal.block_size", "the WAL storage takes one block size")
        fields["wal"] = wal[0]
    return [_make(fields, bs, path) for bs in _fs_block_sizes(t, path)]


def _fields(t: dict[str, Any], base: Path, path: str) -> dict[str, Any]:
    """The StorageRequest fields of one table, but for block_size and wal."""
    kind = t.get("kind", "dir")
    fields: dict[str, Any] = {"kind": choice(kind, f"{path}.kind", model.STORAGE_KINDS)}
    if "size_mb" in t:
        fields["size_mb"] = integer(t["size_mb"], f"{path}.size_mb", 1)
    for key in ("mount_options", "mkfs_options"):
        if key in t:
            fields[key] = tuple(str_list(t[key], f"{path}.{key}"))
    if "path" in t:
        text = string(t["path"], f"{path}.path")
        fields["path"] = text if kind == "device" else str((base / text).resolve())
    for key in ("erase_confirmed", "drop_caches"):
        if key in t:
            fields[key] = boolean(t[key], f"{path}.{key}")
    if "fs" in t:
        fields["fs"] = choice(t["fs"], f"{path}.fs", ("ext4", "xfs", "btrfs"))
    if "memory_limit" in t:
        limit = parse_size(t["memory_limit"], f"{path}.memory_limit")
        if limit < 16 * 1024**2:
            raise fail(f"{path}.memory_limit", f"{limit} bytes is too small", '>= "16MiB"')
        fields["memory_limit_bytes"] = limit
    return fields


def _fs_block_sizes(t: dict[str, Any], path: str) -> list[int | None]:
    if "block_size" not in t:
        return [None]
    out: list[int | None] = []
    for v, p in values(t["block_size"], f"{path}.block_size"):
        size = parse_size(v, p)
        if size < 512 or size & (size - 1):
            raise fail(
                p,
                f"{size} bytes is not a file-system block size (it is in bytes, not kB)",
                'a power of two >= 512 bytes, e.g. 4096 or "4k"',
            )
        out.append(size)
    return out


def _make(fields: dict[str, Any], block_size: int | None, path: str) -> StorageRequest:
    try:
        return StorageRequest(**fields, block_size=block_size)
    except pydantic.ValidationError as e:
        raise fail(path, pydantic_message(e)) from e


def _flat(req: StorageRequest) -> Flat:
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


def _fs_block_size(value: Any, path: str) -> Any:
    return value if value == "default" else parse_size(value, path)

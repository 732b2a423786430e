"""matrix.settings: PostgreSQL settings (GUCs) written to every variant's server; a list
varies one setting, and each varied setting is a dimension of its own ("settings.NAME")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from blocklab.experiment_file.dimensions import Dimension, Option, unique, values
from blocklab.experiment_file.values import fail, guc_value, table

GUC_RE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
RESERVED = (
    "port",
    "listen_addresses",
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
)


def read(raw: Any, base: Path) -> list[Dimension]:
    return [_one(name, value) for name, value in table(raw, "matrix.settings").items()]


def _one(name: str, raw_value: Any) -> Dimension:
    path = f"matrix.settings.{name}"
    if not GUC_RE.match(name):
        raise fail(path, "not a setting name", "lower-case PostgreSQL GUC names")
    if name in RESERVED:
        raise fail(path, "blocklab sets this itself (private socket, data directory)")
    key = f"settings.{name}"
    opts = [
        Option(val, {key: val}, val)
        for val in (guc_value(v, p) for v, p in values(raw_value, path))
    ]
    return Dimension(
        key,
        unique(opts, path),
        lambda value: {key: value},
        labels={key: lambda v: f"{name}={v}"},
        selector_values={key: guc_value},
    )


def flatten(selector: dict[str, Any], path: str) -> dict[str, Any]:
    """A selector's nested settings table as "settings.NAME" keys."""
    out = {k: v for k, v in selector.items() if k != "settings"}
    if "settings" in selector:
        for name, v in table(selector["settings"], f"{path}.settings").items():
            out[f"settings.{name}"] = v
    return out

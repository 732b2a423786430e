"""matrix.postgres: a major version ("18"), or { version, source, patches, configure_args }
with paths relative to the experiment file. Selectors name it by label ("pg18") or major."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blocklab.experiment_file.dimensions import Dimension, Option, unique, unique_labels, values
from blocklab.experiment_file.values import check_keys, fail, resolve, str_list, string, table

KEYS = ("version", "source", "patches", "configure_args")


def read(raw: Any, base: Path) -> list[Dimension]:
    path = "matrix.postgres"
    opts = []
    for v, p in values(raw, path):
        value = _one(v, base, p)
        opts.append(Option(value, {"postgres": _label(value)}, value))
    return [
        Dimension(
            "postgres",
            unique_labels(unique(opts, path), "postgres"),
            _fields,
            labels={"postgres": str},
            selector_values={"postgres": _selector_value},
        )
    ]


def _one(v: Any, base: Path, p: str) -> dict[str, Any]:
    t = {"version": v} if isinstance(v, str | int) and not isinstance(v, bool) else v
    t = table(t, p)
    check_keys(t, KEYS, p)
    version = str(t.get("version", "18"))
    if not version.isdigit():
        raise fail(f"{p}.version", f"{version!r} is not a major version", '"15", "17", "18"')
    source = string(t.get("source", "debian"), f"{p}.source")
    if source != "debian":
        source = resolve(source, base, f"{p}.source", "source")
    patches = [
        resolve(x, base, f"{p}.patches[{i}]", "patch")
        for i, x in enumerate(str_list(t.get("patches", []), f"{p}.patches"))
    ]
    args = str_list(t.get("configure_args", []), f"{p}.configure_args")
    return {"pg": version, "source": source, "patches": patches, "configure_args": args}


def _label(v: dict[str, Any]) -> str:
    label = f"pg{v['pg']}" if v["source"] == "debian" else Path(v["source"]).name
    for patch in v["patches"]:
        label += "+" + Path(patch).stem
    return label


def _fields(v: dict[str, Any]) -> dict[str, Any]:
    return {
        "build.pg": v["pg"],
        "build.source": v["source"],
        "build.patches": tuple(v["patches"]),
        "build.configure_args": tuple(v["configure_args"]),
    }


def _selector_value(value: Any, path: str) -> Any:
    """A major version stands for its Debian build's label: 18 -> "pg18"."""
    if isinstance(value, int | str) and str(value).isdigit():
        return f"pg{value}"
    return value

"""TOML values to typed values: each reader names the key path and the allowed values
in its UserError ("matrix.clients[1]: 0 is out of range; allowed: 1..10000")."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydantic

from blocklab.errors import UserError

SIZE_RE = re.compile(r"^\s*(\d{1,18})\s*([A-Za-z]*)\s*$")  # 18 digits: an int64 and more
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


def fail(path: str, problem: str, allowed: str = "") -> UserError:
    return UserError(f"{path}: {problem}" + (f"; allowed: {allowed}" if allowed else ""))


def check_keys(table: dict[str, Any], allowed: Sequence[str], path: str) -> None:
    for key in table:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise fail(where, "unknown key", ", ".join(allowed))


def table(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(path, f"expected a table, got {show(value)}")
    return value


def show(value: Any) -> str:
    return f"{type(value).__name__} {json.dumps(value, default=str)}"


def integer(value: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, f"expected an integer, got {show(value)}", _range(lo, hi))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise fail(path, f"{value} is out of range", _range(lo, hi))
    return value


def _range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    if lo is not None:
        return f">= {lo}"
    return "" if hi is None else f"<= {hi}"


def number(value: Any, path: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(path, f"expected a number, got {show(value)}")
    if not math.isfinite(value):
        raise fail(path, f"{value} is not a finite number")
    if positive and value <= 0:
        raise fail(path, f"{value} must be positive", "> 0")
    return float(value)


def choice(value: Any, path: str, choices: Sequence[Any], unit: str = "") -> Any:
    if isinstance(value, bool) or value not in choices:
        allowed = ", ".join(map(str, choices)) + (f" ({unit})" if unit else "")
        raise fail(path, f"{json.dumps(value, default=str)} is not allowed", allowed)
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {show(value)}")
    return value


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise fail(path, f"expected true or false, got {show(value)}")
    return value


def str_list(value: Any, path: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise fail(path, f"expected a string or a list of strings, got {show(value)}")
    return [string(v, f"{path}[{i}]") for i, v in enumerate(value)]


def parse_size(value: Any, path: str) -> int:
    """Bytes from 4096, "4k", "4kB", "1GiB" (1024-based, as PostgreSQL counts)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return integer(value, path, 0)
    m = SIZE_RE.match(value) if isinstance(value, str) else None
    if not m or m.group(2).lower() not in SIZE_UNITS:
        raise fail(path, f"not a size: {show(value)}", 'bytes or "4k", "512MiB", "1GB"')
    return int(m.group(1)) * SIZE_UNITS[m.group(2).lower()]


def parse_seconds(value: Any, path: str, lo: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return integer(value, path, lo)
    m = TIME_RE.match(value) if isinstance(value, str) else None
    if not m:
        raise fail(path, f"not a duration: {show(value)}", 'seconds, or "90s", "5min", "1h"')
    return integer(int(m.group(1)) * TIME_UNITS[m.group(2)], path, lo)


def resolve(path_text: str, base: Path, path: str, what: str) -> str:
    """A file the experiment names (a script, a patch, a source), relative to the
    experiment file's directory; it must exist."""
    p = Path(path_text).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.exists():
        raise fail(path, f"{what} {str(p)!r} does not exist")
    return str(p.resolve())


def guc_value(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str) and any(c in value for c in "\n\r\x00"):
        raise fail(path, "contains a line break or NUL: a setting value is one line of text")
    if isinstance(value, int | float | str):
        return str(value)
    raise fail(path, f"expected a string, number or boolean, got {show(value)}")


def pydantic_message(e: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, err['loc']))}: {err['msg']}" if err["loc"] else err["msg"]
        for err in e.errors()
    )

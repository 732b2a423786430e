"""Each setting of an experiment against a build's own catalogue (pg_settings): the name
is one the build knows (else "did you mean", by difflib), the value has the setting's
type, a unit the setting takes and lies within its min and max, an enum's value is one
of its enumvals. Pure: `plan` and `run` call it for every build already cached, so a
typo fails in a second, not when a server refuses to start an hour later.

Names with a dot (auto_explain.log_min_duration) are a library's placeholders: the
catalogue of a fresh cluster does not know them, so they are not checked here.
"""

from __future__ import annotations

import difflib
import re

from blocklab.errors import UserError
from blocklab.postgres.settings_policy import Catalogue, Guc

# PostgreSQL's units (guc.c memory_unit_conversion_table, time_unit_conversion_table):
# memory in bytes, time in milliseconds
MEMORY_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
NUMBER = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*")
HEX = re.compile(r"\s*0x[0-9a-fA-F]+\s*")
BOOLEAN_WORDS = ("on", "off", "true", "false", "yes", "no", "1", "0")


def check(settings: dict[str, str], catalogue: Catalogue, where: str) -> None:
    """UserError naming matrix.settings.NAME for the first setting `catalogue` refuses;
    `where` names the build ("PostgreSQL 18.1, build ab12")."""
    known = {n.lower(): g for n, g in catalogue.gucs.items()}  # DateStyle = datestyle
    for name, value in settings.items():
        if "." in name:
            continue
        guc = known.get(name.lower())
        key = f"matrix.settings.{name}"
        if guc is None:
            close = difflib.get_close_matches(name.lower(), list(known), n=3, cutoff=0.75)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UserError(f"{key}: not a setting of {where}{hint}")
        problem = value_problem(guc, value)
        if problem:
            raise UserError(f"{key}: {problem} ({where})")


def value_problem(guc: Guc, value: str) -> str | None:
    """Why `value` is not one `guc` takes, or None."""
    text = value.strip().strip("'").strip()
    if guc.vartype == "bool":
        return None if _is_bool(text) else f"{value!r} is not a boolean; allowed: on, off"
    if guc.vartype == "enum":
        allowed = guc.allowed_values()
        if allowed is None or text.lower() in (a.lower() for a in allowed):
            return None
        return f"{value!r} is not one of its values; allowed: {', '.join(allowed)}"
    if guc.vartype in ("integer", "real"):
        return _number_problem(guc, text, value)
    return None  # a string: the server says what it makes of it


def _is_bool(text: str) -> bool:
    low = text.lower()
    if low in BOOLEAN_WORDS:
        return True
    return bool(low) and any(w.startswith(low) for w in ("true", "false", "yes", "no", "of"))


def _number_problem(guc: Guc, text: str, value: str) -> str | None:
    if guc.vartype == "integer" and HEX.fullmatch(text):
        amount = float(int(text, 16))
    else:
        m = NUMBER.fullmatch(text)
        if m is None:
            return f"{value!r} is not a number; allowed: {_allowed(guc)}"
        converted = _in_units(guc, float(m.group(1)), m.group(2))
        if converted is None:
            return f"{value!r} has a unit this setting does not take; allowed: {_allowed(guc)}"
        amount = converted
    low, high = _float(guc.min_val), _float(guc.max_val)
    if (low is not None and amount < low) or (high is not None and amount > high):
        unit = f" {guc.unit}" if guc.unit else ""
        return f"{value!r} is outside {guc.min_val}..{guc.max_val}{unit}"
    return None


def _in_units(guc: Guc, number: float, unit: str) -> float | None:
    """`number unit` in the setting's own units; None for a unit it does not take."""
    if not unit:
        return number
    own = _unit_size(guc.unit)
    if own is None:
        return None
    table, size = own
    if unit not in table:
        return None
    return number * table[unit] / size


def _unit_size(unit: str) -> tuple[dict[str, float], float] | None:
    """The table a setting's unit belongs to and its size there ('8kB' -> memory, 8192)."""
    m = re.fullmatch(r"(\d*)([A-Za-z]+)", unit or "")
    if m is None:
        return None
    count = int(m.group(1) or 1)
    for table in (MEMORY_UNITS, TIME_UNITS):
        if m.group(2) in table:
            return {k: float(v) for k, v in table.items()}, count * table[m.group(2)]
    return None


def _allowed(guc: Guc) -> str:
    own = _unit_size(guc.unit)
    units = "" if own is None else f", or with a unit: {', '.join(own[0])}"
    of = f" of {guc.unit}" if guc.unit else ""
    return f"a number{of} from {guc.min_val} to {guc.max_val}{units}"


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None

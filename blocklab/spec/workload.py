"""matrix.workload: a built-in pgbench script name, or { builtin | scripts, query_mode }
with script files ("file.sql" or "file.sql@weight") relative to the experiment file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blocklab import model
from blocklab.spec.dimensions import Dimension, LabelPart, Option, unique, values
from blocklab.spec.values import check_keys, choice, fail, resolve, str_list, table

KEYS = ("builtin", "scripts", "query_mode")


def read(raw: Any, base: Path) -> list[Dimension]:
    path = "matrix.workload"
    opts = []
    for v, p in values(raw, path):
        t = {"builtin": v} if isinstance(v, str) else table(v, p)
        check_keys(t, KEYS, p)
        mode = choice(t.get("query_mode", "prepared"), f"{p}.query_mode", model.QUERY_MODES)
        if ("builtin" in t) == ("scripts" in t):
            raise fail(p, "give either builtin or scripts", ", ".join(model.BUILTIN_SCRIPTS))
        if "builtin" in t:
            name = choice(t["builtin"], f"{p}.builtin", model.BUILTIN_SCRIPTS)
            value = {"builtin": name, "scripts": [], "query_mode": mode}
        else:
            scripts = _scripts(t["scripts"], base, f"{p}.scripts")
            name = "+".join(Path(s).stem + (s[s.rfind("@") :] if "@" in s else "") for s in scripts)
            value = {"builtin": None, "scripts": scripts, "query_mode": mode}
        opts.append(Option(value, {"workload": name, "query_mode": mode}, value))
    labels: dict[str, LabelPart | None] = {"workload": str, "query_mode": lambda v: f"M={v}"}
    return [Dimension("workload", unique(opts, path), _fields, labels=labels)]


def _scripts(raw: Any, base: Path, path: str) -> list[str]:
    out = []
    items = str_list(raw, path)
    if not items:
        raise fail(path, "no script files", "a list of .sql files, each optionally @weight")
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        file, _, weight = item.partition("@")
        if weight and not weight.isdigit():
            raise fail(p, f"weight {weight!r} is not a whole number", '"file.sql@2"')
        resolved = resolve(file, base, p, "script file")
        out.append(resolved + (f"@{weight}" if weight else ""))
    return out


def _fields(v: dict[str, Any]) -> dict[str, Any]:
    return {
        "workload.builtin": v["builtin"],
        "workload.scripts": tuple(v["scripts"]),
        "workload.query_mode": v["query_mode"],
    }

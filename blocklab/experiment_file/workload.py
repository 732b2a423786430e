"""matrix.workload: a built-in pgbench script name, or { builtin | scripts, query_mode }
with script files ("file.sql" or "file.sql@weight") relative to the experiment file, or
{ driver = "NAME", ... } for another driver, whose keys that driver reads
(blocklab.workloads.base.WorkloadDriver.read_spec): e.g.
{ driver = "sysbench", test = "oltp_write_only", tables = 4, table_size = 100000,
threads = 8 } or { driver = "tpcc", warehouses = 1, threads = 4 }.

A driver's `threads` is its concurrency (the variant's clients); without it,
matrix.clients gives it (and may vary it). `matrix.scale`, when the file or --scale
gives it, is handed to the driver, which maps it to its own size (1: its smoke size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blocklab import model
from blocklab.experiment_file.dimensions import Dimension, Flat, LabelPart, Option, unique, values
from blocklab.experiment_file.values import check_keys, choice, fail, resolve, str_list, table
from blocklab.workloads import drivers

KEYS = ("driver", "builtin", "scripts", "query_mode")
CLIENTS = (
    "clients"  # a driver's own concurrency, applied by blocklab.experiment_file.matrix.to_variant
)


def read(raw: Any, base: Path, *, scale: int | None = None) -> list[Dimension]:
    path = "matrix.workload"
    opts = []
    for v, p in values(raw, path):
        t = {"builtin": v} if isinstance(v, str) else table(v, p)
        name = choice(t.get("driver", model.DEFAULT_DRIVER), f"{p}.driver", drivers.names())
        if name != model.DEFAULT_DRIVER:
            opts.append(_driver_option(name, t, p, scale, base))
            continue
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
        flat = {"workload": name, "query_mode": mode, "driver": model.DEFAULT_DRIVER}
        opts.append(Option(value, flat, value))
    labels: dict[str, LabelPart | None] = {
        "workload": str,
        "query_mode": lambda v: f"M={v}",
        "driver": None,
    }
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


def _driver_option(
    name: str, t: dict[str, Any], path: str, scale: int | None, base: Path
) -> Option:
    """A non-pgbench driver's table, read by the driver; a `file` key (the queries
    driver's) is resolved against the experiment file's directory first."""
    keys = {k: v for k, v in t.items() if k != "driver"}
    if isinstance(keys.get("file"), str):
        keys["file"] = resolve(keys["file"], base, f"{path}.file", f"{name} file")
    spec = drivers.get(name).read_spec(keys, path, scale=scale)
    value = {
        "driver": name,
        "dataset": model.options_of(spec.dataset),
        "run": model.options_of(spec.run),
        CLIENTS: spec.clients,
    }
    flat: Flat = {"workload": spec.label, "driver": name, "query_mode": "-"}
    return Option(value, flat, {"driver": name, **spec.dataset, **spec.run, CLIENTS: spec.clients})


def has_own_clients(dims: list[Dimension]) -> bool:
    """Whether a workload table gives its driver's concurrency (threads)."""
    return any(
        isinstance(o.value, dict) and o.value.get(CLIENTS) is not None
        for d in dims
        if d.key == "workload"
        for o in d.options
    )


def other_drivers(dims: list[Dimension]) -> list[str]:
    """The drivers other than pgbench that the workload dimension uses."""
    return sorted(
        {
            o.value["driver"]
            for d in dims
            if d.key == "workload"
            for o in d.options
            if isinstance(o.value, dict)
            and o.value.get("driver", model.DEFAULT_DRIVER) != model.DEFAULT_DRIVER
        }
    )


def _fields(v: dict[str, Any]) -> dict[str, Any]:
    if v.get("driver", model.DEFAULT_DRIVER) != model.DEFAULT_DRIVER:
        return {
            "workload.driver": v["driver"],
            "workload.options": v["run"],
            "workload.builtin": None,
            "dataset.driver": v["driver"],
            "dataset.options": v["dataset"],
            f"workload.{CLIENTS}_of_driver": v[CLIENTS],
        }
    return {
        "workload.builtin": v["builtin"],
        "workload.scripts": tuple(v["scripts"]),
        "workload.query_mode": v["query_mode"],
    }

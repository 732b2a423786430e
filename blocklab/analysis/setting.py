"""What an experiment ran on and with, in one line for the summary's first screen: the
host, the PostgreSQL version, the workload, its scale and clients (issue 35: none of them
was named). Read from the stored rows (pure: no database or file access here).

A value that differs between variants (a dimension) is listed once per value, "/" apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from blocklab.store import Row, run_facts

GIB = 1024**3


def setting_line(
    exp: Row,
    variants: Sequence[Row],
    runs: Sequence[Row],
    host: str = "",
    provenances: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """'host vm (AMD EPYC, 2 CPUs, 23.5 GiB) · PostgreSQL 18.6 · pgbench simple-update,
    scale 1, 2 clients'; a part with nothing stored is left out. `provenances`: the
    successful runs' provenance, parsed (ok_provenances), else parsed here."""
    workloads = [_json(v["variant_json"]) for v in variants]
    if provenances is None:
        provenances = [prov for _, prov in ok_provenances(runs)]
    parts = [
        _host(host, _json(exp["host_json"])),
        _joined("PostgreSQL ", _versions(provenances, workloads)),
        _workload(workloads),
    ]
    return " · ".join(p for p in parts if p)


def ok_provenances(runs: Sequence[Row]) -> list[tuple[str, dict[str, Any]]]:
    """(variant id, the facts of its provenance: blocklab.store.run_facts.FACTS) of each
    successful run: what the setting line and the mixed inputs' check (blocklab.analysis.
    mixed_inputs) read. A run read ahead carries them (facts_json); another, its whole
    provenance, of which the rest is dropped as it is parsed (a real run's provenance is
    12 kB: 10,000 of them kept whole tripled the parse's time, in the collector)."""
    return [(r["variant_id"], _facts(r)) for r in runs if r["status"] == "ok"]


def _facts(run: Row) -> dict[str, Any]:
    try:
        kept = run["facts_json"]
    except (KeyError, IndexError):  # a row of every column: its provenance
        return run_facts.facts_of(run_facts.parsed(run["provenance_json"]))
    return run_facts.parsed(kept)


def _json(text: str | None) -> dict[str, Any]:
    value = json.loads(text or "{}")
    return value if isinstance(value, dict) else {}


def _host(fleet_host: str, facts: dict[str, Any]) -> str:
    """The fleet host that ran the runs, else the recording machine and its facts."""
    if fleet_host:
        return f"host {fleet_host}"
    name = str(facts.get("hostname") or "")
    what = [str(facts["cpu_model"])] if facts.get("cpu_model") else []
    if facts.get("cpus"):
        what.append(f"{facts['cpus']} CPUs")
    if facts.get("mem_total_bytes"):
        what.append(f"{float(facts['mem_total_bytes']) / GIB:.1f} GiB")
    if not name and not what:
        return ""
    return f"host {name or '?'}" + (f" ({', '.join(what)})" if what else "")


def _versions(
    provenances: Sequence[Mapping[str, Any]], variants: Sequence[dict[str, Any]]
) -> list[str]:
    """The servers' own versions (the successful runs' provenance), else the major
    versions asked for."""
    found = [str(v) for prov in provenances if (v := prov.get("version"))]
    return found or [str(pg) for v in variants if (pg := v.get("build", {}).get("pg"))]


def _workload(variants: Sequence[dict[str, Any]]) -> str:
    loads = [v.get("workload", {}) for v in variants]
    names = [_workload_name(w) for w in loads]
    scales = [str(s) for v in variants if (s := v.get("dataset", {}).get("scale")) is not None]
    dumps = [d for v in variants if (d := _dump_name(v.get("dataset", {})))]
    clients = [str(c) for w in loads if (c := w.get("clients")) is not None]
    out = _joined("", names)
    if dumps:  # restored from the user's dump: its scale is not used
        out += _joined(", dump ", dumps)
    elif scales:
        out += _joined(", scale ", scales)
    if clients:
        out += _joined(", ", clients) + " clients"
    return out


def _dump_name(dataset: dict[str, Any]) -> str:
    """The file name of the user's dump the dataset is restored from ('' for none)."""
    dump = _pairs(dataset.get("options") or {}).get("dump")
    return str(dump).rsplit("/", 1)[-1] if dump else ""


def _pairs(options: Any) -> dict[str, Any]:
    """Options stored as [name, value] pairs (or already a mapping) as a mapping."""
    if isinstance(options, list):
        return {str(pair[0]): pair[1] for pair in options if len(pair) == 2}
    return dict(options)


def _workload_name(workload: dict[str, Any]) -> str:
    driver = str(workload.get("driver") or "pgbench")
    what = workload.get("builtin") or ", ".join(
        str(s).rsplit("/", 1)[-1] for s in workload.get("scripts") or ()
    )
    options = _pairs(workload.get("options") or {})
    test = options.get("test") if driver != "pgbench" else None
    return " ".join(str(p) for p in (driver, what or test) if p)


def _joined(prefix: str, values: Iterable[str]) -> str:
    distinct = list(dict.fromkeys(v for v in values if v))
    return prefix + "/".join(distinct) if distinct else ""

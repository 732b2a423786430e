"""The summary names what ran: host, PostgreSQL version, workload, scale and clients
(issue 35), from the stored rows; a value that differs between variants is listed once
per value."""

from __future__ import annotations

import json
from typing import Any

from blocklab.analysis.setting import ok_provenances, setting_line

HOST = {"hostname": "vm", "cpu_model": "AMD EPYC", "cpus": 2, "mem_total_bytes": 25276063744}


def _variant(clients: int, pg: str = "18", scale: int = 10, **workload: Any) -> dict[str, Any]:
    load = {"builtin": "simple-update", "clients": clients} | workload
    spec = {"build": {"pg": pg}, "dataset": {"scale": scale}, "workload": load}
    return {"variant_json": json.dumps(spec)}


def _run(version: str | None, status: str = "ok") -> dict[str, Any]:
    prov = {"version": version} if version else {}
    return {"variant_id": "v", "status": status, "provenance_json": json.dumps(prov)}


def test_the_line_names_host_server_workload_scale_and_clients() -> None:
    exp = {"host_json": json.dumps(HOST)}
    line = setting_line(exp, [_variant(2), _variant(2)], [_run("18.6"), _run("18.6")])
    assert line == (
        "host vm (AMD EPYC, 2 CPUs, 23.5 GiB) · PostgreSQL 18.6 · "
        "pgbench simple-update, scale 10, 2 clients"
    )


def test_a_dimension_lists_its_values_and_a_fleet_host_its_name() -> None:
    exp = {"host_json": json.dumps(HOST)}
    variants = [_variant(1, pg="17"), _variant(8, pg="18")]
    line = setting_line(exp, variants, [_run(None, "failed")], host="box-2")
    assert line == "host box-2 · PostgreSQL 17/18 · pgbench simple-update, scale 10, 1/8 clients"


def test_another_driver_is_named_with_its_test() -> None:
    exp = {"host_json": "{}"}
    v = _variant(4, driver="sysbench", builtin=None, options=[["test", "oltp_read_write"]])
    assert setting_line(exp, [v], []) == (
        "PostgreSQL 18 · sysbench oltp_read_write, scale 10, 4 clients"
    )


def test_a_dump_dataset_is_named_by_its_file_not_a_scale_it_does_not_use() -> None:
    v = _variant(1, driver="queries", builtin=None, options=[["file", "/x/queries.sql"]])
    spec = json.loads(v["variant_json"])
    spec["dataset"] = {"driver": "queries", "scale": 10, "options": [["dump", "/x/a/app.dump"]]}
    v = {"variant_json": json.dumps(spec)}
    assert setting_line({"host_json": "{}"}, [v], []) == (
        "PostgreSQL 18 · queries, dump app.dump, 1 clients"
    )


def test_provenance_facts_only_and_a_nan_in_it_is_read() -> None:
    """ok_provenances keeps what the setting line and the mixed inputs' check read of each
    run's provenance (12 kB for a real run, 10,000 of them) and reads JSON with a NaN,
    which the standard library writes and orjson refuses."""
    prov = {"version": "18.6", "build_key": "b", "dataset": {"key": "d", "scale": 1}, "x": 1}
    nan = '{"version": "18.1", "probe_facts": {"share": NaN}}'
    runs = [
        {"variant_id": "v", "status": "ok", "provenance_json": json.dumps(prov)},
        {"variant_id": "w", "status": "ok", "provenance_json": nan},
        {"variant_id": "w", "status": "failed", "provenance_json": "{}"},
    ]
    assert ok_provenances(runs) == [
        ("v", {"version": "18.6", "build_key": "b", "dataset": {"key": "d"}}),
        ("w", {"version": "18.1"}),
    ]

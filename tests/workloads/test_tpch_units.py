"""The tpch driver's pure parts on recorded real output (tests/data/tpch, tests/data/plans):
server-logged statement durations assigned to go-tpc's queries, the experiment keys,
the record's metrics and plans, and the per-query summary's plan comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.workloads import gotpc, plans, tpch, tpch_log

DATA = Path(__file__).parents[1] / "data"
LOG = (DATA / "tpch" / "server-2passes.log").read_text()


def test_the_logged_queries_are_the_22_twice_in_order() -> None:
    found = tpch_log.statements(LOG)
    assert len(found) == 44  # pings and go-tpc's view are skipped
    timings = tpch_log.assign(found, gotpc.TPCH_QUERIES, passes=2)
    assert [t.query for t in timings] == list(gotpc.TPCH_QUERIES)
    assert all(t.calls == 2 and all(d > 0 for d in t.durations_ms) for t in timings)
    # q1 scans lineitem and aggregates; q16 is the one text without go-tpc's comment
    assert "l_returnflag" in timings[0].text and "supplier_cnt" in timings[15].text
    # the server's times are not floored at 100 ms like go-tpc's
    assert min(t.mean_ms for t in timings) < 100


def test_a_missing_or_reordered_statement_is_a_mismatch() -> None:
    found = tpch_log.statements(LOG)
    with pytest.raises(tpch_log.LogMismatch, match="logged 43 statement"):
        tpch_log.assign(found[:-1], gotpc.TPCH_QUERIES, passes=2)
    with pytest.raises(tpch_log.LogMismatch, match="different texts"):
        tpch_log.assign([found[1], found[0], *found[2:]], gotpc.TPCH_QUERIES, passes=2)


def test_a_log_of_another_shape_gives_no_statement() -> None:
    assert tpch_log.statements("LOG:  duration: 1.0 ms  statement: select 1\n") == []


def test_record_metrics_and_plans() -> None:
    doc = json.loads((DATA / "tpch" / "tpch_queries-2passes.json").read_text())
    records = tpch.query_records(doc)
    assert len(records) == 22 and all(r.calls == 2 for r in records)
    assert all(len(r.plan_fingerprint or "") == 16 for r in records)
    m = tpch.metrics_of(records)
    total = sum(sum(q["durations_ms"]) for q in doc["queries"])
    assert m["query_time_total_ms"] == pytest.approx(total)
    assert m["queries_per_hour"] == pytest.approx(3_600_000 * 44 / total)
    assert m["q17_mean_ms"] == pytest.approx(sum(doc["queries"][16]["durations_ms"]) / 2)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"scale_factor": 0.001}, "scale_factor: 0.001 is not a number from 0.01 to 100"),
        ({"scale_factor": "big"}, "scale_factor"),
        ({"scale_factor": 101}, "scale_factor"),
        ({"queries": ["q23"]}, "queries"),
        ({"queries": ["q1", "q1"]}, "named twice"),
        ({"queries": "q1"}, "queries"),
        ({"passes": 0}, "passes"),
        ({"passes": True}, "passes"),
        ({"warehouses": 1}, "warehouses: unknown key"),
    ],
)
def test_bad_keys_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        tpch.read_keys(table, "matrix.workload")
    assert "matrix.workload." in str(e.value)


def test_good_keys() -> None:
    sf, opts = tpch.read_keys({"scale_factor": 0.01, "queries": ["q3", "q1"], "passes": 2}, "w")
    assert sf == 0.01 and opts.queries == ("q3", "q1") and opts.passes == 2


def test_the_run_argv_logs_only_the_measured_run(tmp_path: Path) -> None:
    from blocklab.workloads.base import Endpoint

    ep = Endpoint("/sock", 5433, "u")
    opts = tpch.RunOptions(("q1", "q6"), passes=3)
    argv = tpch.run_argv("go-tpc", ep, opts, log_statements=True)
    assert argv[argv.index("--count") + 1] == "6" and argv[argv.index("-T") + 1] == "1"
    assert argv[argv.index("--conn-params") + 1].endswith("&log_min_duration_statement=0")
    quiet = tpch.run_argv("go-tpc", ep, opts, log_statements=False)
    assert "log_min_duration_statement" not in " ".join(quiet)


def test_load_argv_sets_fillfactor_before_copy() -> None:
    from blocklab.postgres.installation import Installation
    from blocklab.workloads.base import Endpoint

    inst = Installation(Path("/pg"), "key", "18.6", 8192, 8192)
    argv = tpch.load_argv(inst, Endpoint("/s", 1, "u"), scale_factor=0.01, fillfactor=70,
                          tpchgen=Path("/bin/tpchgen-cli"))  # fmt: skip
    commands = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "ALTER TABLE lineitem SET (fillfactor = 70);" in commands[0]
    copies = [c for c in commands if c.startswith("\\copy")]
    assert len(copies) == 8 and "'/bin/tpchgen-cli csv -s 0.01 -T lineitem --stdout'" in copies[-1]
    assert commands[-1] == "VACUUM (FREEZE, ANALYZE)"


def test_hashjoin_off_plans_differ_and_the_diff_marks_nodes() -> None:
    default = json.loads((DATA / "plans" / "tpch-sf0.01-default.json").read_text())["plans"]
    off = json.loads((DATA / "plans" / "tpch-sf0.01-hashjoin-off.json").read_text())["plans"]
    changed = [
        q
        for q in default
        if plans.fingerprint(plans.normalise(default[q]))
        != plans.fingerprint(plans.normalise(off[q]))
    ]
    assert len(changed) == 20 and "q1" not in changed and "q6" not in changed
    from blocklab.analysis.query_summary import plan_lines, side_by_side

    d = plans.diff(plans.normalise(default["q3"]), plans.normalise(off["q3"]))
    left, right = plan_lines(d)
    assert any(ln.startswith("*") and "Hash Join" in ln for ln in left)
    assert not any("Hash Join" in ln for ln in right)
    assert all(" | " in ln for ln in side_by_side(left, right, 40))

"""Query plans: normalise, fingerprint and diff real EXPLAIN (FORMAT JSON) output of the
TPC-H-like queries (tests/data/plans, recorded from PG 18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blocklab.errors import UserError
from blocklab.workloads import plans

DATA = Path(__file__).parents[1] / "data" / "plans"


def recorded(setting: str) -> dict[str, Any]:
    doc = json.loads((DATA / f"tpch-sf0.01-{setting}.json").read_text())
    return doc["plans"]  # type: ignore[no-any-return]


def fingerprints(setting: str) -> dict[str, str]:
    return {q: plans.fingerprint(plans.normalise(p)) for q, p in recorded(setting).items()}


def test_same_plan_with_other_costs_has_the_same_fingerprint() -> None:
    default, costlier = recorded("default"), recorded("seq-page-cost-1.5")
    a, b = fingerprints("default"), fingerprints("seq-page-cost-1.5")
    costs = lambda p: p[0]["Plan"]["Total Cost"]  # noqa: E731
    assert all(costs(default[q]) != costs(costlier[q]) for q in default)
    assert sorted(q for q in a if a[q] != b[q]) == ["q10", "q8"]


def test_disabling_hash_joins_changes_the_fingerprint_of_every_query_that_joins() -> None:
    a, b = fingerprints("default"), fingerprints("hashjoin-off")
    assert sorted(q for q in a if a[q] == b[q]) == ["q1", "q6"]  # single-table queries


def test_fingerprints_are_stable() -> None:
    """Stored fingerprints must keep their meaning: a change of normalisation fails here."""
    assert fingerprints("default")["q3"] == "f9db711fd0e871e5"
    # The shape only: q14 and q19 differ in their conditions, not in their plan's shape.
    same = [q for q, f in fingerprints("default").items() if f == fingerprints("default")["q14"]]
    assert same == ["q14", "q19"]


def test_normalised_plan_keeps_shape_and_drops_estimates() -> None:
    q3 = plans.normalise(recorded("default")["q3"])
    text = json.dumps(q3.to_json())
    for gone in ("Cost", "Plan Rows", "Plan Width", "Alias", "Disabled", "Workers"):
        assert gone not in text
    labels = [node.label for _, node in plans.walk(q3)]
    assert labels == [
        "Limit",
        "Sort",
        "Aggregate (Hashed)",
        "Nested Loop (Inner)",
        "Hash Join (Inner)",
        "Seq Scan on orders",
        "Hash",
        "Seq Scan on customer",
        "Index Scan on lineitem using lineitem_pkey",
    ]


def test_diff_marks_the_nodes_the_forced_plan_changed() -> None:
    d = plans.diff(
        plans.normalise(recorded("default")["q3"]),
        plans.normalise(recorded("hashjoin-off")["q3"]),
    )
    assert not d.same
    assert [ln.label for ln in d.left if ln.changed] == [
        "Hash Join (Inner)",
        "Hash",
        "Seq Scan on customer",
    ]
    assert [ln.label for ln in d.right if ln.changed] == [
        "Nested Loop (Inner)",
        "Memoize",
        "Index Scan on customer using customer_pkey",
    ]
    assert plans.render(d.right)[4] == "*         Nested Loop (Inner)"
    assert plans.render(d.right)[5] == "            Seq Scan on orders"


def test_diff_of_a_plan_with_other_costs_marks_nothing() -> None:
    d = plans.diff(
        plans.normalise(recorded("default")["q3"]),
        plans.normalise(recorded("seq-page-cost-1.5")["q3"]),
    )
    assert d.same and len(d.left) == len(d.right) == 9


def test_not_an_explain_document_is_bad_input() -> None:
    with pytest.raises(UserError, match="not EXPLAIN \\(FORMAT JSON\\) output"):
        plans.normalise([{"Node Type": "Seq Scan"}])

"""Query plans: normalise EXPLAIN (FORMAT JSON) output, fingerprint it, diff two plans.

Pure (no I/O). A normalised plan keeps what makes the plan's shape: node types, join
methods, types and order (children in order), aggregate strategies, relation and index
names, scan directions, subplan and CTE names. It drops what varies between runs and
page sizes without changing the plan: costs, row estimates, widths, the planned number of
workers, aliases, conditions and the `Disabled` flag (PG 18: a node an enable_* setting
disfavours). Two plans with the same fingerprint have the same shape.

The diff aligns nodes by their position in the tree (the path of child indexes from the
root) and marks a node on either side that has no node of the same kind at the same
position on the other side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blocklab.errors import UserError

# The keys of an EXPLAIN node that make up the plan's shape (besides its children).
SHAPE_KEYS = (
    "Node Type",
    "Strategy",
    "Partial Mode",
    "Join Type",
    "Parent Relationship",
    "Relation Name",
    "Index Name",
    "Scan Direction",
    "Subplan Name",
    "CTE Name",
    "Parallel Aware",
)


@dataclass(frozen=True)
class PlanNode:
    attrs: tuple[tuple[str, Any], ...]  # the SHAPE_KEYS present, in that order
    children: tuple[PlanNode, ...]

    @property
    def label(self) -> str:
        """'Hash Join (Inner)', 'Index Scan on lineitem using lineitem_pkey', ..."""
        a = dict(self.attrs)
        text = str(a.get("Node Type", "?"))
        for key in ("Strategy", "Join Type"):
            if key in a:
                text += f" ({a[key]})"
        if "Relation Name" in a:
            text += f" on {a['Relation Name']}"
        if "Index Name" in a:
            text += f" using {a['Index Name']}"
        if "CTE Name" in a:
            text += f" on CTE {a['CTE Name']}"
        if "Subplan Name" in a:
            text = f"{a['Subplan Name']}: {text}"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.attrs)
        if self.children:
            out["Plans"] = [c.to_json() for c in self.children]
        return out


def root_of(explain: Any) -> Mapping[str, Any]:
    """The top plan node of EXPLAIN (FORMAT JSON) output: [{"Plan": {...}}] or {"Plan": ...}."""
    doc = explain[0] if isinstance(explain, list) and explain else explain
    if isinstance(doc, Mapping) and isinstance(doc.get("Plan"), Mapping):
        return doc["Plan"]
    raise UserError("plan: not EXPLAIN (FORMAT JSON) output (no top-level 'Plan' object)")


def normalise(explain: Any) -> PlanNode:
    return _node(root_of(explain))


def _node(raw: Mapping[str, Any]) -> PlanNode:
    attrs = tuple((k, raw[k]) for k in SHAPE_KEYS if k in raw)
    return PlanNode(attrs, tuple(_node(c) for c in raw.get("Plans", ())))


def fingerprint(plan: PlanNode) -> str:
    """A stable hash of the plan's shape (16 hex digits of SHA-256 of canonical JSON)."""
    canonical = json.dumps(plan.to_json(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DiffLine:
    path: tuple[int, ...]  # child indexes from the root
    label: str
    changed: bool  # no node of the same kind at this position on the other side

    @property
    def depth(self) -> int:
        return len(self.path)


@dataclass(frozen=True)
class PlanDiff:
    left: list[DiffLine]
    right: list[DiffLine]

    @property
    def same(self) -> bool:
        return not any(line.changed for line in (*self.left, *self.right))


def walk(plan: PlanNode, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], PlanNode]]:
    """Every node with its path, parents before children."""
    yield path, plan
    for i, child in enumerate(plan.children):
        yield from walk(child, (*path, i))


def diff(left: PlanNode, right: PlanNode) -> PlanDiff:
    lnodes, rnodes = dict(walk(left)), dict(walk(right))
    return PlanDiff(_side(lnodes, rnodes), _side(rnodes, lnodes))


def _side(
    mine: Mapping[tuple[int, ...], PlanNode], theirs: Mapping[tuple[int, ...], PlanNode]
) -> list[DiffLine]:
    lines = []
    for path, node in mine.items():
        other = theirs.get(path)
        lines.append(DiffLine(path, node.label, other is None or other.attrs != node.attrs))
    return lines


def render(lines: Sequence[DiffLine], marker: str = "*") -> list[str]:
    """An indented text tree, the differing nodes marked."""
    return [f"{marker if ln.changed else ' '} {'  ' * ln.depth}{ln.label}" for ln in lines]

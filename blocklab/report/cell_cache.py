"""The experiment page's cells kept from one build of a site to the next, in its manifest.

A cell's statistics (shape.cell_stats: a variant's summary of one metric and its paired
comparison with its reference) are a pure function of their inputs: the variant's values
by round, its reference's, the metric and the experiment's equivalence margin. Kept under
a digest of those inputs, a cell whose runs did not change is read back instead of made
again: one more run makes again the cells of its variant (and, when it is a reference
run, those compared with it). What a build used is what its manifest keeps, so the entries
do not pile up. A kept entry that does not read back as a cell is made again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from array import array
from collections.abc import Mapping
from typing import Any

from blocklab.analysis import stats
from blocklab.analysis.metrics import MetricInfo
from blocklab.report import manifest, shape
from blocklab.report.reduction_cache import values_digest

_SCALARS = (int, float, str, bool, type(None))
_NON_FINITE = ("nan", "inf", "-inf")  # a float's repr() (_marked)


class CellCache:
    """shape.cell_stats, answered from `kept` (a manifest's entries) where it can; `used`
    holds every entry this build used, for the next manifest."""

    def __init__(self, kept: Mapping[str, Any]):
        self.kept = kept
        self.used: dict[str, Any] = {}
        self.made = 0

    def cell_stats(
        self,
        values: Mapping[int, float],
        ref_values: Mapping[int, float] | None,
        info: MetricInfo,
        *,
        is_reference: bool = False,
        equivalence_pct: float = stats.EQUIVALENCE_PCT,
    ) -> shape.CellStats | None:
        key = _key(info, is_reference, equivalence_pct, values, ref_values)
        if key in self.used:
            return restore(self.used[key], values)
        entry = self.kept.get(key)
        if entry is not None:
            try:
                cell = restore(entry, values)
            except (TypeError, ValueError):
                pass
            else:
                self.used[key] = entry
                return cell
        self.made += 1
        cell = shape.cell_stats(
            values,
            ref_values,
            info,
            is_reference=is_reference,
            equivalence_pct=equivalence_pct,
        )
        self.used[key] = entry_of(cell)
        return cell


def _key(
    info: MetricInfo,
    is_reference: bool,
    equivalence_pct: float,
    values: Mapping[int, float | None],
    ref_values: Mapping[int, float | None] | None,
) -> str:
    """A digest of a cell's inputs: the digests of the values' reductions where both
    carry one (report.reduction_cache), else the rounds and values as machine words (a
    value's exact bits; a missing one marked apart from NaN), not as text, which cost
    about as much as making the cell."""
    h = hashlib.sha256(_prefix(info, is_reference, equivalence_pct))
    mine, theirs = values_digest(values), values_digest(ref_values)
    if mine is not None and (ref_values is None or theirs is not None):
        h.update(f"reduced:{mine}:{theirs}".encode())
        return h.hexdigest()[:32]
    for vals in (values, {} if ref_values is None else ref_values):
        items = sorted(vals.items())
        h.update(len(items).to_bytes(8, "little"))
        h.update(array("q", [r for r, _ in items]).tobytes())
        h.update(array("d", [math.nan if v is None else v for _, v in items]).tobytes())
        h.update(bytes(v is None for _, v in items))
    h.update(b"-" if ref_values is None else b"+")
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=1024)
def _prefix(info: MetricInfo, is_reference: bool, equivalence_pct: float) -> bytes:
    """What a cell's digest begins with: its metric, role and margin (a few a build, made
    once each: as JSON text for each of 2,800 cells they were half the cells' time)."""
    return manifest.digest([dataclasses.astuple(info), is_reference, equivalence_pct]).encode()


def entry_of(cell: shape.CellStats | None) -> list[Any]:
    """A cell as the manifest keeps it: [] for no cell (no finite value), else [its
    summary's fields, its comparison's (or null), its verdict]; its values are the
    inputs', not kept."""
    if cell is None:
        return []
    comp = None if cell.comparison is None else _marked(dataclasses.asdict(cell.comparison))
    return [_marked(dataclasses.asdict(cell.summary)), comp, cell.verdict]


def _marked(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields with a NaN or an infinity as ["nan"], ["inf"] or ["-inf"]: the manifest's
    JSON (report.jsontext) has no such numbers, and a field is never a list."""
    return {
        k: [repr(v)] if isinstance(v, float) and not math.isfinite(v) else v
        for k, v in fields.items()
    }


def restore(entry: Any, values: Mapping[int, float]) -> shape.CellStats | None:
    """The cell `entry` (entry_of) keeps, for these values; a ValueError or TypeError for
    an entry that is not one."""
    if entry == []:
        return None
    summary, comp, verdict = entry
    if not isinstance(verdict, str):
        raise TypeError("a kept cell's verdict is not a string")
    return shape.CellStats(
        stats.Summary(**_fields(summary)),
        None if comp is None else stats.Comparison(**_fields(comp)),
        verdict,
        shape.finite_values(values),
    )


def _fields(body: Any) -> dict[str, Any]:
    """A kept cell's fields, a marked NaN or infinity (_marked) a float again."""
    if not isinstance(body, dict):
        raise TypeError("a kept cell's fields are not scalars")
    fields = {}
    for k, v in body.items():
        if isinstance(v, list) and len(v) == 1 and v[0] in _NON_FINITE:
            v = float(v[0])
        elif not isinstance(v, _SCALARS):
            raise TypeError("a kept cell's fields are not scalars")
        fields[k] = v
    return fields

"""What an experiment's stored spec says of how to read its runs (pure): its design, its
equivalence bound and its checkpoint setting."""

from __future__ import annotations

import json

from blocklab.analysis import stats
from blocklab.experiment_file import design as designs
from blocklab.store import Row


def design_of(exp: Row) -> str:
    spec = json.loads(exp["spec_json"] or "{}")
    kind = (spec.get("design") or {}).get("kind", designs.PAIRED)
    return kind if kind in designs.DESIGNS else designs.PAIRED


def equivalence_of(exp: Row) -> float:
    """The experiment's X of "equal within ±X %" ([experiment] equivalence, else 2 %)."""
    spec = json.loads(exp["spec_json"] or "{}")
    return float(spec.get("equivalence_pct") or stats.EQUIVALENCE_PCT)


def checkpoint_of(exp: Row) -> str:
    """The experiment's [design] checkpoint ("free" when the file leaves it out)."""
    spec = json.loads(exp["spec_json"] or "{}")
    return str((spec.get("design") or {}).get("checkpoint") or "free")


def measures_whole_cycles(exp: Row) -> bool:
    """The experiment's windows are whole checkpoint cycles ([design] checkpoint =
    "cycles"): the storm of full-page images and its decay inside each window is what
    they measure on purpose, not a drift to warn about."""
    return checkpoint_of(exp) == "cycles"

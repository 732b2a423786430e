"""The A/A verdict in words (pure): an A/A comparison's true ratio is 1, so a CI that
excludes 1 is a bias of the machine or the design, and differences smaller than it are
not trustworthy, unless the comparisons fit that bias out (interleaved's storage slots:
FITTED_OUT)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from blocklab.analysis import stats
from blocklab.analysis.designs import aa_rounds
from blocklab.analysis.rounds import RunValue

# The note of an A/A whose bias every comparison fits beside its effect (interleaved's
# storage slots, blocklab.analysis.stats.paired_fit): a bias there is measured, not a risk.
FITTED_OUT = "each comparison fits the slot beside its effect"


def aa_comparison(*refs: Iterable[RunValue], higher_is_better: bool = True) -> stats.Comparison:
    """aa-control's A/A comparison: copy 1 against copy 0, paired by round. Each argument
    is one reference's runs; several (grouped references) are pooled per round by
    blocklab.analysis.designs.aa_rounds. Copies without a finite value are left out."""
    per_ref = []
    for runs in refs:
        copies: dict[int, dict[int, float]] = {}
        for r in runs:
            if r.copy in (0, 1) and r.value is not None and math.isfinite(r.value):
                copies.setdefault(r.round, {})[r.copy] = r.value
        per_ref.append(copies)
    first, second = aa_rounds(per_ref) if per_ref else ({}, {})
    return stats.compare_paired(first, second, higher_is_better=higher_is_better)


def biased(c: stats.Comparison | None) -> bool:
    """True when the A/A comparison's 95 % CI excludes 1 (no change)."""
    return c is not None and c.verdict in (stats.FASTER, stats.SLOWER)


def warns(c: stats.Comparison | None) -> bool:
    """True when the A/A's bias is a warning: its CI excludes 1 and the comparisons do
    not fit that bias out (FITTED_OUT: interleaved's storage slots)."""
    return biased(c) and c is not None and c.note != FITTED_OUT


def aa_sentence(c: stats.Comparison | None) -> str:
    """'A/A: this machine or design shows a bias of X % (95 % CI ...): ...' or 'A/A: no
    bias detected (...)'; "" without an A/A comparison."""
    if c is None:
        return ""
    if c.estimate is None or c.ci95_low is None or c.ci95_high is None:
        return f"A/A: not enough rounds for a verdict ({c.note or c.verdict})"
    if c.scale == stats.RATIO:
        centre = f"{(c.estimate - 1) * 100:+.1f} %"
        ci = f"{(c.ci95_low - 1) * 100:+.1f} % to {(c.ci95_high - 1) * 100:+.1f} %"
    else:
        centre = f"{c.estimate:+.4g}"
        ci = f"{c.ci95_low:+.4g} to {c.ci95_high:+.4g}"
    rounds = stats.rounds_text(c.n_pairs, c.sessions)
    if biased(c) and c.note == FITTED_OUT:
        return (
            f"A/A: the storage slots differ by {centre} (95 % CI {ci}, {rounds}); "
            f"{FITTED_OUT}, so this bias is taken out of the estimates"
        )
    if biased(c):
        return (
            f"A/A: this machine or design shows a bias of {centre} (95 % CI {ci}, "
            f"{rounds}): differences smaller than that are not trustworthy"
        )
    return f"A/A: no bias detected ({centre}, 95 % CI {ci}, {rounds})"

"""The overall figure of a SQL workload (pure): per variant and round, the geometric mean
of the statements' server times, and per variant its ratio to the reference with a 95 %
CI over the rounds and a verdict.

Which statements: in each round, those that ran in every variant that has a run in that
round (a statement that failed in one variant, or a variant that ran fewer, would
otherwise change the mix, not the speed). A statement left out of a round is named, with
the rounds, in `Overall.left_out`. A variant run more than once in a round (abba,
aa-control's reference) counts once per statement: the geometric mean of its copies.

The comparison is the summary's paired-round one (blocklab.analysis.stats.compare_paired:
a t interval on the per-round log ratios, TOST for "equal within ±X %"), lower is
better: a ratio below 1 with its whole interval below 1 is "faster". A geometric mean,
not an arithmetic one, so that a 20 s report query does not outweigh nine 5 ms lookups:
each statement's ratio counts alike (the geometric mean of the ratios is the ratio of the
geometric means, for the same statements).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from blocklab.analysis import stats
from blocklab.store import Row

# (variant_id, round, statement) -> server times in ms, one per run of that variant in
# that round (each run's mean over its passes)
Times = Mapping[tuple[str, int, str], list[float]]


@dataclass(frozen=True)
class OverallVariant:
    variant_id: str
    label: str
    values: dict[int, float]  # round -> geometric mean of the round's statements, ms
    summary: stats.Summary | None
    comparison: stats.Comparison | None  # against the reference; None for the reference


@dataclass(frozen=True)
class Overall:
    variants: list[OverallVariant]
    reference_id: str
    statements: dict[int, tuple[str, ...]]  # round -> the statements its figure covers
    left_out: dict[str, list[int]] = field(default_factory=dict)  # statement -> rounds

    @property
    def reference(self) -> OverallVariant | None:
        return next((v for v in self.variants if v.variant_id == self.reference_id), None)


def round_geomeans(
    times: Times,
) -> tuple[dict[str, dict[int, float]], dict[int, tuple[str, ...]], dict[str, list[int]]]:
    """(variant -> round -> geometric mean ms, round -> statements in it, statement ->
    rounds it was left out of). Non-positive or non-finite times count as not run."""
    by_round: dict[int, dict[str, dict[str, float]]] = {}  # round -> variant -> stmt -> ms
    for (vid, rnd, stmt), values in times.items():
        got = by_round.setdefault(rnd, {}).setdefault(vid, {})
        good = [v for v in values if math.isfinite(v) and v > 0]
        if good:
            got[stmt] = statistics.geometric_mean(good)
    out: dict[str, dict[int, float]] = {}
    common: dict[int, tuple[str, ...]] = {}
    left_out: dict[str, list[int]] = {}
    for rnd in sorted(by_round):
        per = by_round[rnd]
        both = set.intersection(*(set(s) for s in per.values()))
        seen = {stmt for vid, rnd_, stmt in times if rnd_ == rnd}
        for stmt in sorted(seen - both):
            left_out.setdefault(stmt, []).append(rnd)
        if not both:
            continue
        common[rnd] = tuple(sorted(both))
        for vid, got in per.items():
            out.setdefault(vid, {})[rnd] = statistics.geometric_mean([got[s] for s in common[rnd]])
    return out, common, left_out


def overall(
    times: Times,
    labels: Mapping[str, str],
    reference_id: str,
    equivalence_pct: float = stats.EQUIVALENCE_PCT,
) -> Overall | None:
    """The overall figure of the variants in `labels` (their order); None when no round
    has a statement that ran in every variant."""
    per_variant, common, left_out = round_geomeans(times)
    if not common:
        return None
    ref = per_variant.get(reference_id, {})
    variants = []
    for vid, label in labels.items():
        values = per_variant.get(vid, {})
        if not values:
            continue
        comparison = None
        if vid != reference_id and ref:
            comparison = stats.compare_paired(
                ref, values, higher_is_better=False, equivalence_pct=equivalence_pct
            )
        summary = stats.summarize(list(values.values()))
        variants.append(OverallVariant(vid, label, dict(values), summary, comparison))
    return Overall(variants, reference_id, common, left_out)


def verdict_words(c: stats.Comparison) -> str:
    """faster/slower (the whole CI on one side of 1), "equal within ±X %" (TOST), else
    the verdict as it is (undecided, not enough paired rounds, undetermined)."""
    if c.verdict == stats.EQUAL:
        return f"equal within ±{c.equivalence_pct:g} %"
    within = f", within ±{c.equivalence_pct:g} %" if c.equivalent else ""
    return c.verdict + (within if c.verdict in (stats.FASTER, stats.SLOWER) else "")


def describe(c: stats.Comparison) -> str:
    """The change of the server time in the summary's form, e.g. "-8.8 % (-12.9 to -4.5),
    faster", or "undecided (...)" without a CI."""
    if c.ratio is None:
        return verdict_words(c) + (f" ({c.note})" if c.note else "")
    gain = f"{(c.ratio - 1) * 100:+.1f} %"
    if c.ci95_low is None or c.ci95_high is None:
        return f"{gain}, {verdict_words(c)}" + (f" ({c.note})" if c.note else "")
    low, high = ((r - 1) * 100 for r in (c.ci95_low, c.ci95_high))
    return f"{gain} ({low:+.1f} to {high:+.1f}), {verdict_words(c)}"


def covered(o: Overall) -> tuple[str, str]:
    """Which statements the figure covers; those left out with their rounds ("": none)."""
    names = sorted({s for stmts in o.statements.values() for s in stmts})
    text = f"over the {len(names)} statement(s) that ran in every variant of a round"
    parts = [f"{s} (rounds {', '.join(map(str, r))})" for s, r in sorted(o.left_out.items())]
    return text, (f"left out where a variant lacks it: {'; '.join(parts)}" if parts else "")


def times_of(rows: Iterable[Row]) -> dict[tuple[str, int, str], list[float]]:
    """Times from stored per-query rows (variant_id, round, query, time_ms_mean)."""
    out: dict[tuple[str, int, str], list[float]] = {}
    for r in rows:
        key = (str(r["variant_id"]), int(r["round"]), str(r["query"]))
        out.setdefault(key, []).append(float(r["time_ms_mean"]))
    return out

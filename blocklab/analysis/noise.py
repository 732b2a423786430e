"""The per-round noise of an experiment's comparisons, measured from stored runs (for
`blocklab plan`): the experiment's own earlier runs first, else the runs of other stored
experiments that ran the same variants (the same builds, data and workload: the same
variant_id). The arithmetic is blocklab.analysis.precision's; this module only reads the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from blocklab.analysis import precision
from blocklab.analysis.summary import summarize_experiment
from blocklab.experiment_file import Experiment
from blocklab.store import ResultsStore


@dataclass(frozen=True)
class NoiseEstimate:
    noise: precision.Noise
    experiment: str  # the stored experiment it comes from
    design: str  # that experiment's design (blocklab.experiment_file.design)
    rounds: int  # the most paired rounds of one of its comparisons
    own: bool = False  # the experiment being planned (or its pilot) rather than another

    @property
    def honest_df(self) -> int:
        """The df the noise rests on: the rounds of one comparison - 1. Comparisons that
        share a reference are not independent, so their pooled df overstates it."""
        return max(1, min(self.noise.df, self.rounds - 1))

    @property
    def source(self) -> str:
        """For people: 'experiment demo-abba (design abba, 12 rounds)'."""
        return f"experiment {self.experiment} (design {self.design}, {self.rounds} rounds)"


def estimate(
    db: ResultsStore, exp: Experiment, *, prefer: str | None = None
) -> NoiseEstimate | None:
    """The pooled noise of the tps log ratios; None without two paired rounds. `prefer`:
    a stored experiment to look at first (a pilot just run)."""
    names = [r["name"] for r in db.experiments()]
    ours = {v.variant_id for v in exp.variants()}
    first = [n for n in (prefer, exp.name) if n is not None and n in names]
    order = list(dict.fromkeys([*first, *names]))
    for name in order:
        own = name in (exp.name, prefer)
        design, ratios = _ratios(db, name, ours, own=own)
        noise = precision.noise_from_rounds(ratios)
        if noise is not None:
            rounds = max(len(xs) for xs in ratios)
            return NoiseEstimate(noise, name, design, rounds, own)
    return None


def _ratios(
    db: ResultsStore, name: str, ours: set[str], *, own: bool
) -> tuple[str, list[list[float]]]:
    stored = {v["variant_id"] for v in db.variants(name)}
    if not own and len(stored & ours) < 2:
        return "", []
    summary = summarize_experiment(db, name, side=False)
    by_id = {v.variant_id: v for v in summary.variants}
    out = []
    for v in summary.variants:
        ref = by_id.get(v.reference_id or "")
        if v.is_reference or ref is None:
            continue
        if own or {v.variant_id, ref.variant_id} <= ours:
            xs = precision.log_ratios(ref.values, v.values)
            if xs:
                out.append(xs)
    return summary.design, out

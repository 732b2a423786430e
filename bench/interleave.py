"""bench_precision.py's `interleaved` arm: the demo's own interleaved round, analysed as
`blocklab summary` analyses it.

Each round is blocklab's interleaved round (Lab.run_interleaved, with the probes, as
`make demo` runs it: blocklab.execution.interleaved): both variants' servers up at once,
each on one of two storage slots that the variants swap every two rounds, one unmeasured
warm-up slice each, a CHECKPOINT right before the first measured slice with the demo's
checkpoint "aligned", then `slices` pgbench slices of `slice_s` seconds per variant in the
Thue-Morse order (A B B A B A A B ...). A variant's round value is its record's tps (its
slices' total transactions / total seconds). The arm's seconds are the whole round's wall
clock: restores, starts, warm-ups, slices and stops.

The analysis is the summary's (blocklab.analysis.summary for an interleaved experiment):
- the 4k/8k comparison fits the storage slot beside the effect (stats.compare_paired with
  the other variant's slot as the -1/+1 nuisance: interleaved_checks.slot_signs), on
  n - 2 degrees of freedom;
- the A/A is the slot A/A (interleaved_checks.slot_aa: storage slot 1 / slot 0 over both
  variants), which can see a bias between the two servers and storages;
- the carry-over is the slices right after a switch of server / right after a repeat
  (interleaved_checks.carry_over, from each record's tps_after_switch and
  tps_after_repeat), per round.
Drift inside a slice is not judged (no per-second series at 5 s): its column is n/a.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from precision_table import ArmRuns, arm_runs

from blocklab.analysis import interleaved_checks as checks
from blocklab.execution.lab import Lab
from blocklab.execution.run_state import RunLabel
from blocklab.experiment_file.design import PAIRED, RunDesign
from blocklab.model import Variant
from blocklab.paths import ensure_dir
from blocklab.store import RunRecord

RoundValues = dict[int, float]  # round -> value


@dataclass
class InterleavedArm:
    name: str
    variants: dict[str, Variant]  # two variants: the reference and the other
    reference: str
    design: RunDesign  # the demo's interleaved design (--slice-s, --slices)
    seed: int  # the slice order's and the storage slots' seed
    seconds: float = 0.0
    rounds: int = 0
    failed: int = 0  # records that failed
    executions: int = 0  # measured slices of the complete rounds
    values: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    slots: dict[str, RoundValues] = field(default_factory=dict)  # variant -> round -> slot
    switch: dict[str, RoundValues] = field(default_factory=dict)  # tps after a switch
    repeat: dict[str, RoundValues] = field(default_factory=dict)  # tps after a repeat

    @property
    def other(self) -> str:
        return next(v for v in self.variants if v != self.reference)

    def collected(self) -> ArmRuns:
        """One whole-round value per variant and round, compared with the slot fitted,
        with the slot A/A and the slices' carry-over (module docstring)."""
        tps = {v: {r: xs[0] for r, xs in rounds.items()} for v, rounds in self.values.items()}
        ref, other = self.reference, self.other
        ref_slots = self.slots.get(ref, {})
        return arm_runs(
            self,
            design=PAIRED,
            drifted=[],
            positions=[],
            runs=self.executions,
            nuisance=checks.slot_signs(self.slots.get(other, {})),
            aa=checks.slot_aa(tps.get(ref, {}), ref_slots, tps.get(other, {})),
            carry=checks.carry_over(
                (self.switch.get(v, {}), self.repeat.get(v, {})) for v in self.variants
            ),
        )

    def store(self, round_no: int, records: Mapping[str, RunRecord]) -> None:
        """A complete round's values (both records ok, with a tps)."""
        ok = {v: rec for v, rec in records.items() if rec.status == "ok" and rec.tps}
        self.failed += len(records) - len(ok)
        if set(ok) != set(self.variants):
            return
        for vid, rec in ok.items():
            self.values.setdefault(vid, {})[round_no] = [float(rec.tps or 0.0)]
            metrics = rec.metrics
            self.executions += int(metrics.get("slices") or 0)
            for into, key in (
                (self.slots, checks.STORAGE_SLOT),
                (self.switch, checks.TPS_AFTER_SWITCH),
                (self.repeat, checks.TPS_AFTER_REPEAT),
            ):
                value = metrics.get(key)
                if value is not None:
                    into.setdefault(vid, {})[round_no] = float(value)


def run_round(lab: Lab, arm: InterleavedArm, raw: Path) -> None:
    """One round of the arm (module docstring); failed records are counted and printed."""
    arm.rounds += 1
    r = arm.rounds
    raw_dirs = {vid: ensure_dir(raw / arm.name / f"r{r:03d}" / vid[:12]) for vid in arm.variants}
    label = RunLabel(experiment=f"bench-precision-{arm.name}", round_no=r, position=0)
    t0 = time.monotonic()
    try:
        records = lab.run_interleaved(
            list(arm.variants.values()), arm.design, raw_dirs, label=label, seed=arm.seed
        )
    finally:
        arm.seconds += time.monotonic() - t0
    arm.store(r, records)
    labels = {vid: v.label for vid, v in arm.variants.items()}
    print(
        f"  {arm.name} r{r}: "
        + ", ".join(
            f"{labels[vid]} {rec.tps:.0f} tps (slot {rec.metrics.get(checks.STORAGE_SLOT)})"
            if rec.status == "ok" and rec.tps
            else f"{labels[vid]} FAILED {rec.reason[:200]}"
            for vid, rec in records.items()
        ),
        flush=True,
    )

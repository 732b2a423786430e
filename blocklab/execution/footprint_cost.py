"""What the compressed-footprint step (blocklab.probes.footprint) costs after each run:
the bytes of the data volume's loop image it reads and the seconds that takes, for the
plan and its ETA. Pure: sizes come from blocklab.workloads.sizing, as the storage does."""

from __future__ import annotations

from dataclasses import dataclass

from blocklab.experiment_file import Experiment
from blocklab.probes import footprint
from blocklab.storage.kinds import image_size_bytes
from blocklab.workloads import sizing


@dataclass(frozen=True)
class FootprintCost:
    image_bytes: int  # the data volume's image: the most the step reads after a run
    seconds: float  # sync, fstrim, read and compress the image


def per_run(exp: Experiment) -> dict[str, FootprintCost]:
    """variant_id -> the step's cost after each of its runs; a variant whose runs skip it
    (design.footprint = false, or a data volume without a loop image) is not listed."""
    if exp.run_design.footprint is False:
        return {}
    variants = exp.variants()
    needs = sizing.needs_by_storage(variants)
    out = {}
    for v in variants:
        if not footprint.measured_kind(v.storage.kind):
            continue
        image = image_size_bytes(v.storage.kind, v.storage.size_mb, needs[v.storage].data.bytes)
        out[v.variant_id] = FootprintCost(image, footprint.estimate_s(image))
    return out


def describe(exp: Experiment, costs: dict[str, FootprintCost], per_round_s: float) -> str:
    """One line for the plan: whether the step runs, what it reads and costs, the switch."""
    if exp.run_design.footprint is False:
        return "footprint: off (design.footprint = false)"
    if not costs:
        return "footprint: not measured (no data volume on a loop image: ext4, xfs, btrfs)"
    largest = max(costs.values(), key=lambda c: c.image_bytes)
    asked = "asked by design.footprint = true" if exp.run_design.footprint else "on by default"
    return (
        f"footprint ({asked}; off with [design] footprint = false): after each run on loop "
        f"storage, sync + fstrim + read and compress the data image, up to "
        f"{sizing.mb(largest.image_bytes)} read per run, about {largest.seconds:.0f} s "
        f"(at {footprint.READ_COMPRESS_MB_PER_S:.0f} MB/s); about {per_round_s:.0f} s per "
        f"round, counted in the ETA"
    )

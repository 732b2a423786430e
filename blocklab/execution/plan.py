"""Pure planning: the order of every round and what an experiment will cost.

The orders of the rounds are balanced (blocklab.execution.orders: every run takes every
position equally often over a period of rounds, labelled by the experiment's seed), so
that the drift of a shared machine and the carry-over of one run into the next fall on
all variants alike, and a re-run (or a resumed run) runs exactly the same orders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from blocklab.execution import cycles, footprint_cost, orders
from blocklab.execution.footprint_cost import FootprintCost
from blocklab.experiment_file import Experiment
from blocklab.experiment_file.design import INTERLEAVED, RunDesign
from blocklab.model import BuildRequest, Variant
from blocklab.workloads import drivers

# A run's cost besides its warm-up and window: restoring the snapshot (about a tenth of
# the dataset's load estimate), start, the prepare checkpoint, probes, stop, storing.
# bench/bench_plan_eta.py (examples/fillfactor.toml, 10 s windows, quiet, 2026-11-28):
# 2.02 s per run at pgbench scale 10 (restore and sync 1.14 s) and 8.34 s at scale 100
# (5.26 s); the 8 s counted before overestimated a scale-10 round by 35 %.
PER_RUN_FIXED_S = 1.5
RESTORE_SHARE_OF_LOAD = 0.1
# interleaved, per server and round: restore, start, CHECKPOINT, stop; and per slice the
# driver's start and connection. The demo's rounds took 52.5 s for 40 s of slices and 10 s
# of warm-up on a fresh 2-core machine (2026-11-28; about 70 s on a slower one).
INTERLEAVED_SERVER_S = 1.5
PER_SLICE_OVERHEAD_S = 0.1
BUILD_S = 180.0  # one PostgreSQL build here (make -j2) plus its verification
DEFAULT_MAX_ROUNDS_FACTOR = 4  # --until-ci without --max-rounds: max(rounds x 4, 20)


def run_estimate_s(v: Variant, design: RunDesign | None = None, footprint_s: float = 0.0) -> float:
    """A run's time; with checkpoint "cycles", its warm-up, lead-in and N whole cycles of
    checkpoint_timeout instead of the matrix's warm-up and duration; `footprint_s`: the
    compressed-footprint step after it (footprint_cost)."""
    if design is not None and design.checkpoint == "cycles":
        return cycles.run_window_s(v, design.cycles) + per_run_fixed_s(v) + footprint_s
    return v.workload.duration_s + v.workload.warmup_s + per_run_fixed_s(v) + footprint_s


def per_run_fixed_s(v: Variant) -> float:
    """What a run costs besides its warm-up and window (PER_RUN_FIXED_S, plus the
    restore: a share of the dataset's load estimate)."""
    load_s = drivers.for_dataset(v.dataset).load_estimate_s(v.dataset)
    return PER_RUN_FIXED_S + RESTORE_SHARE_OF_LOAD * load_s


def interleaved_round_s(variants: list[Variant], design: RunDesign) -> float:
    """An interleaved round: per server a restore, a start and a warm-up slice, then
    2 x slices slices of slice_s seconds (each with the driver's start)."""
    servers_s = sum(INTERLEAVED_SERVER_S + v.workload.warmup_s for v in variants)
    return servers_s + 2 * design.slices * (design.slice_s + PER_SLICE_OVERHEAD_S)


def default_max_rounds(rounds: int) -> int:
    return max(rounds * DEFAULT_MAX_ROUNDS_FACTOR, 20)


@dataclass(frozen=True)
class Plan:
    experiment: Experiment
    variants: list[Variant]
    builds: list[BuildRequest]  # distinct builds the experiment needs
    builds_to_make: list[BuildRequest]  # those not in the cache
    datasets: int  # distinct datasets (build x storage x data x initdb options x load settings)
    # the variants' settings their datasets' loads run with, "name=value" (model.LOAD_SETTINGS)
    load_settings: tuple[str, ...]
    runs: int  # variants x planned rounds
    max_runs: int | None  # with until_ci_pct: variants x max rounds
    first_round: list[str]  # labels, in the order round 1 runs them
    order_note: str  # whether the planned rounds' orders balance (orders.balance_note)
    eta_builds_s: float
    eta_datasets_s: float
    eta_runs_s: float  # the planned rounds
    eta_max_runs_s: float | None
    footprint: dict[str, FootprintCost]  # variant_id -> the footprint step after its runs
    footprint_s_per_round: float  # counted in eta_runs_s

    def footprint_line(self) -> str:
        return footprint_cost.describe(self.experiment, self.footprint, self.footprint_s_per_round)

    @property
    def seconds_per_round(self) -> float:
        return self.eta_runs_s / max(1, self.experiment.rounds)

    @property
    def eta_s(self) -> float:
        return self.eta_builds_s + self.eta_datasets_s + self.eta_runs_s


def describe(
    exp: Experiment, *, cached: Callable[[BuildRequest], bool] = lambda _req: False
) -> Plan:
    """What `blocklab run` would do with this experiment; builds and runs nothing.

    `cached` says whether a build is already in the cache (the CLI asks blocklab.postgres.build).
    """
    variants = exp.variants()
    builds = list({v.build.digest(): v.build for v in variants}.values())
    to_make = [b for b in builds if not cached(b)]
    datasets = {v.dataset_key(v.build.digest()): v for v in variants}

    by_id = {v.variant_id: v for v in variants}
    kind = exp.run_design.kind
    refs = exp.reference_ids()
    slots = orders.round_slots(
        kind, list(by_id), reference=exp.reference_id(), seed=exp.seed, round_no=1, references=refs
    )
    costs = {} if kind == INTERLEAVED else footprint_cost.per_run(exp)
    footprint_s = [costs[s.variant_id].seconds if s.variant_id in costs else 0.0 for s in slots]
    per_round_s = sum(
        run_estimate_s(by_id[s.variant_id], exp.run_design, fp_s)
        for s, fp_s in zip(slots, footprint_s, strict=True)
    )
    if kind == INTERLEAVED:
        per_round_s = interleaved_round_s(variants, exp.run_design)
    max_rounds = None
    if exp.until_ci_pct is not None:
        max_rounds = exp.max_rounds or default_max_rounds(exp.rounds)
    return Plan(
        experiment=exp,
        variants=variants,
        builds=builds,
        builds_to_make=to_make,
        datasets=len(datasets),
        load_settings=tuple(
            sorted({f"{k}={x}" for v in variants for k, x in v.load_settings().items()})
        ),
        runs=len(slots) * exp.rounds,
        max_runs=None if max_rounds is None else len(slots) * max_rounds,
        first_round=[
            by_id[s.variant_id].label + (f" (copy {s.copy})" if s.copy else "") for s in slots
        ],
        order_note=_order_note(exp, len(variants), len(refs)),
        eta_builds_s=len(to_make) * BUILD_S,
        eta_datasets_s=sum(
            drivers.for_dataset(v.dataset).load_estimate_s(v.dataset) for v in datasets.values()
        ),
        eta_runs_s=per_round_s * exp.rounds,
        eta_max_runs_s=None if max_rounds is None else per_round_s * max_rounds,
        footprint=costs,
        footprint_s_per_round=sum(footprint_s),
    )


def _order_note(exp: Experiment, n_variants: int, n_references: int) -> str:
    note = orders.balance_note(exp.run_design.kind, n_variants, exp.rounds, n_references)
    b = orders.balance(exp.run_design.kind, n_variants, n_references)
    if exp.until_ci_pct is not None and b.slots > 1:
        period = b.positions_period
        note += f"; adaptive rounds stay balanced over every completed period of {period} rounds"
    if exp.run_design.kind == INTERLEAVED:
        aligned = exp.run_design.checkpoint == "aligned"
        note += "\n" + (INTERLEAVED_ALIGNED_NOTE if aligned else INTERLEAVED_CHECKPOINT_NOTE)
        note += "\n" + INTERLEAVED_SLOTS_NOTE
    return note


# what a time-driven checkpoint_timeout does to two servers driven in turns (PRECISION.md)
INTERLEAVED_CHECKPOINT_NOTE = (
    "checkpoints: each server's checkpoint_timeout runs on while the other server is driven, "
    "so each takes about twice the checkpoints per transaction of a run alone; its WAL and "
    "full-page images per transaction are not a lone run's (compare throughput and latency, "
    'or set checkpoint_timeout beyond a round, or [design] checkpoint = "aligned")'
)
INTERLEAVED_ALIGNED_NOTE = (
    "checkpoints: aligned: each server takes a CHECKPOINT right before its first measured "
    "slice and checkpoint_timeout is 1d, so both servers' WAL and full-page images per "
    "transaction come from windows that start at a checkpoint and span the same driven "
    "seconds (a checkpoint the server takes itself, max_wal_size reached, is counted in "
    "the record)"
)
INTERLEAVED_SLOTS_NOTE = (
    "storage slots: the two variants swap their storage slots every two rounds (each variant "
    "on each slot equally often over 4 rounds); the design's A/A is slot 1 / slot 0"
)


def format_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"

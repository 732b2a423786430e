"""bench_precision.py's `interleaved` arm: both variants' servers up at once, short slices.

Per round: each variant's dataset is restored into a storage of its own (the Lab's
storages are shared by variants, one server at a time: the arm provisions a second `dir`
storage per variant through the same Lab, which stops its servers and releases it on
exit), both servers start, each gets one unmeasured warm-up slice, then `slices` pgbench
slices of `slice_s` seconds per variant alternate between the two servers in the
Thue-Morse order (blocklab.execution.orders.slice_order: A B B A B A A B ...; the round's
first variant alternates from round to round), and both servers stop (by their Cluster
objects, whatever happens).
Each slice is the variant's own pgbench command line (blocklab.workloads.pgbench_driver,
-T slice_s), parsed by blocklab's parser; a variant's round value is its total
transactions / total seconds over its slices (`round_tps`; a slice's seconds are
pgbench's own: its transactions / its tps). The arm's seconds are the whole round's wall
clock: restores, starts, warm-ups, slices and stops.

Why Thue-Morse: every pair of slices (2k, 2k+1) holds each variant once, so any even
number of slices is balanced, and with 4 m slices in all the two variants' mean positions
are equal, so a drift linear in time cancels within the round (as in A B B A).

A/A: the reference's slices split in two groups by the same sequence over its own slices
(`aa_split`: its k-th slice goes to copy thue_morse(k)), not odd/even: odd/even would put
copy 1 always one slice later than copy 0, a drift that leans the A/A ratio; with a
multiple of 4 reference slices the two groups have the same mean position.

Carry-over: every slice is a PositionRun of the round (blocklab.analysis.carryover), so a
slice right after the other server's slice is "after a switch" and one after its own
server's slice "after a repeat". Drift inside a slice is not judged (no per-second series
at 5 s): its column is n/a.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from precision_table import ArmRuns, arm_runs

from blocklab.analysis.carryover import PositionRun
from blocklab.execution.lab import Lab
from blocklab.execution.orders import slice_order, thue_morse
from blocklab.execution.run_state import RunTarget
from blocklab.experiment_file.design import INTERLEAVED, PAIRED
from blocklab.model import Variant
from blocklab.paths import ensure_dir
from blocklab.workloads import dataset, sizing
from blocklab.workloads.base import endpoint
from blocklab.workloads.execution import execute

SLICE_GRACE_S = 60


# -- pure ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceResult:
    variant_id: str
    transactions: int
    seconds: float  # pgbench's own measuring time: transactions / its tps

    @property
    def tps(self) -> float:
        return self.transactions / self.seconds


def slice_result(variant_id: str, transactions: int, tps: float) -> SliceResult:
    return SliceResult(variant_id, transactions, transactions / tps)


def round_tps(slices: Sequence[SliceResult]) -> float:
    """Total transactions / total seconds over `slices`."""
    seconds_s = sum(s.seconds for s in slices)
    if not slices or seconds_s <= 0:
        raise ValueError("no slice with a measuring time")
    return sum(s.transactions for s in slices) / seconds_s


def aa_split(ref_slices: Sequence[SliceResult]) -> tuple[float, float]:
    """The reference's two A/A copies: its k-th slice goes to copy thue_morse(k)."""
    groups: tuple[list[SliceResult], list[SliceResult]] = ([], [])
    for k, s in enumerate(ref_slices):
        groups[thue_morse(k)].append(s)
    return round_tps(groups[0]), round_tps(groups[1])


# -- the arm ---------------------------------------------------------------------------------


@dataclass
class InterleavedArm:
    name: str
    variants: dict[str, Variant]  # two variants: the reference and the other
    reference: str
    slice_s: int
    slices: int  # per variant per round
    warmup_s: int
    seconds: float = 0.0
    rounds: int = 0
    failed: int = 0  # slices
    executions: int = 0  # measured slices that gave a value
    values: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    aa_copies: dict[int, list[float]] = field(default_factory=dict)
    positions: list[PositionRun] = field(default_factory=list)

    def collected(self) -> ArmRuns:
        # one whole-round value per variant and round: analysed as paired
        return arm_runs(self, design=PAIRED, drifted=[], runs=self.executions)

    def store(self, round_no: int, got: Sequence[SliceResult]) -> None:
        """A complete round's values (every slice of both variants gave one)."""
        if len(got) != 2 * self.slices:
            return
        for vid in self.variants:
            self.values.setdefault(vid, {})[round_no] = [
                round_tps([s for s in got if s.variant_id == vid])
            ]
        self.aa_copies[round_no] = list(
            aa_split([s for s in got if s.variant_id == self.reference])
        )


def run_round(lab: Lab, arm: InterleavedArm, raw: Path) -> None:
    """One round of the arm (module docstring); failed slices are counted and printed."""
    arm.rounds += 1
    r = arm.rounds
    raw_dir = ensure_dir(raw / arm.name / f"r{r:03d}")
    t0 = time.monotonic()
    targets = {vid: own_server(lab, v) for vid, v in arm.variants.items()}
    got: list[SliceResult] = []
    try:
        for t in targets.values():
            start(t)
        if all(run_slice(t, arm.warmup_s, raw_dir, f"warmup-{vid}") for vid, t in targets.items()):
            got = _slices(arm, targets, r, raw_dir)
        else:
            print(f"  {arm.name} r{r}: a warm-up slice FAILED (see {raw_dir})", flush=True)
    finally:
        for t in targets.values():
            t.cluster.stop()
        arm.seconds += time.monotonic() - t0
    arm.store(r, got)


def _slices(
    arm: InterleavedArm, targets: dict[str, RunTarget], r: int, raw_dir: Path
) -> list[SliceResult]:
    got = []
    for position, vid in enumerate(slice_order(list(arm.variants), arm.slices, r)):
        res = run_slice(targets[vid], arm.slice_s, raw_dir, f"s{position:03d}-{vid[:8]}")
        arm.positions.append(PositionRun(r, position, vid, None if res is None else res.tps))
        if res is None:
            arm.failed += 1
            continue
        arm.executions += 1
        got.append(res)
    tps = {
        vid: f"{round_tps(mine):.0f}"
        for vid in arm.variants
        if (mine := [s for s in got if s.variant_id == vid])
    }
    labels = {vid: v.label for vid, v in arm.variants.items()}
    print(f"  {arm.name} r{r}: " + ", ".join(f"{labels[v]} {x} tps" for v, x in tps.items()))
    return got


def own_server(lab: Lab, v: Variant) -> RunTarget:
    """The variant's run target on a `dir` storage of its own (same dataset snapshot,
    settings and build), so that both variants' servers can be up at once."""
    shared = lab.prepare(v)
    base = ensure_dir(lab.paths.work / INTERLEAVED / v.variant_id[:12])
    req = v.storage.model_copy(update={"path": str(base)})
    needs = sizing.needs_by_storage([v.model_copy(update={"storage": req})])[req]
    store = lab.storage(req, needs=needs)
    cluster = lab.cluster(lab.install(v.build), req, store)
    return dataclasses.replace(
        shared, cluster=cluster, devices=list(store.devices), storage_facts=dict(store.facts)
    )


def start(t: RunTarget) -> None:
    """Restore the dataset, write the variant's settings, start, vacuum and CHECKPOINT (as
    blocklab.execution.runner does before a run's warm-up)."""
    c = t.cluster
    c.stop()
    dataset.restore(t.snapshot, c.data_dir, c.wal_dir)
    c.write_settings(dict(t.settings.settings))
    c.start()
    sql = t.driver.prepare_sql(t.variant.workload)
    if sql is not None:
        c.psql(sql)
    c.psql("CHECKPOINT")


def run_slice(t: RunTarget, duration_s: int, raw_dir: Path, stem: str) -> SliceResult | None:
    """One pgbench -T duration_s against the target's server; None when it failed."""
    c, driver = t.cluster, t.driver
    argv = driver.command(
        c.inst, endpoint(c), t.variant.workload, raw_dir=None, duration_s=duration_s
    )
    res = execute(argv, raw_dir, stem, timeout_s=duration_s + SLICE_GRACE_S, server_alive=c.alive)
    result = driver.parse(res.stdout, res.stderr)
    why = res.ended or driver.verdict(res.exit_code, result, server_alive=c.alive())
    if why or result.transactions is None or result.throughput is None:
        print(f"    {stem}: FAILED {why[:200]}", flush=True)
        return None
    return slice_result(t.variant.variant_id, result.transactions, result.throughput)

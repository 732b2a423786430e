"""One round of the interleaved design: both variants' servers up at once, short slices.

Per round each of the two variants gets one of two storage slots, of the kind it asks
for (Lab.own_target: the same build, dataset snapshot and settings as its ordinary runs);
the variants swap slots every two rounds (blocklab.execution.orders.storage_slots: each
variant on each slot twice in every 4 rounds, once first and once second), so a bias of
one slot (its storage, its server) is balanced out of the comparison and estimated by
the slot A/A (blocklab.analysis.interleaved_checks.slot_aa). Each server in turn:
restore the dataset, write the settings, start, the driver's prepare SQL, CHECKPOINT, one
unmeasured warm-up slice of the matrix's warmup seconds. With design.checkpoint
"aligned" each server gets checkpoint_timeout 1d and a CHECKPOINT right before the first
measured slice, so both windows start at a checkpoint of their own and span the same
driven seconds. Then 2 x `slices` measured slices of `slice_s` seconds alternate between
the two servers in the Thue-Morse order (blocklab.execution.orders.round_slices: A B B A
B A A B ...; the round's first variant alternates from round to round), and both servers
stop in `finally`.

A variant's round is ONE record (position: its first slice's, 0 or 1; copy 0), so the
analysis treats the round as a paired one: ok only when every one of its slices gave a
value (else failed with its first failed slice's reason); transactions are the sum,
`workload_duration_s` the sum of pgbench's own seconds (a slice's transactions / its
tps), tps the total transactions / total seconds, latency_avg_ms the mean of the slices'
averages weighted by their transactions. Each slice's output is kept in the variant's raw
directory (`sNNN.stdout` ...) with `slices.csv` (position, variant_id, transactions,
seconds, tps), and the server's log of the round as `server.log`. An ok record also carries
its slices' A/A halves and carry-over (`slice_metrics`: aa_tps_half0/1 when its slices are a
multiple of 4, tps_after_switch/_repeat), which the summary turns into the design's own
A/A verdict and carry-over estimate (blocklab.analysis.interleaved_checks); every record
carries its `storage_slot` (metric and provenance) and the checkpoints its server took on
its own trigger inside the window (`interleaved_unplanned_checkpoints`: time, or WAL when
max_wal_size is reached; 0 is what aligned checkpoints promise).

Probes: each server is bracketed by the instrumentation (blocklab.probes) from before the
first measured slice to after the last, with no device: only server-level metrics are kept
(WAL bytes, full-page images, pg_stat_io, server CPU); host-wide ones are dropped, and so
are the 1 Hz series (the window holds the other server's slices). Both servers share the
machine and usually one device, so device-level metrics could not be told apart: the
record's provenance says `interleaved: device metrics not attributable`. Other processes'
use of the CPUs is measured per slice instead (an account before and after each slice in
which both servers' trees and blocklab's are known: blocklab.probes.disturbance
.read_account), written to `slices.csv` and summed over each variant's own slices
into its record's `disturbance_cpu_s` and `disturbance_cpu_share` (slices_disturbance), so
a burst of other work lands on the variant whose slices it slowed. Each measured slice
writes the driver's logs into the variant's raw directory (pgbench: its per-transaction log
sampled at 10 %), read once after the round: latency percentiles over all of the variant's
slices (slices_log_metrics).

Caveats (docs/PRECISION.md): with checkpoint "free" each server's checkpoint timer runs
in wall-clock time while it is driven about half of it, so per-transaction WAL and
full-page images are not those of a run alone ("aligned" removes this); a slice right
after a switch of server ran 3.5 % faster in the bench than one right after a repeat,
which the Thue-Morse balance cancels when both variants gain alike.
"""

from __future__ import annotations

import csv
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from blocklab import proc
from blocklab.analysis import interleaved_checks as checks
from blocklab.errors import BlocklabError, UserError
from blocklab.execution import orders, runner
from blocklab.execution.run_state import RunLabel, RunTarget
from blocklab.execution.runner import Instrumentation, InstrumentationFactory
from blocklab.experiment_file.design import ALIGNED_CHECKPOINT_TIMEOUT, RunDesign
from blocklab.model import Variant
from blocklab.postgres.cluster import ServerStartError
from blocklab.probes import disturbance
from blocklab.store import RunRecord
from blocklab.timestamps import now_iso
from blocklab.workloads import dataset
from blocklab.workloads.base import WorkloadResult, run_endpoint
from blocklab.workloads.execution import execute

SLICE_GRACE_S = 60
DEVICE_NOTE = "interleaved: device metrics not attributable"
HOST_WIDE_PREFIXES = ("host_", "disturbance_")  # the whole machine's: both servers mixed
SLICES_CSV = "slices.csv"
UNPLANNED_CHECKPOINTS = "interleaved_unplanned_checkpoints"
UNPLANNED_TRIGGERS = ("time", "wal")
# what a driver's record gives that a slice's pieces cannot make (each slice's connection)
NOT_FROM_SLICES = ("initial_connection_ms",)


class OwnServers(Protocol):
    """What a round needs of the lab (blocklab.execution.lab.Lab)."""

    def own_target(self, variant: Variant, slot: int) -> RunTarget: ...


# -- pure ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceRun:
    """One measured slice: its numbers, or why it gave none."""

    position: int
    variant_id: str
    transactions: int = 0
    seconds: float = 0.0  # pgbench's own measuring time: transactions / its tps
    latency_avg_ms: float | None = None
    reason: str = ""  # "" when the slice gave a value
    # other processes' CPU seconds and the CPUs' capacity over the slice (both servers'
    # trees and blocklab's known: blocklab.probes.disturbance); None: not measured
    other_cpu_s: float | None = None
    capacity_cpu_s: float | None = None

    @property
    def tps(self) -> float | None:
        return self.transactions / self.seconds if self.seconds > 0 and not self.reason else None


@dataclass(frozen=True)
class Totals:
    transactions: int
    seconds: float
    tps: float
    latency_avg_ms: float | None  # None when a slice did not report one


def totals(slices: Sequence[SliceRun]) -> Totals:
    """Total transactions / total seconds, and the transaction-weighted mean latency."""
    seconds = sum(s.seconds for s in slices)
    xacts = sum(s.transactions for s in slices)
    if not slices or seconds <= 0 or any(s.reason for s in slices):
        raise ValueError("totals() needs slices that all gave a measuring time")
    lat = [s.latency_avg_ms for s in slices]
    latency = None
    if xacts > 0 and all(x is not None for x in lat):
        latency = sum((s.latency_avg_ms or 0.0) * s.transactions for s in slices) / xacts
    return Totals(xacts, seconds, xacts / seconds, latency)


def first_failure(slices: Sequence[SliceRun]) -> str:
    """The first failed slice's reason ("" when every slice gave a value)."""
    bad = next((s for s in slices if s.reason), None)
    return "" if bad is None else f"slice {bad.position}: {bad.reason}"


def halves_tps(mine: Sequence[SliceRun]) -> tuple[float, float] | None:
    """A variant's A/A halves (its slices in round order): its k-th slice, k counted over
    its own slices, goes to half orders.thue_morse(k); each half's tps is its total
    transactions / total seconds. None unless the count is a multiple of 4 (then both
    halves hold as many slices with the same mean k)."""
    if not mine or len(mine) % 4:
        return None
    halves: tuple[list[SliceRun], list[SliceRun]] = ([], [])
    for k, s in enumerate(sorted(mine, key=lambda s: s.position)):
        halves[orders.thue_morse(k)].append(s)
    return totals(halves[0]).tps, totals(halves[1]).tps


def switch_repeat_tps(
    mine: Sequence[SliceRun], order: Sequence[str]
) -> tuple[float | None, float | None]:
    """The tps (total transactions / total seconds) of a variant's slices right after a
    slice of the other variant, and right after one of its own (`order`: the round's
    variant per position); the round's first slice follows none and is left out. None for
    a group without a slice."""
    switch: list[SliceRun] = []
    repeat: list[SliceRun] = []
    for s in mine:
        if s.position > 0:
            (repeat if order[s.position - 1] == s.variant_id else switch).append(s)
    return (
        totals(switch).tps if switch else None,
        totals(repeat).tps if repeat else None,
    )


def slice_metrics(mine: Sequence[SliceRun], order: Sequence[str]) -> dict[str, float]:
    """The record's A/A halves and carry-over metrics (blocklab.analysis.interleaved_checks)
    from a variant's slices that all gave a value; a metric that cannot be computed is
    left out."""
    out: dict[str, float] = {}
    halves = halves_tps(mine)
    if halves is not None:
        out[checks.AA_TPS_HALF0], out[checks.AA_TPS_HALF1] = halves
    switch, repeat = switch_repeat_tps(mine, order)
    if switch is not None:
        out[checks.TPS_AFTER_SWITCH] = switch
    if repeat is not None:
        out[checks.TPS_AFTER_REPEAT] = repeat
    return out


def write_slices_csv(path: Path, slices: Sequence[SliceRun]) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(
            ["position", "variant_id", "transactions", "seconds", "tps", "disturbance_cpu_share"]
        )
        for s in slices:
            share = slices_disturbance([s])[disturbance.CPU_SHARE]
            row = [s.position, s.variant_id, s.transactions, f"{s.seconds:.6f}", _num(s.tps)]
            out.writerow([*row, _num(share)])


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.6f}"


def slices_disturbance(slices: Sequence[SliceRun]) -> dict[str, float | None]:
    """Other processes' CPU over a variant's slices: `disturbance_cpu_s` (their sum) and
    `disturbance_cpu_share` (of the CPUs' capacity over those slices); None when a slice
    was not measured. Only the variant's own slices count: a disturbance during the other
    variant's slices is that variant's."""
    others = [s.other_cpu_s for s in slices]
    capacities = [s.capacity_cpu_s for s in slices]
    if not slices or None in others or None in capacities:
        return {disturbance.CPU_S: None, disturbance.CPU_SHARE: None}
    other = sum(x for x in others if x is not None)
    capacity = sum(x for x in capacities if x is not None)
    share = min(1.0, other / capacity) if capacity > 0 else None
    return {disturbance.CPU_S: other, disturbance.CPU_SHARE: share}


def server_metrics(metrics: Mapping[str, float | None]) -> dict[str, float | None]:
    """The probe's metrics without the machine-wide ones."""
    return {k: v for k, v in metrics.items() if not k.startswith(HOST_WIDE_PREFIXES)}


# -- a server of the round -----------------------------------------------------------------


@dataclass
class Server:
    """One variant's server in the round and what it gathered."""

    target: RunTarget
    raw_dir: Path
    started_at: str
    log_offset: int = 0
    reason: str = ""  # why it gave no slices (start or warm-up failed)
    probe: Instrumentation | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    checkpoints: list[Any] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    slot: int = 0  # the storage slot of the round (blocklab.execution.orders.storage_slots)
    aligned: bool = False  # design.checkpoint "aligned": CHECKPOINT before the first slice


def written_settings(settings: Mapping[str, str], aligned: bool) -> dict[str, str]:
    """The settings the server gets: with aligned checkpoints a checkpoint_timeout no
    round reaches, so blocklab's CHECKPOINTs are the only ones of a time trigger."""
    if not aligned:
        return dict(settings)
    return {**settings, "checkpoint_timeout": ALIGNED_CHECKPOINT_TIMEOUT}


def unplanned_checkpoints(checkpoints: Sequence[Mapping[str, Any]]) -> int:
    """The checkpoints that started inside the measured window on the server's own
    trigger (time or WAL: max_wal_size reached), not on blocklab's request."""
    return sum(
        1
        for cp in checkpoints
        if cp.get("started_in_run") and cp.get("trigger") in UNPLANNED_TRIGGERS
    )


def start(server: Server) -> None:
    """Restore the dataset, write the settings, start, prepare SQL and CHECKPOINT."""
    t, c = server.target, server.target.cluster
    c.stop()
    server.provenance["restore"] = dataset.restore(t.snapshot, c.data_dir, c.wal_dir).to_json()
    written = written_settings(t.settings.settings, server.aligned)
    c.write_settings(written)
    server.provenance["settings_written"] = written
    server.log_offset = runner.file_size(c.log_path)
    c.start(env=t.variant.server_environment())
    dataset.hand_over(c, t.driver)  # a snapshot made before the workload role
    sql = t.driver.prepare_sql(t.variant.workload)
    if sql is not None:
        c.psql(sql)
    c.psql("CHECKPOINT")


def run_slice(
    server: Server, seconds: int, stem: str, position: int, *, logged: bool = True
) -> SliceRun:
    """One driver execution of -T `seconds` against the server (the runner's command).
    `logged`: with the measured run's logs (pgbench: its sampled per-transaction log),
    which accumulate in the variant's raw directory, one file per slice's process."""
    t, c = server.target, server.target.cluster
    vid, driver = t.variant.variant_id, t.driver
    ep = run_endpoint(c, driver)
    raw_dir = server.raw_dir if logged else None
    argv = driver.command(c.inst, ep, t.variant.workload, raw_dir=raw_dir, duration_s=seconds)
    res = execute(
        argv,
        server.raw_dir,
        stem,
        timeout_s=seconds + SLICE_GRACE_S,
        server_alive=c.alive,
        state=c.state,
    )
    server.provenance.update(driver_uid=res.uid, driver_role=ep.user)
    runner.save_output(server.raw_dir, stem, argv, res.exit_code)
    result = driver.parse(res.stdout, res.stderr)
    why = res.ended or driver.verdict(res.exit_code, result, server_alive=c.alive())
    if why or result.transactions is None or not result.throughput:
        return SliceRun(position, vid, reason=why or f"{driver.name} reported no throughput")
    xacts = result.transactions
    return SliceRun(position, vid, xacts, xacts / result.throughput, result.latency_avg_ms)


def accounted_slice(server: Server, seconds: int, position: int, pids: Sequence[int]) -> SliceRun:
    """run_slice between two CPU accounts in which both servers of the round are known."""
    before = _round_account(pids)
    got = run_slice(server, seconds, f"s{position:03d}", position)
    after = _round_account(pids)
    if before is None or after is None:
        return got
    other, _kernel, capacity = disturbance.other_cpu_s(before, after)
    return dataclasses.replace(got, other_cpu_s=other, capacity_cpu_s=capacity)


def _round_account(pids: Sequence[int]) -> disturbance.CpuAccount | None:
    try:
        return disturbance.read_account(pids)
    except OSError:  # a probe must not cost the round: the slice is "not measured"
        return None


def open_server(lab: OwnServers, v: Variant, raw_dir: Path, *, slot: int, aligned: bool) -> Server:
    """The variant's server on storage slot `slot`, started and warmed up; its reason
    says what failed."""
    server = Server(
        target=lab.own_target(v, slot),
        raw_dir=raw_dir,
        started_at=now_iso(),
        slot=slot,
        aligned=aligned,
    )
    try:
        start(server)
    except ServerStartError as e:
        server.reason = runner.start_failure_reason(e, raw_dir / "server.log")
        return server
    warmup_s = v.workload.warmup_s
    if warmup_s > 0:
        warm = run_slice(server, warmup_s, "warmup", -1, logged=False)
        if warm.reason:
            server.reason = f"warm-up failed: {warm.reason}"
    return server


def begin_probes(server: Server, factory: InstrumentationFactory | None) -> None:
    """Bracket the server from now on (no device: only server-level counters)."""
    if factory is None:
        server.provenance["probes"] = "none"
        return
    target = dataclasses.replace(server.target, devices=[])
    try:
        probe = factory(runner.probe_context(target, target.cluster.log_path))
        probe.begin()
    except Exception as e:  # a probe must not cost the round; the failure is recorded
        server.provenance["probes"] = f"not started: {type(e).__name__}: {e}"
        return
    server.probe, server.provenance["probes"] = probe, "started"


def end_probes(server: Server, mine: Sequence[SliceRun]) -> None:
    if server.probe is None:
        return
    got = [s for s in mine if not s.reason]
    try:
        result = server.probe.end(sum(s.transactions for s in got), sum(s.seconds for s in got))
    except Exception as e:  # a probe must not cost the round; the failure is recorded
        server.provenance["probes"] = f"failed at end: {type(e).__name__}: {e}"
        return
    server.metrics |= server_metrics(result.metrics)
    server.checkpoints = list(result.checkpoints)
    server.metrics[UNPLANNED_CHECKPOINTS] = unplanned_checkpoints(server.checkpoints)
    server.provenance["probe_facts"] = dict(result.facts)
    missing = result.missing
    server.provenance["probe_missing"] = (
        dict(missing) if isinstance(missing, Mapping) else list(missing)
    )


def slices_log_metrics(server: Server, mine: Sequence[SliceRun]) -> dict[str, float | None]:
    """What the driver reads from its slices' logs in the raw directory (pgbench: latency
    percentiles over every sampled transaction of the variant's slices, and the log's
    coverage of their transactions); its facts go to the provenance."""
    if not mine or any(s.reason for s in mine):  # a failed record: no metrics to add
        return {}
    total = WorkloadResult(
        throughput=None,
        throughput_unit="",
        latency_avg_ms=None,
        latency_stddev_ms=None,
        transactions=sum(s.transactions for s in mine),
        failed=0,
    )
    try:
        part = server.target.driver.record(total, "", server.raw_dir)
    except (BlocklabError, OSError, ValueError) as e:  # the logs must not cost the round
        server.provenance["slice_logs"] = f"not read: {type(e).__name__}: {e}"
        return {}
    server.provenance.update(part.provenance)
    return {k: v for k, v in part.metrics.items() if k not in NOT_FROM_SLICES}


def stop(server: Server) -> None:
    """Read the settings back (server up), stop it, keep its part of the server log."""
    c = server.target.cluster
    try:
        if c.alive():
            server.settings = c.settings_readback()
    except (BlocklabError, OSError) as e:
        server.provenance["settings_readback"] = f"{type(e).__name__}: {e}"
    finally:
        c.stop()
        runner.copy_server_log(c.log_path, server.log_offset, server.raw_dir / "server.log")


# -- the round -----------------------------------------------------------------------------


def run_round(
    lab: OwnServers,
    variants: Sequence[Variant],
    design: RunDesign,
    raw_dirs: Mapping[str, Path],
    *,
    label: RunLabel,
    seed: int,
    probes: InstrumentationFactory | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, RunRecord]:
    """One round of two variants (module docstring): variant_id -> its record."""
    by_id = {v.variant_id: v for v in variants}
    order = orders.round_slices(
        list(by_id), seed=seed, slices=design.slices, round_no=label.round_no
    )
    slots = orders.storage_slots(list(by_id), seed=seed, round_no=label.round_no)
    aligned = design.checkpoint == "aligned"
    servers: dict[str, Server] = {}
    slices: list[SliceRun] = []
    try:
        for vid in dict.fromkeys(order):
            servers[vid] = open_server(
                lab, by_id[vid], raw_dirs[vid], slot=slots[vid], aligned=aligned
            )
        if not any(s.reason for s in servers.values()):
            slices = _measure(servers, order, design.slice_s, probes, log)
    except UserError:
        raise
    except (BlocklabError, OSError) as e:
        for s in servers.values():
            s.reason = s.reason or f"{type(e).__name__}: {e}"
    finally:
        for s in servers.values():
            stop(s)
    return {
        vid: _record(servers.get(vid), by_id[vid], label, order, slices, raw_dirs[vid])
        for vid in by_id
    }


def _measure(
    servers: dict[str, Server],
    order: Sequence[str],
    slice_s: int,
    probes: InstrumentationFactory | None,
    log: Callable[[str], None],
) -> list[SliceRun]:
    for s in servers.values():
        if s.aligned:  # the window of each server starts at a checkpoint of its own
            s.target.cluster.psql("CHECKPOINT")
        begin_probes(s, probes)
    log(f"interleaved: {len(order)} slices of {slice_s} s")
    t0 = time.monotonic()
    pids = [s.target.cluster.pid or 0 for s in servers.values()]
    slices = [
        accounted_slice(servers[vid], slice_s, position, pids) for position, vid in enumerate(order)
    ]
    elapsed = time.monotonic() - t0
    for vid, s in servers.items():
        mine = [x for x in slices if x.variant_id == vid]
        end_probes(s, mine)
        s.metrics |= slices_disturbance(mine)
        s.metrics |= slices_log_metrics(s, mine)
        s.metrics["interleaved_window_s"] = round(elapsed, 6)
        write_slices_csv(s.raw_dir / SLICES_CSV, mine)
    return slices


def _record(
    server: Server | None,
    v: Variant,
    label: RunLabel,
    order: Sequence[str],
    slices: Sequence[SliceRun],
    raw_dir: Path,
) -> RunRecord:
    mine = [s for s in slices if s.variant_id == v.variant_id]
    position = order.index(v.variant_id)
    reason = (server.reason if server else "") or first_failure(mine)
    if not reason and not mine:
        reason = "no slice ran (the other server failed to start or warm up)"
    rec = RunRecord(
        experiment=label.experiment,
        variant_id=v.variant_id,
        round=label.round_no,
        position=position,
        status="failed" if reason else "ok",
        started_at=server.started_at if server else now_iso(),
        ended_at=now_iso(),
        reason=reason,
        raw_dir=str(raw_dir),
    )
    if server is not None:
        rec.settings = server.settings
        rec.provenance = _provenance(server, len(mine))
        rec.checkpoints = server.checkpoints
        rec.metrics = dict(server.metrics) | {checks.STORAGE_SLOT: float(server.slot)}
    if not reason:
        t = totals(mine)
        rec.tps, rec.transactions, rec.latency_avg_ms = t.tps, t.transactions, t.latency_avg_ms
        rec.failed_transactions = 0
        rec.exit_code = 0
        rec.metrics = {
            **rec.metrics,
            "workload_duration_s": t.seconds,
            "slices": len(mine),
            **slice_metrics(mine, order),
        }
    return rec


def _provenance(server: Server, n_slices: int) -> dict[str, Any]:
    t, c = server.target, server.target.cluster
    return {
        **server.provenance,
        "design": "interleaved",
        "notes": [DEVICE_NOTE],
        "storage_slot": server.slot,
        "checkpoint": "aligned" if server.aligned else "free",
        "slices": n_slices,
        "driver": t.driver.name,
        "throughput_metric": t.driver.throughput_metric,
        "build_key": c.inst.key,
        "storage_facts": dict(t.storage_facts),
        "dataset": {"key": t.snapshot.key, "scale": t.snapshot.scale},
        "server_environment": proc.canonical_env(c.user),
        "server_environment_pad_bytes": t.variant.environment_pad_bytes,
    }

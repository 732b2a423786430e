"""A run's RunRecord and run.json: from what a finished run gathered, or for one never run."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from blocklab import proc
from blocklab.execution.run_state import RunLabel, RunState, RunTarget
from blocklab.model import Variant
from blocklab.store import RunRecord
from blocklab.timestamps import now_iso
from blocklab.workloads.base import WorkloadDriver, WorkloadResult


def finished_record(
    target: RunTarget, label: RunLabel, acc: RunState, started_at: str, ended_at: str
) -> RunRecord:
    """The run's RunRecord (failed with its reasons, or with its results) and run.json."""
    driver = target.driver
    result = driver.parse(acc.stdout, acc.stderr)
    measured = ""
    if acc.exit_code is not None:  # the measured execution ran: its verdict comes first
        measured = driver.verdict(acc.exit_code, result, server_alive=acc.server_alive)
    reason = "; ".join(r for r in (acc.no_space, measured, acc.reason) if r)
    rec = RunRecord(
        experiment=label.experiment,
        variant_id=target.variant.variant_id,
        round=label.round_no,
        position=label.position,
        status="failed" if reason else "ok",
        started_at=started_at,
        ended_at=ended_at,
        reason=reason,
        exit_code=acc.exit_code,
        command=shlex.join(acc.argv),
        raw_dir=str(acc.raw_dir),
        settings=acc.settings,
        provenance=_provenance(target, acc, result),
        metrics={**acc.phases_s, **acc.metrics},
    )
    if not reason:
        _fill_results(rec, driver, result, acc)
        reason = non_finite_reason(rec)
        if reason:
            rec.status, rec.reason = "failed", reason
    (acc.raw_dir / "run.json").write_text(
        json.dumps({"status": rec.status, "reason": reason, "phases_s": acc.phases_s}, indent=1)
    )
    return rec


RESULT_FIELDS = ("tps", "latency_avg_ms", "latency_stddev_ms")


def non_finite_reason(rec: RunRecord) -> str:
    """Why a run's numbers cannot be used ("" when every one is finite or absent): a NaN
    or infinite throughput, latency or metric makes a failed run, never a crash later."""
    values = {f: getattr(rec, f) for f in RESULT_FIELDS} | dict(rec.metrics)
    bad = sorted(
        k for k, v in values.items() if isinstance(v, int | float) and not math.isfinite(v)
    )
    if not bad:
        return ""
    shown = ", ".join(f"{k} = {values[k]}" for k in bad)
    return f"not a finite number: {shown} (the driver's or a probe's output was not usable)"


def _fill_results(
    rec: RunRecord, driver: WorkloadDriver, result: WorkloadResult, acc: RunState
) -> None:
    rec.tps = result.throughput
    rec.latency_avg_ms = result.latency_avg_ms
    rec.latency_stddev_ms = result.latency_stddev_ms
    rec.transactions = result.transactions
    rec.failed_transactions = result.failed
    series: dict[str, Sequence[tuple[float, float | None]]] = {}
    metrics: dict[str, float | None] = dict(rec.metrics)
    if acc.probe is not None:
        series.update(acc.probe.series)
        metrics.update(acc.probe.metrics)
        rec.checkpoints = list(acc.probe.checkpoints)
    metrics.update(acc.footprint.get("metrics", {}))
    metrics.update(dict.fromkeys(acc.footprint.get("missing", {}), None))
    part = driver.record(result, acc.stderr, acc.raw_dir)
    series.update(part.series)
    metrics.update(part.metrics)
    rec.queries = list(part.queries)
    rec.provenance = {**rec.provenance, **part.provenance}
    if part.throughput is not None:
        rec.tps = part.throughput
    rec.series, rec.metrics = series, metrics


def _provenance(target: RunTarget, acc: RunState, result: WorkloadResult) -> dict[str, Any]:
    c, v, snap = target.cluster, target.variant, target.snapshot
    name = target.driver.name
    prov: dict[str, Any] = dict(acc.provenance)
    prov.update(
        {
            f"{name}_argv": acc.argv,
            f"{name}_version": result.version,
            f"{name}_report": dict(result.report),
            "driver": name,
            "throughput_metric": target.driver.throughput_metric,
            "throughput_unit": result.throughput_unit,
        },
        build_key=c.inst.key,
        version=acc.settings.get("server_version", {}).get("setting") or c.inst.version,
        installation_prefix=str(c.inst.prefix),
        geometry={
            "block_size_bytes": c.inst.block_size_bytes,
            "wal_block_size_bytes": c.inst.wal_block_size_bytes,
            "wal_segsize_mb": v.wal_segsize_mb,
            "data_checksums": v.data_checksums,
            "storage": v.storage.label(),
            "fillfactor": v.dataset.fillfactor,
            "index_fillfactor": v.dataset.index_fillfactor,
        },
        dataset={
            "key": snap.key,
            "driver": snap.driver,
            "options": snap.options,
            "scale": snap.scale,
            "fillfactor": snap.fillfactor,
            "index_fillfactor": snap.index_fillfactor,
            "table_bytes": snap.table_bytes,
            "index_bytes": snap.index_bytes,
            "relations": snap.relations,
            "settings": snap.settings,
            "init_s": snap.init_s,
            "snapshot_s": snap.snapshot_s,
            "size_bytes": snap.size_bytes,
        },
        phases_s=acc.phases_s,
        storage_facts=dict(target.storage_facts),
        server_environment=proc.canonical_env(c.user),  # the same for every run (proc.py)
        # plus one variable of this many bytes (Variant.environment_pad_bytes; 0: none)
        server_environment_pad_bytes=v.environment_pad_bytes,
    )
    if acc.footprint:
        prov["footprint"] = {k: v for k, v in acc.footprint.items() if k != "metrics"}
    if acc.probe is not None:
        prov["probe_facts"] = dict(acc.probe.facts)
        missing = acc.probe.missing
        prov["probe_missing"] = dict(missing) if isinstance(missing, Mapping) else list(missing)
    return prov


def failed_without_running(
    variant: Variant, label: RunLabel, raw_dir: Path, reason: str
) -> RunRecord:
    """The failed record of a run that never started (its preparation failed, or its
    variant is not tried again), with run.json saying why in its raw directory."""
    now = now_iso()
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "run.json").write_text(json.dumps({"status": "failed", "reason": reason}) + "\n")
    return RunRecord(
        experiment=label.experiment,
        variant_id=variant.variant_id,
        round=label.round_no,
        position=label.position,
        status="failed",
        started_at=now,
        ended_at=now,
        reason=reason,
        raw_dir=str(raw_dir),
    )

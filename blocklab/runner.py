"""One measured run, start to finish.

restore the dataset -> write settings -> start -> (built-in scripts: the vacuum pgbench
would do) -> CHECKPOINT -> optional warm-up (pgbench, unmeasured) -> instrumentation.begin()
-> pgbench -> instrumentation.end() -> read back pg_settings -> stop.

Everything pgbench and the server said is kept in the run's raw directory
(`pgbench.argv`, `pgbench.stdout`, `pgbench.stderr`, `pgbench.exit_code`, the aggregate
log `pgbench_log.PID[.N]`, `server.log`, and the same for the warm-up). A run whose
pgbench exit code is not 0, whose failed count is above 0, or whose server died is
recorded as failed with the reason and without tps or latency numbers. The server is
stopped by PID whatever happens (try/finally, KeyboardInterrupt included).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from blocklab import dataset, settings_policy
from blocklab.cluster import Cluster
from blocklab.errors import BlocklabError, CommandError, UserError
from blocklab.model import Variant
from blocklab.proc import run as run_command
from blocklab.store import RunRecord
from blocklab.workloads import pgbench

LOG_PREFIX = "pgbench_log"
PGBENCH_GRACE_S = 300


# -- instrumentation seam ------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeContext:
    """What probes need to know about the server they watch."""

    conninfo: str
    data_dir: Path
    wal_dir: Path | None
    server_log: Path
    devices: Sequence[Any]  # blocklab.storage DeviceRef (name, role, shared)
    block_size_bytes: int
    wal_block_size_bytes: int
    server_pid: int
    server_version_num: int


class ProbeResultLike(Protocol):
    series: Mapping[str, Sequence[tuple[float, float | None]]]
    metrics: Mapping[str, float | None]
    checkpoints: Sequence[Mapping[str, Any]]
    facts: Mapping[str, Any]
    missing: Sequence[str] | Mapping[str, str]


class Instrumentation(Protocol):
    def begin(self) -> None: ...
    def end(self, transactions: int, duration_s: float) -> ProbeResultLike: ...


InstrumentationFactory = Callable[[Any], Instrumentation]


def default_instrumentation() -> InstrumentationFactory | None:
    """blocklab.probes.Instrumentation when it exists, else None (no probes)."""
    try:
        from blocklab import probes
    except ImportError:
        return None
    factory = getattr(probes, "Instrumentation", None)
    return factory if callable(factory) else None


def probe_context(target: RunTarget, log_path: Path) -> Any:
    """A ProbeContext: blocklab.probes' own class when it defines one, else ours."""
    c = target.cluster
    values: dict[str, Any] = {
        "conninfo": c.conninfo,
        "data_dir": c.data_dir,
        "wal_dir": c.wal_dir,
        "server_log": log_path,
        "devices": list(target.devices),
        "block_size_bytes": c.inst.block_size_bytes,
        "wal_block_size_bytes": c.inst.wal_block_size_bytes,
        "server_pid": c.pid or 0,
        "server_version_num": c.version_num(),
    }
    try:
        from blocklab import probes

        cls = getattr(probes, "ProbeContext", ProbeContext)
    except ImportError:
        cls = ProbeContext
    fields = getattr(cls, "__dataclass_fields__", None)
    if fields is not None:
        values = {k: v for k, v in values.items() if k in fields}
    return cls(**values)


# -- inputs and the pure verdict -----------------------------------------------------------


@dataclass(frozen=True)
class RunTarget:
    """What a run runs on: the variant, its server, its dataset and its devices."""

    variant: Variant
    cluster: Cluster
    snapshot: dataset.Snapshot
    devices: Sequence[Any] = ()
    storage_facts: Mapping[str, Any] = field(default_factory=dict)
    # The `bytes` settings policy gives every build the bytes its reference gets
    # (blocklab.settings_policy): it reads both builds' settings catalogues.
    catalogue: settings_policy.Catalogue | None = None
    reference_catalogue: settings_policy.Catalogue | None = None
    reference_wal_segment_size_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class RunLabel:
    experiment: str
    round_no: int
    position: int


def verdict(
    exit_code: int | None,
    report: pgbench.PgbenchReport,
    *,
    server_alive: bool,
    errors: Sequence[str] = (),
) -> str:
    """Why a measured execution is not a result ("" when it is one). Pure."""
    reasons = []
    if exit_code != 0:
        detail = f": {errors[0]}" if errors else ""
        if len(errors) > 1 and errors[-1] != errors[0]:
            detail += f" (last error: {errors[-1]})"
        reasons.append(f"pgbench exit code {exit_code}{detail}")
    if not server_alive:
        reasons.append("the server died during the run")
    if report.failed_transactions:
        reasons.append(f"{report.failed_transactions} failed transactions")
    if report.tps is None:
        reasons.append("pgbench printed no tps line")
    elif not report.transactions:
        reasons.append("no transaction was processed")
    return "; ".join(reasons)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# -- the run -------------------------------------------------------------------------------


@dataclass
class _Acc:
    """What a run has gathered so far (filled phase by phase)."""

    raw_dir: Path
    phases_s: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    reason: str = ""
    server_alive: bool = True
    probe: ProbeResultLike | None = None
    workload_s: float = 0.0
    footprint: dict[str, Any] = field(default_factory=dict)  # blocklab.footprint.measure()

    def timed(self, name: str, t0: float) -> None:
        self.phases_s[name] = round(time.monotonic() - t0, 6)


def run_one(
    target: RunTarget,
    label: RunLabel,
    raw_dir: Path,
    *,
    instrumentation: InstrumentationFactory | None,
    log: Callable[[str], None] = lambda _m: None,
) -> RunRecord:
    """One measured run. Failures become a failed RunRecord; bad input (UserError) and
    KeyboardInterrupt propagate, after the server has been stopped."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    acc = _Acc(raw_dir)
    started_at = now_iso()
    log_offset = _size(target.cluster.log_path)
    try:
        _execute(target, acc, instrumentation, log, log_offset)
    except UserError:
        raise
    except (BlocklabError, OSError) as e:
        acc.reason = acc.reason or f"{type(e).__name__}: {e}"
        # a step after pgbench may fail because the server died just before: look again
        acc.server_alive = acc.server_alive and target.cluster.alive()
    finally:
        _shutdown(target.cluster, acc)
        _copy_server_log(target.cluster.log_path, log_offset, raw_dir / "server.log")
    if acc.exit_code == 0 and not acc.reason:
        _footprint(target, acc)
    return _record(target, label, acc, started_at, now_iso())


def _footprint(target: RunTarget, acc: _Acc) -> None:
    """The data volume on a compressing drive (blocklab.footprint), server stopped."""
    from blocklab import footprint

    t0 = time.monotonic()
    probe_metrics = dict(acc.probe.metrics) if acc.probe is not None else {}
    try:
        acc.footprint = footprint.measure(target.storage_facts.get("data", {}), probe_metrics)
    except Exception as e:  # the footprint must not cost the run; the failure is recorded
        acc.footprint = {"missing": dict.fromkeys(footprint.METRICS, f"{type(e).__name__}: {e}")}
    acc.timed("footprint_s", t0)


def _execute(
    target: RunTarget,
    acc: _Acc,
    instrumentation: InstrumentationFactory | None,
    log: Callable[[str], None],
    log_offset: int,
) -> None:
    c, v = target.cluster, target.variant
    _restore(target, acc)
    _write_settings(target, acc)
    t0 = time.monotonic()
    c.start()
    acc.timed("server_start_s", t0)
    _prepare(c, v, acc)
    if v.workload.warmup_s > 0:
        log(f"warm-up {v.workload.warmup_s} s")
        if not _warmup(target, acc):
            return
    probes = _begin_probes(target, acc, instrumentation, log_offset)
    _measure(target, acc)
    acc.server_alive = c.alive()
    if probes is not None and acc.server_alive:
        _end_probes(probes, acc)
    if acc.server_alive:
        acc.settings = c.settings_readback()
        acc.provenance["collected"] = _collect_provenance(target, acc)


def _collect_provenance(target: RunTarget, acc: _Acc) -> dict[str, Any]:
    """blocklab.probes' provenance (pg_config, build manifest, host, storage, commands),
    with pg_settings reduced to the settings not at their defaults and where they came
    from (the values themselves are the record's settings)."""
    try:
        from blocklab.probes import collect_provenance
    except ImportError:
        return {"errors": {"collect_provenance": "blocklab.probes is not available"}}
    commands = [acc.argv]
    warmup = acc.raw_dir / "warmup.argv"
    if warmup.exists():
        commands.insert(0, shlex.split(warmup.read_text()))
    try:
        prov = collect_provenance(
            target.cluster.conninfo,
            target.cluster.inst,
            storage_facts=target.storage_facts,
            commands=commands,
        )
    except Exception as e:  # provenance must not cost the run; the failure is recorded
        return {"errors": {"collect_provenance": f"{type(e).__name__}: {e}"}}
    settings = prov.pop("settings", {})
    prov["settings_source"] = {
        name: v.get("source")
        for name, v in settings.items()
        if isinstance(v, dict) and v.get("source") not in (None, "default", "override")
    }
    return dict(prov)


def _restore(target: RunTarget, acc: _Acc) -> None:
    c = target.cluster
    c.stop()
    t0 = time.monotonic()
    restored = dataset.restore(target.snapshot, c.data_dir, c.wal_dir)
    acc.phases_s["restore_s"] = round(restored.restore_s, 6)
    acc.phases_s["restore_sync_s"] = round(restored.sync_s, 6)
    if target.variant.storage.drop_caches:
        acc.provenance["drop_caches"] = _drop_caches()
    acc.timed("prepare_data_s", t0)


def _drop_caches() -> str:
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "done"
    except OSError as e:
        return f"not possible: {e}"


def _write_settings(target: RunTarget, acc: _Acc) -> None:
    v = target.variant
    conv = settings_policy.convert(
        dict(v.settings),
        v.settings_policy,
        catalogue=target.catalogue,
        reference=target.reference_catalogue,
        reference_wal_segment_size_bytes=target.reference_wal_segment_size_bytes,
    )
    target.cluster.write_settings(conv.settings)
    acc.provenance["settings_written"] = conv.settings
    acc.provenance["settings_notes"] = conv.notes


def _prepare(c: Cluster, v: Variant, acc: _Acc) -> None:
    t0 = time.monotonic()
    if v.workload.builtin is not None:
        c.psql(pgbench.PREPARE_SQL)
    c.psql("CHECKPOINT")
    acc.timed("prepare_checkpoint_s", t0)


def _warmup(target: RunTarget, acc: _Acc) -> bool:
    c, w = target.cluster, target.variant.workload
    argv = pgbench.command(
        c.inst, _target(c), w, log_prefix=None, duration_s=w.warmup_s, progress=False
    )
    t0 = time.monotonic()
    res = run_command(argv, check=False, timeout_s=w.warmup_s + PGBENCH_GRACE_S)
    acc.timed("warmup_s", t0)
    _save(acc.raw_dir, "warmup", argv, res.stdout, res.stderr, res.returncode)
    if res.returncode != 0 or not c.alive():
        errors = pgbench.parse_errors(res.stderr)
        acc.reason = f"warm-up failed: pgbench exit code {res.returncode}" + (
            f": {errors[-1]}" if errors else ""
        )
        acc.server_alive = c.alive()
        return False
    return True


def _begin_probes(
    target: RunTarget, acc: _Acc, factory: InstrumentationFactory | None, log_offset: int
) -> Instrumentation | None:
    if factory is None:
        acc.provenance["probes"] = "none"
        return None
    try:
        probes = factory(probe_context(target, target.cluster.log_path))
        probes.begin()
    except Exception as e:  # a probe must not cost the run; the failure is recorded
        acc.provenance["probes"] = f"not started: {type(e).__name__}: {e}"
        return None
    acc.provenance["probes"] = "started"
    return probes


def _end_probes(probes: Instrumentation, acc: _Acc) -> None:
    report = pgbench.parse_report(acc.stdout)
    try:
        acc.probe = probes.end(report.transactions or 0, acc.workload_s)
    except Exception as e:  # a probe must not cost the run; the failure is recorded
        acc.provenance["probes"] = f"failed at end: {type(e).__name__}: {e}"


def _measure(target: RunTarget, acc: _Acc) -> None:
    c, w = target.cluster, target.variant.workload
    acc.argv = pgbench.command(c.inst, _target(c), w, log_prefix=acc.raw_dir / LOG_PREFIX)
    (acc.raw_dir / "pgbench.argv").write_text(shlex.join(acc.argv) + "\n")
    t0 = time.monotonic()
    try:
        res = run_command(acc.argv, check=False, timeout_s=w.duration_s + PGBENCH_GRACE_S)
    except CommandError as e:  # timed out
        acc.workload_s = time.monotonic() - t0
        acc.stdout = e.output
        acc.reason = f"pgbench {e.reason}"
        return
    acc.workload_s = time.monotonic() - t0
    acc.phases_s["workload_s"] = round(acc.workload_s, 6)
    acc.exit_code, acc.stdout, acc.stderr = res.returncode, res.stdout, res.stderr
    _save(acc.raw_dir, "pgbench", acc.argv, res.stdout, res.stderr, res.returncode)


def _target(c: Cluster) -> pgbench.Target:
    return pgbench.Target(str(c.socket_dir), c.port, c.user.name)


def _save(raw_dir: Path, stem: str, argv: list[str], out: str, err: str, code: int) -> None:
    (raw_dir / f"{stem}.argv").write_text(shlex.join(argv) + "\n")
    (raw_dir / f"{stem}.stdout").write_text(out)
    (raw_dir / f"{stem}.stderr").write_text(err)
    (raw_dir / f"{stem}.exit_code").write_text(f"{code}\n")


def _shutdown(c: Cluster, acc: _Acc) -> None:
    t0 = time.monotonic()
    if c.pid is not None and not c.alive():
        acc.server_alive = False
    clean = c.stop()
    acc.timed("server_stop_s", t0)
    acc.provenance["server_stop"] = "clean" if clean else "killed after timeout"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _copy_server_log(src: Path, offset: int, dest: Path) -> None:
    try:
        with open(src, "rb") as f:
            f.seek(offset)
            dest.write_bytes(f.read())
    except OSError as e:
        dest.write_text(f"(server log not readable: {e})\n")


# -- the record ----------------------------------------------------------------------------


def _record(
    target: RunTarget, label: RunLabel, acc: _Acc, started_at: str, ended_at: str
) -> RunRecord:
    report = pgbench.parse_report(acc.stdout)
    measured = ""
    if acc.exit_code is not None:  # the measured pgbench ran: its verdict comes first
        errors = pgbench.parse_errors(acc.stderr)
        measured = verdict(acc.exit_code, report, server_alive=acc.server_alive, errors=errors)
    reason = "; ".join(r for r in (measured, acc.reason) if r)
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
        provenance=_provenance(target, acc, report),
        metrics=dict(acc.phases_s),
    )
    if not reason:
        _fill_results(rec, report, acc)
    (acc.raw_dir / "run.json").write_text(
        json.dumps({"status": rec.status, "reason": reason, "phases_s": acc.phases_s}, indent=1)
    )
    return rec


def _fill_results(rec: RunRecord, report: pgbench.PgbenchReport, acc: _Acc) -> None:
    rec.tps = report.tps
    rec.latency_avg_ms = report.latency_avg_ms
    rec.latency_stddev_ms = report.latency_stddev_ms
    rec.transactions = report.transactions
    rec.failed_transactions = report.failed_transactions
    series: dict[str, Sequence[tuple[float, float | None]]] = {}
    metrics: dict[str, float | None] = dict(rec.metrics)
    if acc.probe is not None:
        series.update(acc.probe.series)
        metrics.update(acc.probe.metrics)
        rec.checkpoints = list(acc.probe.checkpoints)
    metrics.update(acc.footprint.get("metrics", {}))
    metrics.update(dict.fromkeys(acc.footprint.get("missing", {}), None))
    series.update(workload_series(acc.stderr))
    metrics["aggregate_log_coverage_ratio"] = aggregate_log_coverage(
        acc.raw_dir / LOG_PREFIX, report.transactions
    )
    if report.initial_connection_ms is not None:
        metrics["initial_connection_ms"] = report.initial_connection_ms
    rec.series, rec.metrics = series, metrics


def workload_series(stderr: str) -> dict[str, list[tuple[float, float | None]]]:
    """Per-second tps and latency from pgbench's `-P 1` lines (see workloads.pgbench)."""
    return pgbench.series_from_progress(pgbench.parse_progress(stderr))


def aggregate_log_coverage(log_prefix: Path, transactions: int | None) -> float | None:
    """Share of the reported transactions that pgbench's aggregate logs account for."""
    files = pgbench.aggregate_log_files(log_prefix)
    if not files or not transactions:
        return None
    rows = pgbench.merge_aggregates(pgbench.parse_aggregate_log(p.read_text()) for p in files)
    return sum(r.num_transactions for r in rows) / transactions


def _provenance(target: RunTarget, acc: _Acc, report: pgbench.PgbenchReport) -> dict[str, Any]:
    c, v, snap = target.cluster, target.variant, target.snapshot
    prov: dict[str, Any] = dict(acc.provenance)
    prov.update(
        pgbench_argv=acc.argv,
        pgbench_version=report.version,
        pgbench_report=asdict(report),
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
        },
        dataset={
            "key": snap.key,
            "scale": snap.scale,
            "fillfactor": snap.fillfactor,
            "init_s": snap.init_s,
            "snapshot_s": snap.snapshot_s,
            "size_bytes": snap.size_bytes,
        },
        phases_s=acc.phases_s,
        storage_facts=dict(target.storage_facts),
    )
    if acc.footprint:
        prov["footprint"] = {k: v for k, v in acc.footprint.items() if k != "metrics"}
    if acc.probe is not None:
        prov["probe_facts"] = dict(acc.probe.facts)
        missing = acc.probe.missing
        prov["probe_missing"] = dict(missing) if isinstance(missing, Mapping) else list(missing)
    return prov

"""One measured run, start to finish.

restore the dataset -> write settings -> start -> (built-in scripts: the vacuum pgbench
would do) -> CHECKPOINT -> optional warm-up (pgbench, unmeasured) -> instrumentation.begin()
-> pgbench -> instrumentation.end() -> read back pg_settings -> stop.

Everything pgbench and the server said is kept in the run's raw directory
(`pgbench.argv`, `pgbench.stdout`, `pgbench.stderr`, `pgbench.exit_code`, the sampled
per-transaction log `driver/pgbench_log.PID[.N]` (written by pgbench as the driver's
unprivileged user), `server.log`, and the same for the warm-up). A run whose
pgbench exit code is not 0, whose failed count is above 0, or whose server died is
recorded as failed with the reason and without tps or latency numbers (the record:
blocklab.execution.run_record). The server is stopped by PID whatever happens
(try/finally, KeyboardInterrupt included).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from blocklab import faults, probes
from blocklab.errors import BlocklabError, CommandError, UserError
from blocklab.execution import controls as controls_mod
from blocklab.execution import cycles, steady
from blocklab.execution.controls import RunControls
from blocklab.execution.run_record import finished_record
from blocklab.execution.run_state import ProbeResultLike, RunLabel, RunState, RunTarget
from blocklab.postgres.cluster import Cluster, ServerStartError
from blocklab.probes import ProbeContext
from blocklab.storage import quiesce
from blocklab.store import RunRecord
from blocklab.timestamps import now_iso
from blocklab.workloads import dataset
from blocklab.workloads.base import run_endpoint
from blocklab.workloads.execution import execute

WORKLOAD_GRACE_S = 300


# -- instrumentation seam ------------------------------------------------------------------


class Instrumentation(Protocol):
    def begin(self) -> None: ...
    def end(self, transactions: int, duration_s: float) -> ProbeResultLike: ...


InstrumentationFactory = Callable[[ProbeContext], Instrumentation]


def default_instrumentation() -> InstrumentationFactory:
    """blocklab.probes.Instrumentation."""
    return probes.Instrumentation


def probe_context(target: RunTarget, log_path: Path) -> ProbeContext:
    """The probes look at the workload's database and at its dataset's tables (the
    snapshot's; pgbench's four when an older snapshot did not list them)."""
    c = target.cluster
    tables = tuple(r["name"] for r in target.snapshot.relations if r["kind"] == "table")
    conninfo = re.sub(r"dbname=\S+", f"dbname={target.driver.database}", c.conninfo)
    return ProbeContext(
        conninfo=conninfo,
        relations=tables or probes.DEFAULT_RELATIONS,
        data_dir=c.data_dir,
        wal_dir=c.wal_dir,
        server_log=log_path,
        devices=list(target.devices),
        block_size_bytes=c.inst.block_size_bytes,
        wal_block_size_bytes=c.inst.wal_block_size_bytes,
        server_pid=c.pid or 0,
        server_version_num=c.version_num(),
    )


# -- the run -------------------------------------------------------------------------------


def run_one(
    target: RunTarget,
    label: RunLabel,
    raw_dir: Path,
    *,
    instrumentation: InstrumentationFactory | None,
    log: Callable[[str], None] = lambda _m: None,
    controls: RunControls | None = None,
) -> RunRecord:
    """One measured run. Failures become a failed RunRecord; bad input (UserError) and
    KeyboardInterrupt propagate, after the server has been stopped. `controls`: the
    design's placement, steady warm-up and checkpoint alignment (blocklab.execution.controls)."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    acc = RunState(raw_dir, controls=controls or RunControls())
    acc.provenance["controls"] = acc.controls.to_json()
    started_at = now_iso()
    log_offset = file_size(target.cluster.log_path)
    try:
        _execute(target, acc, instrumentation, log, log_offset)
    except UserError:
        raise
    except ServerStartError as e:
        acc.reason = acc.reason or start_failure_reason(e, raw_dir / "server.log")
    except (BlocklabError, OSError) as e:
        acc.reason = acc.reason or f"{type(e).__name__}: {e}"
        # a step after pgbench may fail because the server died just before: look again
        acc.server_alive = acc.server_alive and target.cluster.alive()
    finally:
        _shutdown(target.cluster, acc)
        copy_server_log(target.cluster.log_path, log_offset, raw_dir / "server.log")
    acc.no_space = no_space_on(target, _read(raw_dir / "server.log") + acc.stderr + acc.reason)
    if acc.exit_code == 0 and not acc.reason:
        _footprint(target, acc)
    return finished_record(target, label, acc, started_at, now_iso())


def _footprint(target: RunTarget, acc: RunState) -> None:
    """The data volume on a compressing drive (blocklab.probes.footprint), server stopped."""
    from blocklab.probes import footprint

    if acc.controls.footprint is False:
        acc.footprint = {"missing": dict.fromkeys(footprint.METRICS, footprint.OFF_REASON)}
        return
    t0 = time.monotonic()
    probe_metrics = dict(acc.probe.metrics) if acc.probe is not None else {}
    try:
        acc.footprint = footprint.measure(target.storage_facts.get("data", {}), probe_metrics)
    except Exception as e:  # the footprint must not cost the run; the failure is recorded
        acc.footprint = {"missing": dict.fromkeys(footprint.METRICS, f"{type(e).__name__}: {e}")}
    acc.timed("footprint_s", t0)


def _execute(
    target: RunTarget,
    acc: RunState,
    instrumentation: InstrumentationFactory | None,
    log: Callable[[str], None],
    log_offset: int,
) -> None:
    c, v = target.cluster, target.variant
    _restore(target, acc)
    _write_settings(target, acc)
    t0 = time.monotonic()
    c.start(env=v.server_environment())
    acc.timed("server_start_s", t0)
    _place(target, acc)
    _prepare(target, acc)
    if acc.controls.cycles:  # the window opens at a checkpoint's start: quiet before warm-up
        _quiesce(target, acc)
    if acc.controls.warmup_steady:
        log(f"warm-up until steady (at most {acc.controls.warmup_max_s} s)")
        if not _steady_warmup(target, acc):
            return
    elif v.workload.warmup_s > 0:
        log(f"warm-up {v.workload.warmup_s} s")
        if not _warmup(target, acc):
            return
    if acc.controls.cycles:
        log("lead-in until the next checkpoint starts")
        if not _lead_in(target, acc):
            return
    else:
        if acc.controls.checkpoint_aligned:
            _aligned_checkpoint(target, acc)
        _quiesce(target, acc)
    started = _begin_probes(target, acc, instrumentation, log_offset)
    if acc.controls.placement is not None:
        with controls_mod.CpuSampler(c.pid or 0) as sampler:
            _measure(target, acc)
        acc.placed["observed"] = sampler.to_json()
    else:
        _measure(target, acc)
    acc.server_alive = c.alive()
    if started is not None and acc.server_alive:
        _end_probes(target, started, acc)
    if acc.server_alive and acc.exit_code == 0:
        _plan_pass(target, acc, log_offset)
    if acc.server_alive:
        acc.settings = c.settings_readback()
        acc.provenance["collected"] = _collect_provenance(target, acc)


def _place(target: RunTarget, acc: RunState) -> None:
    """Driver prefix and server affinity; what could not be applied is in the record."""
    if acc.controls.placement is None:
        return
    acc.provenance["placement"] = acc.placed
    acc.driver_prefix = controls_mod.driver_prefix(acc.controls, acc.placed)
    controls_mod.place_server(acc.controls, target.cluster.pid or 0, acc.placed)


def _aligned_checkpoint(target: RunTarget, acc: RunState) -> None:
    """CHECKPOINT right before the measured run: every run starts at the same point of
    the checkpoint cycle (checkpoint_timeout is beyond the run's end)."""
    t0 = time.monotonic()
    target.cluster.psql("CHECKPOINT")
    acc.timed("aligned_checkpoint_s", t0)


def _quiesce(target: RunTarget, acc: RunState) -> None:
    """Wait (bounded) until dirty pages and the storage's in-flight I/O have drained
    (blocklab.storage.quiesce); what it found goes into the record."""
    if acc.controls.quiesce_max_s <= 0:
        acc.provenance["quiesce"] = "off"
        return
    names = sorted({d.name for d in target.devices})
    found = quiesce.wait(lambda: quiesce.read_sample(names), acc.controls.quiesce_max_s)
    acc.metrics.update(found.metrics())
    acc.provenance["quiesce"] = {**found.to_json(), "devices": names}


def _lead_in(target: RunTarget, acc: RunState) -> bool:
    """cycles: keep the load on until the next checkpoint starts; the measured window
    opens there (blocklab.execution.cycles)."""
    c, w, driver = target.cluster, target.variant.workload, target.driver
    timeout_s = cycles.checkpoint_timeout_s(acc.provenance.get("settings_written", {}))
    bound_s = int(timeout_s) + cycles.LEAD_IN_MARGIN_S
    argv = acc.driver_prefix + driver.command(
        c.inst, run_endpoint(c, driver), w, raw_dir=None, duration_s=bound_s
    )
    acc.cycle_log_offset = file_size(c.log_path)
    tail, begin = cycles.LogTail(c.log_path, acc.cycle_log_offset), time.time()
    t0 = time.monotonic()
    res = execute(
        argv,
        acc.raw_dir,
        "lead-in",
        timeout_s=bound_s + WORKLOAD_GRACE_S,
        server_alive=c.alive,
        state=c.state,
        stop_when=lambda: cycles.opening(tail.checkpoints(), begin) is not None,
    )
    acc.timed("lead_in_s", t0)
    save_output(acc.raw_dir, "lead-in", argv, res.exit_code)
    found = cycles.opening(tail.checkpoints(), begin)
    if res.exit_code != 0 or not c.alive() or found is None:
        how = res.ended or f"exit code {res.exit_code}"
        acc.reason = f"lead-in failed: {driver.name} {how}" + (
            "" if found else f"; no checkpoint started within {bound_s} s"
        )
        acc.server_alive = c.alive()
        return False
    acc.cycle_opening_epoch = found.start_epoch
    return True


def _steady_warmup(target: RunTarget, acc: RunState) -> bool:
    """Warm-up chunks until tps is steady, bounded (blocklab.execution.controls.steady_warmup)."""
    c, w, driver = target.cluster, target.variant.workload, target.driver
    chunks: list[str] = []

    def chunk(seconds: int) -> steady.Chunk | None:
        argv = acc.driver_prefix + driver.command(
            c.inst, run_endpoint(c, driver), w, raw_dir=None, duration_s=seconds
        )
        stem = f"warmup-{len(chunks) + 1}"  # each chunk's output in files of its own
        before, t0 = _wal_counters(c), time.monotonic()
        res = execute(
            argv,
            acc.raw_dir,
            stem,
            timeout_s=seconds + WORKLOAD_GRACE_S,
            server_alive=c.alive,
            state=c.state,
        )
        elapsed = time.monotonic() - t0
        chunks.append(stem)
        save_output(acc.raw_dir, stem, argv, res.exit_code)
        if res.exit_code != 0 or not c.alive():
            return None
        tps = driver.parse(res.stdout, res.stderr).throughput
        if tps is None:
            return None
        return steady.Chunk(tps, *steady.wal_rates(before, _wal_counters(c), elapsed))

    t0 = time.monotonic()
    ok, report = controls_mod.steady_warmup(chunk, acc.controls.warmup_max_s)
    acc.timed("warmup_s", t0)
    acc.provenance["warmup"] = report
    if not ok:
        acc.reason = "warm-up failed: " + report["note"]
        acc.server_alive = c.alive()
    return ok


def _wal_counters(c: Cluster) -> tuple[float, float] | None:
    """pg_stat_wal's (wal_fpi, wal_bytes) now; None when unreadable (the warm-up then
    judges tps alone)."""
    try:
        return steady.wal_counters(c.psql(steady.WAL_COUNTERS_SQL, timeout_s=30.0))
    except (CommandError, OSError):
        return None


def _collect_provenance(target: RunTarget, acc: RunState) -> dict[str, Any]:
    """blocklab.probes' provenance (pg_config, build manifest, host, storage, commands),
    with pg_settings reduced to the settings not at their defaults and where they came
    from (the values themselves are the record's settings)."""
    commands = [acc.argv]
    warmup = acc.raw_dir / "warmup.argv"
    if warmup.exists():
        commands.insert(0, shlex.split(warmup.read_text()))
    try:
        prov = probes.collect_provenance(
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


def _restore(target: RunTarget, acc: RunState) -> None:
    c = target.cluster
    c.stop()
    t0 = time.monotonic()
    faults.step("restore")
    restored = dataset.restore(target.snapshot, c.data_dir, c.wal_dir)
    acc.phases_s["restore_s"] = round(restored.restore_s, 6)
    acc.phases_s["restore_sync_s"] = round(restored.sync_s, 6)
    acc.provenance["restore"] = restored.to_json()
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


def _write_settings(target: RunTarget, acc: RunState) -> None:
    conv = target.settings
    written = acc.controls.settings(dict(conv.settings))
    target.cluster.write_settings(written)
    acc.provenance["settings_written"] = written
    acc.provenance["settings_notes"] = conv.notes


def _prepare(target: RunTarget, acc: RunState) -> None:
    c = target.cluster
    t0 = time.monotonic()
    dataset.hand_over(c, target.driver)  # a snapshot made before the workload role
    sql = target.driver.prepare_sql(target.variant.workload)
    if sql is not None:
        c.psql(sql)
    c.psql("CHECKPOINT")
    acc.timed("prepare_checkpoint_s", t0)


def _warmup(target: RunTarget, acc: RunState) -> bool:
    c, w, driver = target.cluster, target.variant.workload, target.driver
    argv = acc.driver_prefix + driver.command(
        c.inst, run_endpoint(c, driver), w, raw_dir=None, duration_s=w.warmup_s
    )
    t0 = time.monotonic()
    faults.step("warmup")
    res = execute(
        argv,
        acc.raw_dir,
        "warmup",
        timeout_s=w.warmup_s + WORKLOAD_GRACE_S,
        server_alive=c.alive,
        state=c.state,
    )
    acc.timed("warmup_s", t0)
    save_output(acc.raw_dir, "warmup", argv, res.exit_code)
    if res.exit_code != 0 or not c.alive():
        errors = driver.parse(res.stdout, res.stderr).errors
        how = res.ended or f"exit code {res.exit_code}"
        acc.reason = f"warm-up failed: {driver.name} {how}" + (f": {errors[-1]}" if errors else "")
        acc.server_alive = c.alive()
        return False
    return True


def _begin_probes(
    target: RunTarget, acc: RunState, factory: InstrumentationFactory | None, log_offset: int
) -> Instrumentation | None:
    if factory is None:
        acc.provenance["probes"] = "none"
        return None
    try:
        started = factory(probe_context(target, target.cluster.log_path))
        started.begin()
    except Exception as e:  # a probe must not cost the run; the failure is recorded
        acc.provenance["probes"] = f"not started: {type(e).__name__}: {e}"
        return None
    acc.provenance["probes"] = "started"
    return started


def _end_probes(target: RunTarget, started: Instrumentation, acc: RunState) -> None:
    result = target.driver.parse(acc.stdout, acc.stderr)
    faults.step("probes")
    try:
        acc.probe = started.end(result.transactions or 0, acc.workload_s)
    except Exception as e:  # a probe must not cost the run; the failure is recorded
        acc.provenance["probes"] = f"failed at end: {type(e).__name__}: {e}"


def _measure(target: RunTarget, acc: RunState) -> None:
    c, w, driver = target.cluster, target.variant.workload, target.driver
    duration_s, stop_when, tail, begin = w.duration_s, None, None, time.time()
    if acc.controls.cycles and acc.cycle_opening_epoch is not None:
        duration_s, stop_when, tail = _cycles_end(target, acc)
    ep = run_endpoint(c, driver)
    acc.argv = acc.driver_prefix + driver.command(
        c.inst, ep, w, raw_dir=acc.raw_dir, duration_s=duration_s
    )
    (acc.raw_dir / f"{driver.name}.argv").write_text(shlex.join(acc.argv) + "\n")
    faults.step("measure")
    res = execute(
        acc.argv,
        acc.raw_dir,
        driver.name,
        timeout_s=duration_s + WORKLOAD_GRACE_S,
        server_alive=c.alive,
        state=c.state,
        stop_when=stop_when,
    )
    acc.workload_s = res.elapsed_s
    acc.provenance.update(driver_uid=res.uid, driver_role=ep.user)  # never 0, never superuser
    if tail is not None:
        _record_cycles(tail, acc, begin)
    acc.stdout, acc.stderr = res.stdout, res.stderr
    save_output(acc.raw_dir, driver.name, acc.argv, res.exit_code)
    if res.ended:  # blocklab ended it: no exit code, no verdict on its output
        acc.server_alive = c.alive()
        died = "" if acc.server_alive else "the server died during the run; "
        acc.reason = f"{died}{driver.name} {res.ended}"
        return
    acc.phases_s["workload_s"] = round(acc.workload_s, 6)
    acc.exit_code = res.exit_code


def _cycles_end(target: RunTarget, acc: RunState) -> tuple[int, Callable[[], bool], cycles.LogTail]:
    """cycles: the measured run's -T bound, (N + 1) x checkpoint_timeout, and the test that
    ends it: the N-th checkpoint after the opening one has started (the log is read from
    the lead-in's start, so the opening checkpoint is in it)."""
    timeout_s = cycles.checkpoint_timeout_s(acc.provenance.get("settings_written", {}))
    tail = cycles.LogTail(target.cluster.log_path, acc.cycle_log_offset)
    opened, wanted = acc.cycle_opening_epoch or 0.0, acc.controls.cycles

    def done() -> bool:
        return cycles.boundaries_seen(tail.checkpoints(), opened) >= wanted

    return int((wanted + 1) * timeout_s), done, tail


def _record_cycles(tail: cycles.LogTail, acc: RunState, begin_epoch: float) -> None:
    """The whole cycles the measured window held, into the record; fewer than asked for
    fail the run (its window is not whole cycles)."""
    assert acc.cycle_opening_epoch is not None
    wanted = acc.controls.cycles
    found = cycles.cycles_of(tail.checkpoints(), acc.cycle_opening_epoch, begin_epoch, wanted)
    acc.metrics.update(cycles.cycle_metrics(found))
    acc.provenance["cycles"] = {"wanted": wanted, "cycles": found}
    if len(found) < wanted:
        acc.reason = acc.reason or (
            f"only {len(found)} of {wanted} whole checkpoint cycles within the run's bound"
        )


def _plan_pass(target: RunTarget, acc: RunState, log_offset: int) -> None:
    """A driver's pass after the measured window, server up (tpch: per-query times from
    the server log and every query's plan, into the raw directory)."""
    hook = getattr(target.driver, "plan_pass", None)
    if hook is None:
        return
    t0 = time.monotonic()
    with open(target.cluster.log_path, "rb") as f:
        f.seek(log_offset)
        log_text = f.read().decode(errors="replace")
    hook(target.cluster, target.variant.workload, log_text, acc.raw_dir)
    acc.timed("plan_pass_s", t0)


def save_output(raw_dir: Path, stem: str, argv: list[str], code: int | None) -> None:
    """The argv and exit code beside the output execute() wrote ("ended" when blocklab
    ended the driver)."""
    (raw_dir / f"{stem}.argv").write_text(shlex.join(argv) + "\n")
    (raw_dir / f"{stem}.exit_code").write_text(f"{'ended' if code is None else code}\n")


# A failed run's server may be in crash recovery after a backend died: PostgreSQL then
# can sit on a fast shutdown request until recovery ends (seen with PG 18: SIGINT during
# "reinitializing" waited for minutes). Its data is replaced before the next run anyway.
FAILED_RUN_STOP_TIMEOUT_S = 10.0


def _shutdown(c: Cluster, acc: RunState) -> None:
    t0 = time.monotonic()
    if c.pid is not None and not c.alive():
        acc.server_alive = False
    failed = bool(acc.reason) or acc.exit_code not in (0, None)
    clean = c.stop(FAILED_RUN_STOP_TIMEOUT_S) if failed else c.stop()
    acc.timed("server_stop_s", t0)
    acc.provenance["server_stop"] = "clean" if clean else "killed after timeout"


ENOSPC_TEXT = "No space left on device"
NO_SPACE_PREFIX = "no space left on "
SERVER_START_FAILED = "the server did not start"
LOG_PREFIX = re.compile(r"^\d+\.\d+ \[\d+\] ")  # log_line_prefix '%n [%p] '


def start_failure_reason(e: ServerStartError, kept_log: Path) -> str:
    """A failed start's reason: pg_ctl's cause, this start's own log lines, and the copy
    of the log kept with the run (the server's directory is removed when the lab closes)."""
    return (
        f"RunError: {SERVER_START_FAILED}: {e.cause}; this run's server log is kept in "
        f"{kept_log}\n{e.log_tail}"
    )


def no_space_on(target: RunTarget, text: str) -> str:
    """'no space left on DEVICE (mounted at M, the data volume)' when the server or the
    workload said ENOSPC; which volume from the file named on that line (pg_wal goes to
    the WAL volume when there is one). '' when nothing said so."""
    lines = [ln for ln in text.splitlines() if ENOSPC_TEXT in ln]
    if not lines:
        return ""
    facts = target.storage_facts
    role = "wal" if "wal" in facts and any("pg_wal" in ln for ln in lines) else "data"
    vol = facts.get(role, {})
    device = vol.get("device") or "?"
    where = vol.get("mount_point") or vol.get("path") or str(target.cluster.data_dir)
    said = LOG_PREFIX.sub("", lines[0].strip())
    return f"{NO_SPACE_PREFIX}{device} (mounted at {where}, the {role} volume): {said}"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def copy_server_log(src: Path, offset: int, dest: Path) -> None:
    try:
        with open(src, "rb") as f:
            f.seek(offset)
            dest.write_bytes(f.read())
    except OSError as e:
        dest.write_text(f"(server log not readable: {e})\n")

"""Run controls: what the experiment's [design] asks of each run besides the workload:
CPU placement of the driver and the server, a warm-up until throughput is steady, and a
measured run that starts right after a CHECKPOINT with a checkpoint_timeout it never
reaches, or one of whole checkpoint cycles (blocklab.execution.cycles), and a quiet
machine before it (blocklab.storage.quiesce). blocklab.execution.runner calls these;
each returns what it applied, for the run record (provenance "controls"): a placement
that cannot be applied is said so there, never dropped.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab import proc
from blocklab.execution import placement, steady
from blocklab.execution.placement import Placement
from blocklab.experiment_file.design import ALIGNED_CHECKPOINT_TIMEOUT, RunDesign

SAMPLE_EVERY_S = 0.25
WARMUP_CHUNK_S = 5  # steady warm-up: pgbench runs of this length, one tps point each
STEADY_WINDOW_CHUNKS = 3  # steady over 3 chunks (15 s)
STEADY_MAX_CV = 0.05


@dataclass(frozen=True)
class RunControls:
    warmup_steady: bool = False
    warmup_max_s: int = 120
    checkpoint_aligned: bool = False
    cycles: int = 0  # checkpoint "cycles": whole checkpoint cycles per measured run (0: off)
    quiesce_max_s: int = 0  # wait this long at most for dirty pages and I/O to drain (0: off)
    placement: Placement | None = None
    placement_mode: str = "none"
    placement_note: str = ""
    footprint: bool | None = None  # design.footprint: None measures where a loop image is

    @classmethod
    def from_design(cls, rd: RunDesign) -> RunControls:
        chosen, note = _placement(rd)
        return cls(
            warmup_steady=rd.warmup == "steady",
            warmup_max_s=rd.warmup_max_s,
            checkpoint_aligned=rd.checkpoint == "aligned",
            cycles=rd.cycles if rd.checkpoint == "cycles" else 0,
            quiesce_max_s=rd.quiesce_max_s,
            placement=chosen,
            placement_mode=rd.placement,
            placement_note=note,
            footprint=rd.footprint,
        )

    def settings(self, written: dict[str, str]) -> dict[str, str]:
        """The settings the server gets: aligned runs never reach checkpoint_timeout."""
        if not self.checkpoint_aligned:
            return written
        return {**written, "checkpoint_timeout": ALIGNED_CHECKPOINT_TIMEOUT}

    def to_json(self) -> dict[str, Any]:
        return {
            "warmup": "steady" if self.warmup_steady else "fixed",
            "warmup_max_s": self.warmup_max_s,
            "checkpoint": self._checkpoint_json(),
            "quiesce_max_s": self.quiesce_max_s,
            "placement_mode": self.placement_mode,
            "placement_requested": None if self.placement is None else self.placement.to_json(),
            "placement_note": self.placement_note,
            "footprint": {None: "where a loop image is", True: "on", False: "off"}[self.footprint],
        }

    def _checkpoint_json(self) -> dict[str, Any]:
        if self.cycles:
            return {"mode": "cycles", "cycles": self.cycles}
        if self.checkpoint_aligned:
            return {
                "mode": "aligned",
                "checkpoint_before_run": True,
                "checkpoint_timeout": ALIGNED_CHECKPOINT_TIMEOUT,
            }
        return {"mode": "free"}


def _placement(rd: RunDesign) -> tuple[Placement | None, str]:
    if rd.placement == "auto":
        decision = placement.decide(placement.machine_cpus())
        return decision.placement, decision.reason
    if rd.placement == "explicit":
        assert rd.driver_cpus is not None and rd.server_cpus is not None
        p = Placement(
            tuple(placement.parse_cpu_list(rd.driver_cpus, key="placement.driver_cpus")),
            tuple(placement.parse_cpu_list(rd.server_cpus, key="placement.server_cpus")),
        )
        return p, "as the experiment file asks"
    return None, "not asked for"


# -- placement at run time -----------------------------------------------------------------


def driver_prefix(controls: RunControls, report: dict[str, Any]) -> list[str]:
    """`taskset` for the driver, or [] with the reason in `report` when it cannot be."""
    if controls.placement is None:
        return []
    cpus = controls.placement.driver_cpus
    problem = _unavailable(cpus)
    if problem is None and shutil.which("taskset") is None:
        problem = "taskset is not installed (util-linux)"
    if problem is not None:
        report["driver"] = {"applied": False, "reason": problem}
        return []
    report["driver"] = {"applied": True, "cpus": placement.format_cpu_list(cpus)}
    return placement.driver_prefix(cpus)


def place_server(controls: RunControls, server_pid: int, report: dict[str, Any]) -> None:
    """The postmaster, its children and their threads on the server CPUs (backends forked
    later inherit them); what could not be placed goes into `report`."""
    if controls.placement is None:
        return
    cpus = controls.placement.server_cpus
    problem = _unavailable(cpus)
    if problem is not None:
        report["server"] = {"applied": False, "reason": problem}
        return
    failed = placement.failures(placement.apply_to_tree(server_pid, cpus))
    report["server"] = {
        "applied": not failed,
        "cpus": placement.format_cpu_list(cpus),
        **({"reason": "; ".join(failed)} if failed else {}),
    }


def _unavailable(cpus: Sequence[int]) -> str | None:
    have = placement.machine_cpus()
    missing = sorted(set(cpus) - set(have))
    if not missing:
        return None
    return (
        f"CPU {placement.format_cpu_list(missing)} is not available here "
        f"(available: {placement.format_cpu_list(have)})"
    )


@dataclass
class CpuSampler:
    """Samples, in a thread, the CPUs the server's processes and this process's descendants
    (the driver) run on, from /proc (blocklab.execution.placement.CpuLog), every
    SAMPLE_EVERY_S. The two trees are walked from their roots (blocklab.proc.tree_tasks,
    the children files read from the log's open files), /proc is not scanned. Leaving
    the `with` block closes the log (its files; the allowed lists read a last time)."""

    server_pid: int
    log: placement.CpuLog = field(default_factory=placement.CpuLog)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._thread is None or not self._thread.is_alive():  # never under its feet
            self.log.close()  # the allowed CPUs once more; the log's files closed

    def tasks(self) -> dict[int, list[int]]:
        """The server's tree and this process's (the driver in it), each process with its
        threads: walked from the roots (not a scan of /proc), each task/ listed once, the
        children files read from the log's open files."""
        tasks = proc.tree_tasks(self.server_pid, self.log.children, self.log.threads)
        for pid, tids in proc.tree_tasks(os.getpid(), self.log.children, self.log.threads).items():
            tasks.setdefault(pid, tids)
        return tasks

    def sample(self, tasks: dict[int, list[int]]) -> None:
        """One look at the trees' processes but this one (its threads only walked)."""
        self.log.sample(tasks, walked_only=(os.getpid(),))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample(self.tasks())
            except (OSError, ValueError):
                pass  # a process ended between listing and reading: the next look sees
            self._stop.wait(SAMPLE_EVERY_S)

    def to_json(self) -> list[dict[str, object]]:
        return self.log.to_json()


# -- steady warm-up ------------------------------------------------------------------------


def steady_warmup(
    run_chunk: Callable[[int], steady.Chunk | None], max_s: int
) -> tuple[bool, dict[str, Any]]:
    """Run warm-up chunks of WARMUP_CHUNK_S until the last STEADY_WINDOW_CHUNKS chunks'
    tps is steady and their WAL rates no longer fall (blocklab.execution.steady.chunks_steady)
    or `max_s` is spent. `run_chunk(seconds)` returns the chunk's tps and WAL rates, or None
    when it failed (the warm-up fails then)."""
    chunks: list[steady.Chunk] = []
    max_chunks = max(STEADY_WINDOW_CHUNKS, max_s // WARMUP_CHUNK_S)
    decision = steady.ChunkDecision(False, "no chunk yet")
    while len(chunks) < max_chunks:
        got = run_chunk(WARMUP_CHUNK_S)
        if got is None:
            report = _warmup_report(chunks, decision)
            return False, {**report, "note": "a warm-up chunk failed"}
        chunks.append(got)
        decision = steady.chunks_steady(chunks, STEADY_WINDOW_CHUNKS, STEADY_MAX_CV)
        if decision.steady:
            break
    return True, _warmup_report(chunks, decision)


def _warmup_report(chunks: list[steady.Chunk], decision: steady.ChunkDecision) -> dict[str, Any]:
    seconds = len(chunks) * WARMUP_CHUNK_S
    note = (
        f"steady after {seconds} s: the last {STEADY_WINDOW_CHUNKS} chunks of "
        f"{WARMUP_CHUNK_S} s varied by at most {STEADY_MAX_CV:.0%} in tps and their WAL "
        "rates no longer fell"
        if decision.steady
        else f"not steady within the bound of {seconds} s ({decision.reason}); "
        "measured from there anyway"
    )
    return {
        "mode": "steady",
        "steady": decision.steady,
        "warmup_s": seconds,
        "chunk_s": WARMUP_CHUNK_S,
        "chunks_tps": [round(c.tps, 3) for c in chunks],
        "chunks_wal_fpi_per_s": [_r3(c.wal_fpi_per_s) for c in chunks],
        "chunks_wal_bytes_per_s": [_r3(c.wal_bytes_per_s) for c in chunks],
        "note": note,
    }


def _r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)

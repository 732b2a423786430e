"""`[design] checkpoint = "cycles"`: a measured window of N whole checkpoint cycles.

A cycle runs from one checkpoint's start to the next one's start: right after its start
(the redo point) every first change to a page writes a full-page image, the storm decays
as the hot pages are touched, and the checkpoint's own writes spread over the cycle
(checkpoint_completion_target). A window of whole cycles weighs every phase of that as
the server lives it, for a 4 kB build and an 8 kB build alike; a fixed window after a
CHECKPOINT catches a different phase of the decay for each page size.

How a run does it (pgbench only):
1. the warm-up (fixed or steady) as usual, after the run's CHECKPOINT;
2. a lead-in: pgbench keeps the load on until the next checkpoint starts (the timed one,
   checkpoint_timeout after the run's CHECKPOINT, or one max_wal_size requests earlier);
   the window opens at that start, which is an ordinary, spread checkpoint, not an
   immediate one;
3. the measured pgbench, bounded by -T (N + 1) x checkpoint_timeout, is ended when the
   N-th checkpoint after the opening one starts: the window then holds N complete
   checkpoints (the opening one and N - 1 more; the checkpointer runs one at a time,
   so each completed before the next started) and ends where the next cycle begins.
   The same N for every variant; a variant whose max_wal_size requests checkpoints sooner
   has shorter cycles, not fewer.

Why pgbench is ended by SIGALRM: pgbench has no SIGINT handler (SIGINT kills it without
its report), but -T itself works by alarm(): SIGALRM sets pgbench's timer_exceeded, the
clients finish their transactions and pgbench prints its full report and exits 0, with
tps computed from the time it really ran (pgbench.c: setalarm, handle_sig_alarm,
printResults; the same in PG 13-18). So the measured window is an ordinary pgbench run
that ends early, and every parser, verdict and probe works unchanged. Checkpoint starts
are seen by tailing the server log (log_checkpoints is always on; blocklab.probes.
checkpoints parses it), polled every 0.5 s: the window's edges are within about half a
second of the checkpoints' starts, and each run records where its cycles fell.

A run that does not see its N cycles within the bound fails with the reason. The cycles
are recorded per run: provenance "cycles" (each cycle's start and end seconds relative
to the measured start, its checkpoint's completion, and its trigger: "time" for
checkpoint_timeout, "wal" for max_wal_size) and metrics checkpoint_cycles,
checkpoint_cycles_timed, checkpoint_cycles_wal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from blocklab.errors import UserError
from blocklab.experiment_file import Experiment
from blocklab.model import Variant
from blocklab.probes.checkpoints import Checkpoint, parse_log

DEFAULT_CHECKPOINT_TIMEOUT_S = 300  # PostgreSQL's default, 5min
MIN_CHECKPOINT_TIMEOUT_S = 30  # PostgreSQL's minimum
MAX_RUN_S = 3600  # a cycles run (lead-in + N cycles) longer than this is refused
LEAD_IN_MARGIN_S = 60  # the lead-in's -T bound beyond checkpoint_timeout
# triggers that do not start a cycle of the workload's own (the server stopping, recovery)
NOT_A_CYCLE = ("shutdown", "end-of-recovery")
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600, "d": 86400}
_TIME = re.compile(r"^\s*(\d+)\s*(us|ms|s|min|h|d)?\s*$")


# -- settings and plan (pure) ----------------------------------------------------------------


def guc_seconds(value: str) -> float | None:
    """A time GUC counted in seconds ("30s", "5min", "300"); None if it is not one."""
    m = _TIME.match(str(value).strip("'\""))
    if m is None:
        return None
    return int(m[1]) * _TIME_UNITS[m[2] or "s"]


def checkpoint_timeout_s(settings: Mapping[str, str]) -> float:
    """The checkpoint_timeout a variant's server gets (PostgreSQL's default when unset)."""
    if "checkpoint_timeout" not in settings:
        return DEFAULT_CHECKPOINT_TIMEOUT_S
    seconds = guc_seconds(settings["checkpoint_timeout"])
    if seconds is None:
        raise UserError(
            f"matrix.settings.checkpoint_timeout: {settings['checkpoint_timeout']!r} is not a "
            'time; allowed: seconds or a number with a unit ("30s", "5min")'
        )
    return seconds


def max_timeout_s(cycles: int) -> float:
    """The longest checkpoint_timeout whose run (lead-in + cycles) stays within MAX_RUN_S."""
    return MAX_RUN_S / (cycles + 1)


def run_window_s(v: Variant, cycles: int) -> float:
    """A cycles run's workload time at most: the warm-up and the lead-in end at the first
    timed checkpoint after the warm-up (checkpoint_timeout after the run's CHECKPOINT,
    then every checkpoint_timeout), then N cycles of checkpoint_timeout (max_wal_size can
    only make them shorter)."""
    timeout_s = checkpoint_timeout_s(dict(v.settings))
    return (math.floor(v.workload.warmup_s / timeout_s) + 1 + cycles) * timeout_s


def check_experiment(exp: Experiment) -> None:
    """UserError (exit 2) for a cycles design this tool cannot run or that runs too long."""
    rd = exp.run_design
    if rd.checkpoint != "cycles":
        return
    limit_s = max_timeout_s(rd.cycles)
    for v in exp.variants():
        if v.workload.driver != "pgbench":
            raise UserError(
                f"design.checkpoint: 'cycles' ends the measured run at a checkpoint's start "
                f"through pgbench's own -T signal; matrix.workload.driver {v.workload.driver!r} "
                "cannot be ended so; allowed with 'cycles': pgbench"
            )
        timeout_s = checkpoint_timeout_s(dict(v.settings))
        if not MIN_CHECKPOINT_TIMEOUT_S <= timeout_s <= limit_s:
            raise UserError(
                f"matrix.settings.checkpoint_timeout: {timeout_s:g} s with design.cycles "
                f"(--cycles) = {rd.cycles} makes a run of {(rd.cycles + 1) * timeout_s:g} s "
                f"(a lead-in to the next checkpoint and {rd.cycles} cycles); allowed: "
                f"{MIN_CHECKPOINT_TIMEOUT_S}s..{int(limit_s)}s (PostgreSQL's minimum is "
                f"{MIN_CHECKPOINT_TIMEOUT_S} s; a run may last at most {MAX_RUN_S // 60} min)"
            )


def window_line(exp: Experiment) -> str | None:
    """For `plan`: what a cycles run measures, and that matrix.duration is not it (None for
    a design that measures a duration)."""
    rd = exp.run_design
    if rd.checkpoint != "cycles":
        return None
    timeouts = sorted({checkpoint_timeout_s(dict(v.settings)) for v in exp.variants()})
    durations = sorted({v.workload.duration_s for v in exp.variants()})
    return (
        f"measured window: {rd.cycles} whole checkpoint cycle{'' if rd.cycles == 1 else 's'} "
        f"per run (checkpoint_timeout {' / '.join(f'{t:g} s' for t in timeouts)}; --cycles N "
        f"changes it); matrix.duration ({' / '.join(f'{d} s' for d in durations)}) is not "
        "the measured window"
    )


# -- cycle boundaries (pure, on parsed checkpoints) ----------------------------------------


def _starts(checkpoints: Sequence[Checkpoint], after_epoch: float) -> list[Checkpoint]:
    """Checkpoints (not restartpoints, shutdowns or recovery) started at or after the epoch."""
    return [
        cp
        for cp in checkpoints
        if cp.kind == "checkpoint"
        and cp.start_epoch is not None
        and cp.start_epoch >= after_epoch
        and cp.trigger not in NOT_A_CYCLE
    ]


def opening(checkpoints: Sequence[Checkpoint], after_epoch: float) -> Checkpoint | None:
    """The first checkpoint started at or after `after_epoch`: the window opens there."""
    found = _starts(checkpoints, after_epoch)
    return found[0] if found else None


def boundaries_seen(checkpoints: Sequence[Checkpoint], opening_epoch: float) -> int:
    """Checkpoints started after the opening one: each closes one whole cycle."""
    return len(
        [cp for cp in _starts(checkpoints, opening_epoch) if cp.start_epoch != opening_epoch]
    )


def cycles_of(
    checkpoints: Sequence[Checkpoint], opening_epoch: float, origin_epoch: float, wanted: int
) -> list[dict[str, Any]]:
    """The whole cycles from the opening checkpoint on (at most `wanted`), times in seconds
    relative to `origin_epoch` (the measured run's start): a cycle is whole when the next
    checkpoint has started."""
    cps = _starts(checkpoints, opening_epoch)
    out = []
    for cp, nxt in zip(cps, cps[1:], strict=False):
        assert cp.start_epoch is not None and nxt.start_epoch is not None
        out.append(
            {
                "start_s": round(cp.start_epoch - origin_epoch, 3),
                "end_s": round(nxt.start_epoch - origin_epoch, 3),
                "length_s": round(nxt.start_epoch - cp.start_epoch, 3),
                "checkpoint_end_s": (
                    None if cp.end_epoch is None else round(cp.end_epoch - origin_epoch, 3)
                ),
                "trigger": cp.trigger,
                "timed": cp.trigger == "time",
                "requested_by_wal": cp.trigger == "wal",
            }
        )
    return out[:wanted]


def cycle_metrics(cycles: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    return {
        "checkpoint_cycles": len(cycles),
        "checkpoint_cycles_timed": sum(1 for c in cycles if c["timed"]),
        "checkpoint_cycles_wal": sum(1 for c in cycles if c["requested_by_wal"]),
    }


# -- watching the server log -----------------------------------------------------------------


class LogTail:
    """The server log from an offset on, read a piece at a time as it grows."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset, self.text = path, offset, ""

    def checkpoints(self) -> list[Checkpoint]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            chunk = b""
        # only whole lines: a line being written is read on the next look
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        self.text += whole.decode(errors="replace")
        return parse_log(self.text)

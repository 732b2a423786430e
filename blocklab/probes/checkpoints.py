"""The checkpoint timeline from the server log (pure: text in, records out).

The server logs with log_line_prefix '%n [%p] ' (epoch seconds with milliseconds, PID),
lc_messages=C and log_checkpoints=on. Messages (xlog.c, LogCheckpointStart/End):

  checkpoint starting: immediate force wait          (flags; 18+/master say "fast")
  checkpoint complete: wrote 3 buffers (0.0%); 0 WAL file(s) added, 0 removed,
      0 recycled; write=0.001 s, sync=0.001 s, total=0.003 s; sync files=2,
      longest=0.001 s, average=0.001 s; distance=0 kB, estimate=0 kB
      [; lsn=0/1549A88, redo lsn=0/1549A30]                     (17+)
  18+: "complete: wrote 3 buffers (0.0%), wrote 0 SLRU buffers; ..."
  restartpoint starting/complete: the same on a standby.

Buffers become bytes with the build's block size; distance (kB = 1024 bytes) becomes
bytes. Times are epoch seconds; `timeline()` makes them relative to the workload start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LINE = re.compile(r"^(?P<epoch>\d+\.\d+) \[(?P<pid>\d+)\] (?P<level>[A-Z]+\d?):\s+(?P<msg>.*)$")
START = re.compile(r"^(?P<kind>checkpoint|restartpoint) starting:(?P<flags>.*)$")
COMPLETE = re.compile(
    r"^(?P<kind>checkpoint|restartpoint) complete: wrote (?P<buffers>\d+) buffers "
    r"\((?P<pct>[\d.]+)%\)(?:, wrote (?P<slru>\d+) SLRU buffers)?;(?P<rest>.*)$"
)
DISTANCE = re.compile(r"distance=(?P<distance>\d+) kB, estimate=(?P<estimate>\d+) kB")
TIMES = re.compile(r"write=(?P<write>[\d.]+) s, sync=(?P<sync>[\d.]+) s, total=(?P<total>[\d.]+) s")
FILES = re.compile(
    r"(?P<added>\d+) WAL file\(s\) added, (?P<removed>\d+) removed, (?P<recycled>\d+) recycled"
)
LSN = re.compile(r"lsn=(?P<lsn>[0-9A-F]+/[0-9A-F]+), redo lsn=(?P<redo>[0-9A-F]+/[0-9A-F]+)")


@dataclass
class Checkpoint:
    kind: str  # checkpoint | restartpoint
    start_epoch: float | None  # None: the "starting" line is not in the text
    end_epoch: float | None  # None: no "complete" line (still running, or crashed)
    flags: tuple[str, ...] = ()
    buffers_written: int | None = None
    slru_buffers_written: int | None = None
    write_s: float | None = None
    sync_s: float | None = None
    total_s: float | None = None
    wal_distance_bytes: int | None = None
    wal_estimate_bytes: int | None = None
    wal_files_added: int | None = None
    wal_files_removed: int | None = None
    wal_files_recycled: int | None = None
    lsn: str | None = None
    redo_lsn: str | None = None

    @property
    def trigger(self) -> str:
        return trigger_of(self.flags)

    @property
    def effective_start(self) -> float | None:
        """The start, or (when the starting line is missing) end minus total time."""
        if self.start_epoch is not None:
            return self.start_epoch
        if self.end_epoch is not None and self.total_s is not None:
            return self.end_epoch - self.total_s
        return None


def trigger_of(flags: Iterable[str]) -> str:
    """The cause of a checkpoint from its start flags (most specific first)."""
    f = set(flags)
    for word, name in (("shutdown", "shutdown"), ("end-of-recovery", "end-of-recovery")):
        if word in f:
            return name
    if f & {"immediate", "fast"}:
        return "immediate"
    if "force" in f:
        return "requested"
    if f & {"wal", "xlog"}:
        return "wal"
    if "time" in f:
        return "time"
    return "unknown" if not f else "requested"


def parse_log(text: str) -> list[Checkpoint]:
    """Every checkpoint/restartpoint in a server log, in order."""
    out: list[Checkpoint] = []
    running: Checkpoint | None = None
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None or m["level"] != "LOG":
            continue
        epoch, msg = float(m["epoch"]), m["msg"]
        if (s := START.match(msg)) is not None:
            if running is not None:  # a start without its end (crash, restart): keep it
                out.append(running)
            running = Checkpoint(s["kind"], epoch, None, tuple(s["flags"].split()))
        elif (c := COMPLETE.match(msg)) is not None:
            cp = running if running is not None and running.kind == c["kind"] else None
            if cp is None:
                if running is not None:
                    out.append(running)
                cp = Checkpoint(c["kind"], None, None)
            _fill_complete(cp, epoch, c)
            out.append(cp)
            running = None
    if running is not None:
        out.append(running)
    return out


def _fill_complete(cp: Checkpoint, epoch: float, c: re.Match[str]) -> None:
    cp.end_epoch = epoch
    cp.buffers_written = int(c["buffers"])
    cp.slru_buffers_written = int(c["slru"]) if c["slru"] is not None else None
    rest = c["rest"]
    if (d := DISTANCE.search(rest)) is not None:
        cp.wal_distance_bytes = int(d["distance"]) * 1024
        cp.wal_estimate_bytes = int(d["estimate"]) * 1024
    if (t := TIMES.search(rest)) is not None:
        cp.write_s, cp.sync_s, cp.total_s = float(t["write"]), float(t["sync"]), float(t["total"])
    if (f := FILES.search(rest)) is not None:
        cp.wal_files_added = int(f["added"])
        cp.wal_files_removed = int(f["removed"])
        cp.wal_files_recycled = int(f["recycled"])
    if (lsn := LSN.search(rest)) is not None:
        cp.lsn, cp.redo_lsn = lsn["lsn"], lsn["redo"]


def overlaps(cp: Checkpoint, begin_epoch: float, end_epoch: float) -> bool:
    start = cp.effective_start
    if start is None or start > end_epoch:
        return False
    return cp.end_epoch is None or cp.end_epoch >= begin_epoch


def timeline(
    checkpoints: Iterable[Checkpoint], begin_epoch: float, end_epoch: float, block_size_bytes: int
) -> list[dict[str, Any]]:
    """Checkpoints that overlap [begin, end], times relative to begin.

    One still running at `end_epoch` (no complete line by then) is `incomplete`, with
    end_s and the volumes it had not yet reported set to None.
    """
    out = []
    for cp in checkpoints:
        if not overlaps(cp, begin_epoch, end_epoch):
            continue
        start = cp.effective_start
        assert start is not None
        done = cp.end_epoch is not None and cp.end_epoch <= end_epoch
        buffers = cp.buffers_written if done else None
        out.append(
            {
                "kind": cp.kind,
                "start_s": round(start - begin_epoch, 3),
                "end_s": round(cp.end_epoch - begin_epoch, 3) if done and cp.end_epoch else None,
                "trigger": cp.trigger,
                "flags": " ".join(cp.flags),
                "buffers_written": buffers,
                "bytes_written": buffers * block_size_bytes if buffers is not None else None,
                "wal_distance_bytes": cp.wal_distance_bytes if done else None,
                "write_s": cp.write_s if done else None,
                "sync_s": cp.sync_s if done else None,
                "total_s": cp.total_s if done else None,
                "started_in_run": start >= begin_epoch,
                "incomplete": not done,
            }
        )
    return out


def counts(tl: list[dict[str, Any]]) -> dict[str, int]:
    """Checkpoints (not restartpoints) started in the run and completed in the run."""
    cps = [c for c in tl if c["kind"] == "checkpoint"]
    return {
        "checkpoints_started": sum(1 for c in cps if c["started_in_run"]),
        "checkpoints_completed": sum(1 for c in cps if not c["incomplete"]),
        "checkpoints_overlapping": len(cps),
    }

"""One execution of a workload driver, watched: output straight into the run's raw files,
ended with its whole process group when it overruns its time or outlives its server.

A driver can hang when its server dies (go-tpc was seen to, under load): waiting for the
whole timeout (duration + a margin) would hold the experiment for minutes, so once the
server is gone the driver gets SERVER_GONE_GRACE_S to notice and exit by itself.

`stop_when`, polled every POLL_S, ends a run early and cleanly: when it returns True the
driver gets `stop_signal` once (pgbench: SIGALRM, the signal of its own -T end, after
which it prints its full report; blocklab.execution.cycles) and is then waited for as usual.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from blocklab import proc

SERVER_GONE_GRACE_S = 15.0
POLL_S = 0.5


@dataclass(frozen=True)
class Execution:
    exit_code: int | None  # None: blocklab ended it (see `ended`)
    stdout: str
    stderr: str
    ended: str  # why blocklab ended it; "" when it exited by itself
    elapsed_s: float


def execute(
    argv: Sequence[str],
    raw_dir: Path,
    stem: str,
    *,
    timeout_s: float,
    server_alive: Callable[[], bool],
    grace_s: float = SERVER_GONE_GRACE_S,
    stop_when: Callable[[], bool] | None = None,
    stop_signal: int = signal.SIGALRM,
) -> Execution:
    """Run `argv` with stdout and stderr in raw_dir/STEM.stdout and .stderr."""
    out, err = raw_dir / f"{stem}.stdout", raw_dir / f"{stem}.stderr"
    for p in (out, err):
        p.unlink(missing_ok=True)
    t0 = time.monotonic()
    child = proc.spawn(argv, stdout_path=out, stderr_path=err)
    try:
        stop = None if stop_when is None else _Stop(child, stop_when, stop_signal)
        code, ended = _watch(child, t0, timeout_s, server_alive, grace_s, stop)
    except BaseException:
        proc.end_group(child)
        raise
    return Execution(
        exit_code=code,
        stdout=out.read_text(errors="replace"),
        stderr=err.read_text(errors="replace"),
        ended=ended,
        elapsed_s=time.monotonic() - t0,
    )


def _watch(
    child: subprocess.Popen[bytes],
    t0: float,
    timeout_s: float,
    server_alive: Callable[[], bool],
    grace_s: float,
    stop: _Stop | None = None,
) -> tuple[int | None, str]:
    gone_at: float | None = None
    while True:
        try:
            return child.wait(timeout=POLL_S), ""
        except subprocess.TimeoutExpired:
            pass
        if stop is not None:
            stop.check()
        now = time.monotonic()
        ended = ""
        if now - t0 > timeout_s:
            ended = f"timed out after {timeout_s:g} s and was ended"
        elif gone_at is None and not server_alive():
            gone_at = now
        elif gone_at is not None and now - gone_at > grace_s:
            ended = f"was still running {grace_s:g} s after the server died and was ended"
        if ended:
            proc.end_group(child)
            return None, ended


class _Stop:
    """Sends the stop signal once, the first time `when()` says so."""

    def __init__(self, child: subprocess.Popen[bytes], when: Callable[[], bool], sig: int):
        self.child, self.when, self.sig, self.sent = child, when, sig, False

    def check(self) -> None:
        if not self.sent and self.when():
            self.sent = True
            self.child.send_signal(self.sig)

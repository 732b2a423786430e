"""One execution of a workload driver, watched: output straight into the run's raw files,
ended with its whole process group when it overruns its time or outlives its server.

A driver can hang when its server dies (go-tpc was seen to, under load): waiting for the
whole timeout (duration + a margin) would hold the experiment for minutes, so once the
server is gone the driver gets SERVER_GONE_GRACE_S to notice and exit by itself.

`stop_when`, polled every POLL_S, ends a run early and cleanly: when it returns True the
driver gets `stop_signal` once (pgbench: SIGALRM, the signal of its own -T end, after
which it prints its full report; blocklab.execution.cycles) and is then waited for as usual.

Least privilege: every driver execution, every dataset load (`run_driver`) runs as
`driver_user()`, the server's unprivileged OS user, never as root, whatever blocklab runs
as; the uid it ran as is read back from /proc (`Execution.uid`) for the run's provenance.
It writes only into a temporary directory of its own (its working directory), whose
regular files root then copies into the run's raw files (DRIVER_DIR): the raw directory
stays root's and need not be reachable by the driver's user, so nothing the driver does
can redirect a file root writes there. That directory is recorded in the State before it
is made (blocklab.storage.made_dirs): a blocklab killed while a driver runs leaves it to
`blocklab cleanup` or the next run, like a server or a mount.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from blocklab import proc
from blocklab.errors import RunError
from blocklab.paths import untraversable
from blocklab.postgres.cluster import server_user
from blocklab.state import State
from blocklab.storage import made_dirs

SERVER_GONE_GRACE_S = 15.0
POLL_S = 0.5
DRIVER_DIR = "driver"  # in a run's raw directory: the files the driver wrote
DRIVER_DIR_PREFIX = "blocklab-driver-"  # its working directory in TMPDIR, then a random part


def driver_user() -> proc.User:
    """The OS user drivers, loads and psql run as: the server's unprivileged user (created
    when missing; never uid 0). One user for both: its rights over the data directory give
    it nothing a superuser connection does not (COPY ... TO PROGRAM runs as it too), and
    root gives it nothing."""
    user = server_user()
    if user.uid == 0:  # server_user refuses this already; a driver must never be root
        raise RunError(f"the OS user {user.name!r} is root; drivers never run as root")
    return user


@contextmanager
def driver_dir(raw_dir: Path, user: proc.User, state: State) -> Iterator[Path]:
    """A fresh directory of `user`'s in the system's temporary directory: the driver's
    working directory, the only place it writes (pgbench's per-transaction logs: a relative
    --log-prefix). Afterwards root copies its regular files, never a symlink, into
    raw_dir/DRIVER_DIR (root's) and removes it: the results directory need not be open
    to the driver's user, and nothing the driver leaves can redirect a write of root's.
    The files are read through the directory opened when it was made, so a driver that
    moves it away and leaves a symlink under its name makes root read nothing else.
    It is recorded in `state` before it is made, and dropped from it once removed."""
    base = Path(tempfile.gettempdir())
    blocked = untraversable(base, user.uid, user.gid)
    if blocked is not None:
        raise RunError(
            f"TMPDIR: the driver's user {user.name!r} cannot enter {blocked}; allowed: a "
            "temporary directory every user may traverse (/tmp)"
        )
    work = base / f"{DRIVER_DIR_PREFIX}{secrets.token_hex(6)}"
    # make_dir within the try: a Ctrl-C just as it returned, before a later `try`, left
    # the directory and its entry (made=True) to `blocklab cleanup`; the entry recorded
    # is what the directory is removed by, whatever step the interruption came after
    dir_fd = -1
    try:
        made_dirs.make_dir(work, state, key="TMPDIR", purpose="a driver's working dir")
        dir_fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        os.fchmod(dir_fd, 0o700)
        os.fchown(dir_fd, user.uid, user.gid)
        yield work
    finally:
        try:
            if dir_fd >= 0:
                _collect(dir_fd, raw_dir / DRIVER_DIR)
        finally:
            if dir_fd >= 0:
                os.close(dir_fd)
            _remove(work, state)


def _remove(work: Path, state: State) -> None:
    """Delete the driver's directory when its name is still the directory made (its user
    owns it, so it can rename it: whatever is under the name then is left alone), as its
    State entry says; nothing when it has none (make_dir failed, and undid its entry)."""
    try:
        made_dirs.remove_recorded(work, state)
    except made_dirs.LeftAlone:
        pass


def _collect(dir_fd: int, dest: Path) -> None:
    """Copy the regular files directly in the directory `dir_fd` into `dest` (made when
    there are any), each opened without following a symlink or waiting on a FIFO."""
    for entry in os.scandir(dir_fd):
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since scandir looked
                continue
            dest.mkdir(mode=0o755, exist_ok=True)
            with open(dest / entry.name, "wb") as out:
                shutil.copyfileobj(src, out)


def run_driver(argv: Sequence[str], *, timeout_s: float) -> proc.Result:
    """A driver's command run to completion (a dataset load: pgbench -i, sysbench
    prepare, psql; the self-test's pgbench) as `driver_user()`."""
    return proc.run(argv, user=driver_user(), cwd="/", timeout_s=timeout_s)


@dataclass(frozen=True)
class Execution:
    exit_code: int | None  # None: blocklab ended it (see `ended`)
    stdout: str
    stderr: str
    ended: str  # why blocklab ended it; "" when it exited by itself
    elapsed_s: float
    uid: int | None = None  # the uid it ran as, read from /proc (None: gone before)


def execute(
    argv: Sequence[str],
    raw_dir: Path,
    stem: str,
    *,
    timeout_s: float,
    server_alive: Callable[[], bool],
    state: State,
    grace_s: float = SERVER_GONE_GRACE_S,
    stop_when: Callable[[], bool] | None = None,
    stop_signal: int = signal.SIGALRM,
) -> Execution:
    """Run `argv` with stdout and stderr in raw_dir/STEM.stdout and .stderr, in a working
    directory recorded in `state` (the server's: blocklab.postgres.cluster.Cluster.state)."""
    out, err = raw_dir / f"{stem}.stdout", raw_dir / f"{stem}.stderr"
    for p in (out, err):
        p.unlink(missing_ok=True)
    user = driver_user()
    with driver_dir(raw_dir, user, state) as work:
        t0 = time.monotonic()
        child = proc.spawn(argv, stdout_path=out, stderr_path=err, user=user, cwd=work)
        uid = proc.process_uid(child.pid)  # not reaped yet: a zombie still says
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
        uid=uid,
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

"""The single door for subprocesses.

`run()` runs a command to completion in its own process group, with a timeout that
escalates TERM then KILL to the whole group, and raises `CommandError` carrying the
command, exit code and output. `spawn()` starts a long-lived process (a server, a
sampler) in its own process group; `terminate()` ends one by PID.

Root signals only PIDs it has verified: `postmaster_refusal()` says why a PID (read from
a postmaster.pid or the state file, both writable by the server's user) is not that data
directory's postmaster, and the callers then leave it alone.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blocklab.errors import CommandError

DEFAULT_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float


@dataclass(frozen=True)
class User:
    """An OS account to run a command as (postgres must never run as root)."""

    name: str
    uid: int
    gid: int
    home: str


# blocklab's own secrets: a results database's password (PGPASSWORD, or inside the
# BLOCKLAB_RESULTS URI) is for blocklab's connection only, never for a child
SECRET_ENV = ("PGPASSWORD", "BLOCKLAB_RESULTS")
# The whole environment of a process started with inherit=False (the server): the same
# bytes whoever starts blocklab, from whichever shell. The size of the environment moves
# the initial stack, and with it the alignment of everything on it: Mytkowicz et al.
# (ASPLOS 2009) changed program speed by several percent with nothing else.
CANONICAL_PATH = "/usr/local/bin:/usr/bin:/bin"


def _env(
    env: Mapping[str, str] | None,
    user: User | None,
    unset: Collection[str] = (),
    inherit: bool = True,
) -> dict[str, str]:
    hidden = {*unset, *SECRET_ENV}
    inherited = os.environ if inherit else {"PATH": CANONICAL_PATH}
    merged = {k: v for k, v in inherited.items() if k not in hidden}
    merged["LC_ALL"] = "C"
    merged["LANG"] = "C"
    if user is not None:
        merged["HOME"] = user.home
        merged["USER"] = user.name
        merged["LOGNAME"] = user.name
    if env:
        merged.update(env)
    return merged


def canonical_env(user: User | None) -> dict[str, str]:
    """The environment a process started with inherit=False gets (recorded in provenance)."""
    return _env(None, user, inherit=False)


def _user_kwargs(user: User | None) -> dict[str, Any]:
    if user is None or os.geteuid() == user.uid:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": []}


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    user: User | None = None,
    input_text: str | None = None,
    check: bool = True,
    log_path: Path | None = None,
    unset: Collection[str] = (),
    inherit: bool = True,
) -> Result:
    """Run a command to completion. With `log_path`, stdout and stderr go to that file
    (appended) instead of memory, and the returned output is the file's tail. Variables
    named in `unset` are removed from the inherited environment; with `inherit=False`
    nothing is inherited (canonical_env: PATH, locale and the user's names only)."""
    args = [str(a) for a in argv]
    started = time.monotonic()
    log = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=_env(env, user, unset, inherit),
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=log if log is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
            start_new_session=True,
            **_user_kwargs(user),
        )
        try:
            out_b, err_b = proc.communicate(
                input=input_text.encode() if input_text is not None else None, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, proc)
            out_b, err_b = proc.communicate()
            output = _tail_of(log_path) if log_path else _decode(out_b) + _decode(err_b)
            raise CommandError(
                args, None, output, reason=f"timed out after {timeout_s:g} s"
            ) from None
        except BaseException:
            _kill_group(proc.pid, proc)
            raise
    finally:
        if log is not None:
            log.close()
    stdout = _tail_of(log_path) if log_path else _decode(out_b)
    stderr = "" if log_path else _decode(err_b)
    result = Result(args, proc.returncode, stdout, stderr, time.monotonic() - started)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, stdout + stderr)
    return result


AUTOGROUP = Path("/proc/self/autogroup")
# Sets the autogroup of the new session it runs in to the niceness in $0, then becomes argv.
_NICE_SESSION = 'echo "$0" > /proc/self/autogroup 2>/dev/null; exec "$@"'


def keeping_niceness(argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    """`argv` so that, started by `run` (in a session of its own), it keeps this process's
    niceness: on a kernel with autogroup scheduling every session is a group of its own,
    weighed by the group's niceness (0) whatever its processes' niceness. Unchanged at
    niceness 0 or without autogroups; a niceness the user may not set is left at 0."""
    nice = os.nice(0)
    if nice == 0 or not AUTOGROUP.exists():
        return [str(a) for a in argv]
    return ["sh", "-c", _NICE_SESSION, str(nice), *(str(a) for a in argv)]


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt, as Ctrl-C does: what `run` started (in a
    session of its own, out of reach of a signal to the caller's group) is ended with its
    process group, and the caller's cleanup runs, instead of the process dying at once."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside, Ctrl-C (or SIGINT by PID) and SIGTERM raise KeyboardInterrupt wherever the
    process was started: a shell starts a background job with SIGINT ignored, and Python
    then installs no handler for it. The handlers before are restored after."""
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with sigterm_as_interrupt():
            yield
    finally:
        signal.signal(signal.SIGINT, previous_int)


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    stdout_path: Path,
    stderr_path: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    user: User | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-lived process in its own process group, output to files."""
    out = open(stdout_path, "ab")  # noqa: SIM115
    err = open(stderr_path, "ab") if stderr_path else None  # noqa: SIM115
    try:
        return subprocess.Popen(
            [str(a) for a in argv],
            cwd=cwd,
            env=_env(env, user),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            start_new_session=True,
            **_user_kwargs(user),
        )
    finally:
        out.close()
        if err is not None:
            err.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive
    stat = read_pid_stat(pid)
    return stat is not None and stat.state != "Z"


# -- /proc/<pid>/stat: the one parser ---------------------------------------------------


@dataclass(frozen=True)
class PidStat:
    """The fields of /proc/<pid>/stat (proc(5)) blocklab reads; times in clock ticks."""

    pid: int
    comm: str  # field 2, without its parentheses
    state: str  # field 3: R, S, D, Z, X...
    ppid: int  # field 4
    utime_ticks: int  # field 14
    stime_ticks: int  # field 15
    cutime_ticks: int  # field 16: reaped (waited-for) children's user time
    cstime_ticks: int  # field 17
    start_ticks: int  # field 22: start time after boot
    processor: int | None  # field 39: the CPU last run on (None on kernels without it)

    @property
    def cpu_ticks(self) -> int:
        """Own and reaped children's CPU time: a sum over a process tree only grows."""
        return self.utime_ticks + self.stime_ticks + self.cutime_ticks + self.cstime_ticks


def parse_pid_stat(text: str) -> PidStat:
    """/proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (pure). The command name (field 2)
    may hold spaces and parentheses: it runs from the first "(" to the LAST ")", and the
    other fields are counted after it. ValueError on a line that is not one."""
    opening, closing = text.find("("), text.rfind(")")
    if opening < 0 or closing < opening:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    rest = text[closing + 1 :].split()
    if len(rest) < 20:
        raise ValueError(f"/proc/<pid>/stat: {len(rest) + 2} fields, want at least 22")

    def field(n: int) -> int:  # 1-based, as in proc(5); fields 3.. follow the ")"
        return int(rest[n - 3])

    return PidStat(
        pid=int(text[:opening]),
        comm=text[opening + 1 : closing],
        state=rest[0],
        ppid=field(4),
        utime_ticks=field(14),
        stime_ticks=field(15),
        cutime_ticks=field(16),
        cstime_ticks=field(17),
        start_ticks=field(22),
        processor=field(39) if len(rest) > 39 - 3 else None,
    )


def read_pid_stat(pid: int, tid: int | None = None) -> PidStat | None:
    """One process's (or one of its threads') stat; None once it has ended."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            return parse_pid_stat(f.read())
    except (OSError, ValueError):
        return None


def parse_schedstat(text: str) -> int:
    """/proc/<pid>/schedstat (pure): the task's time on a CPU in nanoseconds (its first
    field), exact where /proc/<pid>/stat's times are truncated to a clock tick. ValueError
    on a line that is not one."""
    return parse_schedstat_runs(text)[0]


def parse_schedstat_runs(text: str) -> tuple[int, int]:
    """/proc/<pid>/schedstat (pure): (time on a CPU in ns, times it was put on a CPU), its
    first and third fields; either grows only when the task ran. ValueError on a line that
    is not one."""
    fields = text.split()
    if len(fields) < 3:
        raise ValueError(f"not a /proc/<pid>/schedstat line: {text[:80]!r}")
    return int(fields[0]), int(fields[2])


def read_runtime_s(pid: int) -> float | None:
    """The CPU seconds of one task (a single-threaded process: a PostgreSQL backend), from
    /proc/<pid>/schedstat; None once it has ended or where the kernel has no such file.
    Of a process's main thread only: not for a process with threads."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return parse_schedstat(f.read()) / 1e9
    except (OSError, ValueError):
        return None


def scan_pid_stats() -> dict[int, PidStat]:
    """Every process in /proc (one that ends while the scan runs is left out). A pass over
    every entry: for the whole machine's account only; a process tree is walked with
    child_pids() / tree_pids()."""
    stats: dict[int, PidStat] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = read_pid_stat(int(entry.name))
            if stat is not None:
                stats[stat.pid] = stat
    return stats


def task_ids(pid: int, root: str | os.PathLike[str] = "/proc") -> list[int]:
    """The threads of `pid` (/proc/<pid>/task); [] once it has ended."""
    try:
        return sorted(int(t) for t in os.listdir(os.path.join(root, str(pid), "task")))
    except OSError:
        return []


ChildrenReader = Callable[[int, int], str | None]  # (pid, tid) -> the children file


def read_children(pid: int, tid: int) -> str | None:
    """/proc/<pid>/task/<tid>/children (the pids that thread forked); None once it ended."""
    try:
        fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 16).decode()
    except OSError:
        return None
    finally:
        os.close(fd)


def child_pids(
    pid: int, tids: Iterable[int] | None = None, read: ChildrenReader = read_children
) -> list[int]:
    """Direct children of `pid` (for a postmaster: its background processes and backends),
    from /proc/<pid>/task/*/children (a child belongs to the thread that forked it) of its
    threads `tids` (listed when not given), each read by `read`; a scan of /proc where the
    kernel has no such files (CONFIG_PROC_CHILDREN)."""
    if not _has_children_files():
        return sorted(s.pid for s in scan_pid_stats().values() if s.ppid == pid)
    found: set[int] = set()
    for tid in task_ids(pid) if tids is None else tids:
        text = read(pid, tid)
        if text is not None:  # None: the thread ended
            found.update(int(x) for x in text.split())
    return sorted(found)


def tree_tasks(
    pid: int,
    read: ChildrenReader = read_children,
    threads: Callable[[int], list[int]] = task_ids,
) -> dict[int, list[int]]:
    """`pid` and all its descendants, each with its threads ([] for one that ended while
    walked), by walking child_pids() (no scan of /proc): each process's threads from
    `threads` (its task/ listed once), each thread's children file read by `read` (a
    caller that looks often keeps the files open and lists task/ only when needed)."""
    out: dict[int, list[int]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out[p] = threads(p)
            todo.extend(child_pids(p, out[p], read))
    return out


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants, by walking child_pids() (no scan of /proc)."""
    return list(tree_tasks(pid))


@functools.cache
def _has_children_files() -> bool:
    """Whether the kernel has /proc/<pid>/task/<tid>/children (its configuration: asked once)."""
    pid = os.getpid()
    return os.path.exists(f"/proc/{pid}/task/{pid}/children")


def terminate(pid: int, *, sig: int = signal.SIGTERM, grace_s: float = 10.0) -> bool:
    """Send `sig` to one PID, wait up to `grace_s`, then SIGKILL. True if it is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    for _ in range(100):
        _reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


@dataclass(frozen=True)
class ProcessFacts:
    """What /proc says about a live process (read as root: nothing here is its own say,
    except that a process may chdir)."""

    uid: int  # real uid
    exe: str  # the binary it runs ("" when unreadable)
    cwd: str  # its working directory ("" when unreadable)
    start_ticks: int  # start time in clock ticks after boot (/proc/PID/stat field 22)


def process_facts(pid: int) -> ProcessFacts | None:
    """The facts of a live, non-zombie process, or None."""
    base = Path(f"/proc/{pid}")
    stat = read_pid_stat(pid)
    try:
        status = (base / "status").read_text()
    except OSError:
        return None
    if stat is None or stat.state in ("Z", "X"):
        return None
    uid = next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("Uid:"))
    return ProcessFacts(uid, _readlink(base / "exe"), _readlink(base / "cwd"), stat.start_ticks)


def process_uid(pid: int) -> int | None:
    """The real uid of a process, zombies included (None when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("Uid:")), None)


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """A process's start time (clock ticks after boot), to know it again later."""
    facts = process_facts(pid)
    return None if facts is None else facts.start_ticks


def postmaster_refusal(
    pid: int, data_dir: Path, *, started_ticks: int | None = None, exe: str = "postgres"
) -> str:
    """Why root must not signal `pid` as the postmaster of `data_dir` ("" when it may):
    the process must run the binary `exe` (a path; a bare name: any binary so named),
    work in that data directory (postgres
    chdirs there), run as the data directory's owner (never root), and, when its start
    time was recorded, have started then (a reused PID has not)."""
    facts = process_facts(pid)
    if facts is None:
        return f"PID {pid} is not running"
    try:
        owner = data_dir.stat().st_uid
        want_cwd = os.path.realpath(data_dir)
    except OSError as e:
        return f"{data_dir} is unreadable ({e.strerror})"
    running = facts.exe.removesuffix(" (deleted)")
    by_path = "/" in exe
    if (running if by_path else os.path.basename(running)) != (
        os.path.realpath(exe) if by_path else exe
    ):
        return f"PID {pid} runs {facts.exe or 'an unreadable binary'}, not {exe}"
    if facts.cwd != want_cwd:
        return f"PID {pid} works in {facts.cwd or '?'}, not in {want_cwd}"
    if facts.uid == 0 or facts.uid != owner:
        return f"PID {pid} runs as uid {facts.uid}, not as {data_dir}'s owner (uid {owner})"
    if started_ticks is not None and facts.start_ticks != started_ticks:
        return f"PID {pid} started at tick {facts.start_ticks}, not {started_ticks} (reused)"
    return ""


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def end_group(child: subprocess.Popen[bytes]) -> None:
    """End a spawned process and its whole process group: TERM, then KILL."""
    _kill_group(child.pid, child)


def _kill_group(pgid: int, proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _decode(b: bytes | None) -> str:
    return b.decode("utf-8", "replace") if b else ""


def _tail_of(path: Path | None, max_bytes: int = 64 * 1024) -> str:
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        return _decode(f.read())

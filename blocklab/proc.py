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

import os
import signal
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
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


def _env(
    env: Mapping[str, str] | None, user: User | None, unset: Collection[str] = ()
) -> dict[str, str]:
    hidden = {*unset, *SECRET_ENV}
    merged = {k: v for k, v in os.environ.items() if k not in hidden}
    merged["LC_ALL"] = "C"
    merged["LANG"] = "C"
    if user is not None:
        merged["HOME"] = user.home
        merged["USER"] = user.name
        merged["LOGNAME"] = user.name
    if env:
        merged.update(env)
    return merged


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
) -> Result:
    """Run a command to completion. With `log_path`, stdout and stderr go to that file
    (appended) instead of memory, and the returned output is the file's tail. Variables
    named in `unset` are removed from the inherited environment."""
    args = [str(a) for a in argv]
    started = time.monotonic()
    log = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=_env(env, user, unset),
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
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid` (for a postmaster: its background processes and backends)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


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
    try:
        fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
        status = (base / "status").read_text()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    uid = next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("Uid:"))
    return ProcessFacts(uid, _readlink(base / "exe"), _readlink(base / "cwd"), int(fields[19]))


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

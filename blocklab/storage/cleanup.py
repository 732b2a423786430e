"""Release what State records: servers, mounts, loop devices, cgroups, temp dirs.

A recorded directory is deleted only when blocklab made it and it is still that
directory (blocklab.storage.made_dirs); otherwise it is left alone and reported.

Newest first, so a server is stopped before the mount under it and a mount is undone
before its loop device. A server's PID is signalled only while /proc/PID shows a postgres
started on the recorded data directory, working there, run by its owner and (when
recorded) started at the recorded time: PIDs get reused, and postmaster.pid is written by
the server's user, so root does not take its word.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from blocklab import proc
from blocklab.errors import BlocklabError, StorageError
from blocklab.state import Entry, State
from blocklab.storage import cgroup, loopfs, made_dirs

SERVER_GRACE_S = 30.0
POSTGRES_NAMES = ("postgres", "postmaster")


@dataclass
class CleanupReport:
    released: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # owned by a live process
    left_alone: list[str] = field(default_factory=list)  # recorded, but not blocklab's

    def lines(self) -> list[str]:
        """What was released and what was left alone, one line each (for a log)."""
        return [f"released {x}" for x in self.released] + [
            f"left alone {x}" for x in self.left_alone
        ]


def release_all(state: State, *, only_dead_owners: bool = True) -> list[str]:
    """Release recorded resources; return what was released. Failures stay in State."""
    return release_report(state, only_dead_owners=only_dead_owners).released


def release_report(state: State, *, only_dead_owners: bool = True) -> CleanupReport:
    report = CleanupReport()
    for entry in sorted(state.entries(), key=lambda e: e.created_at, reverse=True):
        if only_dead_owners and proc.pid_alive(entry.owner_pid):
            report.skipped.append(f"{entry.kind} {entry.ident} (owner PID {entry.owner_pid} alive)")
            continue
        try:
            what = RELEASERS[entry.kind](entry, state)
        except made_dirs.LeftAlone as e:
            report.left_alone.append(str(e))
            continue
        except (BlocklabError, OSError, KeyError) as e:
            report.failed.append(f"{entry.kind} {entry.ident}: {e}")
            continue
        report.released.append(what)
    return report


def _release_server(entry: Entry, state: State) -> str:
    data_dir = str(entry.info.get("data_dir") or entry.ident)
    pid = int(entry.info.get("pid") or _postmaster_pid(Path(data_dir)) or 0)
    what = f"server on {data_dir}"
    alive = pid > 0 and proc.pid_alive(pid)
    why = _refusal(pid, data_dir, entry.info.get("pid_ticks")) if alive else ""
    if why:
        what += f" (PID {pid} not signalled: {why})"
    elif alive:
        children = proc.child_pids(pid)
        if not proc.terminate(pid, sig=signal.SIGINT, grace_s=SERVER_GRACE_S):
            raise StorageError(f"PID {pid} (postgres on {data_dir}) did not exit")
        for child in children:
            if _is_postgres_process(child):
                proc.terminate(child, grace_s=5.0)
        what = f"server PID {pid} on {data_dir} (stopped)"
    state.remove("server", entry.ident)
    return what


def _refusal(pid: int, data_dir: str, started_ticks: object) -> str:
    """Why `pid` is not the recorded server's postmaster ("" when it is): /proc must show
    a postgres started with -D data_dir, working there, run by the data directory's owner
    (never root) and, when recorded, started at that time (blocklab.proc)."""
    if not is_postgres_on(pid, data_dir):
        return f"PID {pid} is not a postgres started with -D {data_dir}"
    ticks = started_ticks if isinstance(started_ticks, int) else None
    return proc.postmaster_refusal(pid, Path(data_dir), started_ticks=ticks)


def _release_mount(entry: Entry, state: State) -> str:
    unmounted = loopfs.umount(Path(entry.ident), state)
    return f"mount {entry.ident}" + (" (unmounted)" if unmounted else " (was not mounted)")


def _release_loop(entry: Entry, state: State) -> str:
    detached = loopfs.detach_and_delete(Path(entry.ident), state)
    return f"loop image {entry.ident}" + (f" ({', '.join(detached)} detached)" if detached else "")


def _release_cgroup(entry: Entry, state: State) -> str:
    cgroup.remove_cgroup(Path(entry.ident), str(entry.info.get("version", "v1")))
    state.remove("cgroup", entry.ident)
    return f"cgroup {entry.ident}"


def _release_tempdir(entry: Entry, state: State) -> str:
    return made_dirs.remove_dir(Path(entry.ident), entry.info, state)


RELEASERS: dict[str, Callable[[Entry, State], str]] = {
    "server": _release_server,
    "mount": _release_mount,
    "loop": _release_loop,
    "cgroup": _release_cgroup,
    "tempdir": _release_tempdir,
}


def parse_cmdline(raw: bytes) -> list[str]:
    """/proc/PID/cmdline (NUL-separated) as a list (pure)."""
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def cmdline_runs_on(argv: list[str], data_dir: str) -> bool:
    """True if argv is a postgres/postmaster started with -D data_dir (pure)."""
    if not argv or os.path.basename(argv[0]) not in POSTGRES_NAMES:
        return False
    wanted = os.path.normpath(data_dir)
    for i, arg in enumerate(argv):
        if arg == "-D" and i + 1 < len(argv) and os.path.normpath(argv[i + 1]) == wanted:
            return True
        if arg.startswith("-D") and os.path.normpath(arg[2:]) == wanted:
            return True
    return False


def is_postgres_on(pid: int, data_dir: str) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return cmdline_runs_on(parse_cmdline(raw), data_dir)


def _is_postgres_process(pid: int) -> bool:
    """A postmaster's child shows 'postgres: ...' as its title."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return raw.startswith(b"postgres:") or raw.split(b"\0")[0].endswith(b"/postgres")


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None

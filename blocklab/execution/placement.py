"""CPU placement of the driver (pgbench) and the server (the postmaster and its children).

- `machine_cpus()`: the CPUs this process may use and the kernel has online.
- `decide()`: the driver on its own CPU where the machine allows (the last CPU for the
  driver, the rest for the server); on one CPU there is no placement, and the decision
  says why.
- `validate()`: a requested placement whose CPUs the machine does not have is a
  UserError, raised before anything starts.
- `driver_prefix()`: the driver is started under `taskset -c`, so pgbench and every
  thread it makes inherit the CPU list from their first instruction.
- `apply_to_tree()`: the server is placed by PID after it started: the postmaster, its
  children and all their threads (backends it forks later inherit the list). A PID the
  kernel refuses is returned as a failed `Applied`, never dropped.
- `CpuLog`: what the kernel says each process may use (Cpus_allowed_list in
  /proc/PID/status) and the CPU each of its threads last ran on (field 39 of
  /proc/PID/stat) when it ran since the look before (its /proc/PID/schedstat changed);
  sampling that during a run gives the CPUs each process actually ran on.

Parsing (`parse_cpu_list`, `parse_allowed_list`, `parse_last_cpu`, blocklab.proc's
parsers of stat and schedstat) is pure; CpuLog's I/O is open, pread and close.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from blocklab import proc
from blocklab.errors import UserError

ONLINE = Path("/sys/devices/system/cpu/online")
PROC = Path("/proc")


# -- pure parsing ---------------------------------------------------------------------


def parse_cpu_list(text: str, *, key: str = "cpus") -> list[int]:
    """A kernel CPU list ("0-3,8,10-11") as sorted CPU numbers; UserError naming `key`."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            raise UserError(
                f"{key}: {text!r} is not a CPU list; write e.g. '1' or '0-2,4'"
            ) from None
        if first < 0 or last < first:
            raise UserError(f"{key}: bad CPU range {part!r} in {text!r}")
        cpus.update(range(first, last + 1))
    if not cpus:
        raise UserError(f"{key}: empty CPU list; write e.g. '1' or '0-2,4'")
    return sorted(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """Sorted CPU numbers as a compact kernel CPU list: [0, 1, 2, 5] -> "0-2,5"."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(c)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def parse_allowed_list(status_text: str) -> list[int]:
    """Cpus_allowed_list from the text of /proc/PID/status."""
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1], key="Cpus_allowed_list")
    raise ValueError("no Cpus_allowed_list line in /proc/PID/status")


def parse_context_switches(status_text: str) -> int:
    """voluntary + nonvoluntary context switches from /proc/PID/status: it grows each time
    the thread ran and was switched out."""
    total = 0
    for line in status_text.splitlines():
        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
            total += int(line.split(":", 1)[1])
    return total


def parse_last_cpu(stat_text: str) -> int:
    """Field 39 of /proc/PID/stat (the CPU last run on), by blocklab.proc.parse_pid_stat."""
    return last_cpu(proc.parse_pid_stat(stat_text))


def last_cpu(stat: proc.PidStat) -> int:
    """Field 39 of a parsed /proc/PID/stat; ValueError on a kernel without it."""
    if stat.processor is None:
        raise ValueError("/proc/PID/stat has no field 39 (processor)")
    return stat.processor


# -- the decision ---------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    driver_cpus: tuple[int, ...]
    server_cpus: tuple[int, ...]

    def to_json(self) -> dict[str, str]:
        return {
            "driver_cpus": format_cpu_list(self.driver_cpus),
            "server_cpus": format_cpu_list(self.server_cpus),
        }


@dataclass(frozen=True)
class Decision:
    placement: Placement | None  # None: the machine does not allow one
    reason: str


def decide(cpus: Sequence[int]) -> Decision:
    """The driver on the last CPU, the server on the others (2 CPUs: driver 1, server 0).
    With fewer than 2 CPUs the driver cannot have one of its own."""
    available = sorted(set(cpus))
    if len(available) < 2:
        return Decision(
            None,
            f"{len(available)} CPU ({format_cpu_list(available)}): the driver cannot have "
            "a CPU of its own; driver and server share it",
        )
    driver, server = available[-1:], available[:-1]
    return Decision(
        Placement(tuple(driver), tuple(server)),
        f"driver on CPU {format_cpu_list(driver)}, server on CPU {format_cpu_list(server)}",
    )


def validate(placement: Placement, available: Sequence[int], *, key: str = "placement") -> None:
    """UserError when a CPU list names CPUs the machine does not have, or is empty."""
    have = format_cpu_list(available)
    for name, cpus in (
        ("driver_cpus", placement.driver_cpus),
        ("server_cpus", placement.server_cpus),
    ):
        if not cpus:
            raise UserError(f"{key}.{name}: empty CPU list; allowed CPUs: {have}")
        missing = sorted(set(cpus) - set(available))
        if missing:
            raise UserError(
                f"{key}.{name}: CPU {format_cpu_list(missing)} is not on this machine "
                f"(or not allowed to blocklab); allowed CPUs: {have}"
            )


def from_lists(driver: str, server: str, available: Sequence[int]) -> Placement:
    """A placement from two CPU-list strings (an experiment file's keys), validated."""
    placement = Placement(
        tuple(parse_cpu_list(driver, key="placement.driver_cpus")),
        tuple(parse_cpu_list(server, key="placement.server_cpus")),
    )
    validate(placement, available)
    return placement


# -- the machine ----------------------------------------------------------------------


def machine_cpus() -> list[int]:
    """CPUs this process may run on that the kernel has online."""
    allowed = set(os.sched_getaffinity(0))
    try:
        online = set(parse_cpu_list(ONLINE.read_text(), key=str(ONLINE)))
    except OSError:
        online = allowed
    return sorted(allowed & online)


def driver_prefix(cpus: Sequence[int]) -> list[str]:
    """The command prefix that starts the driver (and all its threads) on `cpus`."""
    return ["taskset", "--cpu-list", format_cpu_list(cpus)]


@dataclass(frozen=True)
class Applied:
    """The outcome of placing one thread: ok, or the kernel's reason."""

    pid: int  # the process
    tid: int  # the thread (== pid for the main thread)
    cpus: tuple[int, ...]
    ok: bool
    error: str = ""
    ended: bool = False  # the thread exited before it could be placed: nothing runs there


def threads_of(pid: int) -> list[int]:
    return proc.task_ids(pid) or [pid]


def apply_to_tree(pid: int, cpus: Sequence[int]) -> list[Applied]:
    """Set the CPU affinity of `pid`, its children and all their threads. Failures
    are in the list (ok=False, with the error); a thread that ended meanwhile is marked
    `ended` (it runs nowhere, so it is no failure)."""
    out = []
    for p in [pid, *proc.child_pids(pid)]:
        for tid in threads_of(p):
            try:
                os.sched_setaffinity(tid, cpus)
                out.append(Applied(p, tid, tuple(cpus), True))
            except ProcessLookupError:
                out.append(Applied(p, tid, tuple(cpus), False, "ended", ended=True))
            except OSError as e:
                out.append(Applied(p, tid, tuple(cpus), False, f"{type(e).__name__}: {e}"))
    return out


def failures(applied: Sequence[Applied]) -> list[str]:
    """One line per thread that could not be placed (empty when all were)."""
    return [f"pid {a.pid} tid {a.tid}: {a.error}" for a in applied if not a.ok and not a.ended]


# -- what happened --------------------------------------------------------------------

KEPT_OPEN = ("stat", "schedstat", "children")  # a thread's files read at every look
READ_MAX = 1 << 16  # more than a stat, schedstat or status file holds (children: 9,000 pids)


def fd_budget() -> int:
    """How many files the log may keep open: a quarter of this process's limit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4


@dataclass
class _Task:
    """A thread the log follows: its files kept open (`fds`; none beyond the budget: read
    by path then), what they said at the last look."""

    pid: int
    tid: int
    fds: dict[str, int]
    runs: tuple[int, ...] = ()  # (ns on a CPU, times put on one), or (context switches,)
    allowed: tuple[int, ...] = ()


@dataclass
class CpuLog:
    """The CPUs each process ran on, over repeated `sample()` calls.

    Field 39 of stat is the CPU a thread *last* ran on: for a thread asleep since before
    the placement it is stale. So a CPU is logged only when the thread ran since the
    previous look: its schedstat (time on a CPU, times put on one) changed, or, on a kernel
    without schedstat, its context switches in status grew; the first look at a thread is
    the baseline, and stat is read only when it ran. A process whose main thread's name
    changes has exec()ed (taskset into the driver): it is logged under the new name, and
    only the CPUs the new program ran on count (taskset ran where it was started, before it
    placed itself). Cpus_allowed_list (status, a large file) is read when a thread is first
    seen, after an exec, when the thread ran on a CPU outside it, and at `close()`. stat,
    schedstat and children (for the walk of the trees: `children()`) stay open and are
    re-read with pread (procfs makes them anew at offset 0) until the thread is gone from
    a look; `close()` closes what is still open."""

    seen: dict[int, set[int]] = field(default_factory=dict)
    allowed: dict[int, tuple[int, ...]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    root: Path = PROC
    max_fds: int = field(default_factory=fd_budget)
    _tasks: dict[int, _Task] = field(default_factory=dict)  # tid -> what it said last
    _listed: dict[int, list[int]] = field(default_factory=dict)  # pid -> its threads
    _relist: set[int] = field(default_factory=set)  # pids whose task/ to list again

    def sample(
        self,
        tree: Iterable[int] | Mapping[int, Sequence[int]],
        walked_only: Collection[int] = (),
    ) -> None:
        """One look at the processes `tree` names (pid -> its threads, from
        blocklab.proc.tree_tasks; a bare list of pids has its threads listed here), but for
        those in `walked_only` (their children files are kept open for the walk, no more)."""
        tasks = tree if isinstance(tree, Mapping) else {p: self.threads(p) for p in tree}
        listed: set[int] = set()
        for pid, tids in tasks.items():
            listed.update(tids)
            for tid in () if pid in walked_only else tids:
                self._look(pid, tid)
        for tid in self._tasks.keys() - listed:  # ended, or gone from the trees
            self._forget(tid)
        for pid in self._listed.keys() - tasks.keys():
            del self._listed[pid]
        self._relist.intersection_update(tasks.keys())  # (pgbench -C: a backend a second)
        self._relist.update(walked_only)  # not looked at: whether they ran is not known

    def threads(self, pid: int) -> list[int]:
        """A process's threads, for blocklab.proc.tree_tasks: its task/ is listed again
        only when one of its threads ran or ended since the last listing (a new thread is
        made by one that runs: it is found at most two looks later), or it is new."""
        if pid in self._relist or pid not in self._listed:
            self._relist.discard(pid)
            self._listed[pid] = proc.task_ids(pid, self.root)
        return self._listed[pid]

    def children(self, pid: int, tid: int) -> str | None:
        """The thread's children file (a blocklab.proc.ChildrenReader), from the open file."""
        return self._read(self._task(pid, tid), "children")

    def close(self) -> None:
        """The allowed CPUs of the threads still there, read once more; files closed."""
        for task in list(self._tasks.values()):
            self._read_allowed(task)
            self._forget(task.tid)

    def _look(self, pid: int, tid: int) -> None:
        task = self._task(pid, tid)
        before, runs = task.runs, self._runs(task)
        if runs == before:
            return  # it did not run: its last CPU is old news, stat is not read
        stat = None if runs is None else self._read(task, "stat")
        if runs is None or stat is None:
            self._forget(tid)  # it ended
            return
        task.runs = runs
        now = proc.parse_pid_stat(stat)
        if before:
            self._relist.add(pid)  # it may have made a thread
            self._ran(task, now)
        elif not task.allowed and self._read_allowed(task) is None:  # the first look
            self._forget(tid)  # (the baseline; without schedstat status was just read)
        elif tid == pid or pid not in self.names:
            self.names[pid] = now.comm

    def _ran(self, task: _Task, now: proc.PidStat) -> None:
        pid = task.pid
        if task.tid == pid and self.names.get(pid, now.comm) != now.comm:  # exec()ed
            self.seen.pop(pid, None)  # the new program's first look is its baseline
            self.names[pid] = now.comm
            self._read_allowed(task)
            return
        cpu = last_cpu(now)
        if cpu not in task.allowed:  # placed anew since it was first seen: read it again
            self._read_allowed(task)
        self.seen.setdefault(pid, set()).add(cpu)

    def _runs(self, task: _Task) -> tuple[int, ...] | None:
        """What grows when the thread runs: schedstat, else status's context switches."""
        text = self._read(task, "schedstat")
        if text is not None:
            return proc.parse_schedstat_runs(text)
        status = self._read_allowed(task)  # no schedstat on this kernel (or it ended)
        return None if status is None else (parse_context_switches(status),)

    def _read_allowed(self, task: _Task) -> str | None:
        """Cpus_allowed_list of the thread, for it and its process; status's text."""
        status = self._read(task, "status")
        if status is not None:
            task.allowed = tuple(parse_allowed_list(status))
            self.allowed[task.pid] = task.allowed
        return status

    # -- the only I/O: open, pread, close --

    def _task(self, pid: int, tid: int) -> _Task:
        """The thread, its files opened when it is new to the log (or its id was reused)."""
        task = self._tasks.get(tid)
        if task is not None and task.pid == pid:
            return task
        self._forget(tid)
        task = self._tasks[tid] = _Task(pid, tid, {})
        if sum(len(t.fds) for t in self._tasks.values()) + len(KEPT_OPEN) > self.max_fds:
            return task  # over the budget: its files are opened at each read
        for name in KEPT_OPEN:
            try:
                task.fds[name] = os.open(self._path(task, name), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # ended, or no such file on this kernel
        return task

    def _read(self, task: _Task, name: str) -> str | None:
        """A file of the thread from offset 0; None once it has ended (or has no such file)."""
        try:
            fd = task.fds.get(name)
            if fd is not None:
                return os.pread(fd, READ_MAX, 0).decode(errors="replace") or None
            if task.fds and name in KEPT_OPEN:
                return None  # it could not be opened when the thread was first seen
            with open(self._path(task, name), "rb") as f:
                return f.read(READ_MAX).decode(errors="replace") or None
        except OSError:
            return None

    def _path(self, task: _Task, name: str) -> Path:
        return self.root / str(task.pid) / "task" / str(task.tid) / name

    def _forget(self, tid: int) -> None:
        task = self._tasks.pop(tid, None)
        if task is not None:
            self._relist.add(task.pid)
            for fd in task.fds.values():
                os.close(fd)

    def to_json(self) -> list[dict[str, object]]:
        return [
            {
                "pid": pid,
                "name": self.names.get(pid, ""),
                "allowed_cpus": format_cpu_list(self.allowed.get(pid, ())),
                "ran_on_cpus": format_cpu_list(cpus),
            }
            for pid, cpus in sorted(self.seen.items())
        ]

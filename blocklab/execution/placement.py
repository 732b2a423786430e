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
- `observe()`: what the kernel says each process may use (Cpus_allowed_list in
  /proc/PID/status) and the CPU it last ran on (field 39 of /proc/PID/stat); sampling
  that during a run gives the CPUs each process actually ran on.

Parsing (`parse_cpu_list`, `parse_allowed_list`, `parse_last_cpu`) is pure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
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
    last = proc.parse_pid_stat(stat_text).processor
    if last is None:
        raise ValueError("/proc/PID/stat has no field 39 (processor)")
    return last


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
    try:
        return sorted(int(t.name) for t in (PROC / str(pid) / "task").iterdir())
    except OSError:
        return [pid]


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


@dataclass(frozen=True)
class Observed:
    pid: int
    name: str
    allowed: tuple[int, ...]  # Cpus_allowed_list
    last_cpu: int  # field 39 of /proc/PID/stat
    switches: int  # context switches so far: a change means it ran since the last look


def observe(pid: int, tid: int | None = None) -> Observed | None:
    """A process's (or one of its threads') allowed CPUs and the CPU it last ran on, from
    /proc/PID/task/TID; None once it has ended."""
    base = PROC / str(pid) / "task" / str(pid if tid is None else tid)
    try:
        status = (base / "status").read_text()
        stat = proc.parse_pid_stat((base / "stat").read_text())
    except OSError:
        return None
    if stat.processor is None:
        raise ValueError("/proc/PID/stat has no field 39 (processor)")
    allowed = tuple(parse_allowed_list(status))
    return Observed(pid, stat.comm, allowed, stat.processor, parse_context_switches(status))


@dataclass
class CpuLog:
    """The CPUs each process ran on, over repeated `sample()` calls.

    Field 39 is the CPU a thread *last* ran on: for a thread asleep since before the
    placement it is stale. So a CPU is logged only when the thread's context switches grew
    since the previous sample, i.e. it ran (and left the CPU) in between; the first sample
    of a thread is the baseline. A process whose name changes has exec()ed (taskset into
    the driver): it is logged under the new name, and only the CPUs the new program ran
    on count (taskset ran where it was started, before it placed itself)."""

    seen: dict[int, set[int]] = field(default_factory=dict)
    allowed: dict[int, tuple[int, ...]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    _switches: dict[int, int] = field(default_factory=dict)  # tid -> at the last sample

    def sample(self, pids: Iterable[int]) -> None:
        for pid in pids:
            for tid in threads_of(pid):
                o = observe(pid, tid)
                if o is None:
                    continue
                before = self._switches.get(tid)
                self._switches[tid] = o.switches
                self.allowed[pid] = o.allowed
                if tid == pid and self.names.get(pid, o.name) != o.name:  # exec()ed
                    self.seen.pop(pid, None)
                    before = None  # the new program's first sample is its baseline
                if tid == pid or pid not in self.names:
                    self.names[pid] = o.name
                if before is not None and o.switches > before:
                    self.seen.setdefault(pid, set()).add(o.last_cpu)

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

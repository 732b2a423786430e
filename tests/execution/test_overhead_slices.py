"""`blocklab selftest overhead --design slices` (blocklab.execution.overhead_slices): the
switching thread follows pgbench's progress lines (a stand-in writer here), the CLI's
bad input exits 2 before anything starts, and the per-probe table's lines."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from blocklab.analysis.slices import probe_cpu_shares, probe_ratios, schedule
from blocklab.cli import main
from blocklab.execution import overhead_slices as os_
from blocklab.execution.overhead_slices import SliceResult


class _Recorder:
    def __init__(self, name: str, events: list[tuple[int, str, str]], clock: list[int]):
        self.name, self.events, self.clock = name, events, clock

    def on(self) -> None:
        self.events.append((self.clock[0], self.name, "on"))

    def off(self) -> None:
        self.events.append((self.clock[0], self.name, "off"))


def test_the_probes_are_switched_at_the_slices_bounds(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A writer prints one progress line at a time: each switch must happen at the
    second the plan says (the lead-in, then `slice_s` seconds per slice), each probe on
    exactly while its slices are on, and the CPU read at each bound between the two. The
    writer waits for the follower to have looked at the file after each line (two calls
    of `running`, which it makes once a look), so a busy machine cannot make it lag."""
    monkeypatch.setattr(os_, "POLL_S", 0.002)
    plan = schedule(["sampler", "cpu_log"], 2)
    slice_s, path = 2, tmp_path / "pgbench.err"
    total = os_.LEAD_IN_S + len(plan) * slice_s
    clock, events, done, looks = [0], [], threading.Event(), [0]
    switches = {p: _Recorder(p, events, clock) for p in ("sampler", "cpu_log")}

    def running() -> int | None:
        looks[0] += 1
        return 0 if done.is_set() else None

    def write() -> None:
        with open(path, "w") as f:
            for k in range(1, total + 1):
                clock[0] = k
                f.write(f"progress: {k}.0 s, 4000.0 tps, lat 0.5 ms stddev 0.1, 0 failed\n")
                f.flush()
                seen, began = looks[0], time.monotonic()
                while looks[0] < seen + 2 and time.monotonic() - began < 30:
                    time.sleep(0.001)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    delay = os_._switch_along(
        running,
        path,
        plan,
        switches,  # type: ignore[arg-type]
        slice_s,
        at_bound=lambda k: events.append((clock[0], "bound", str(k))),
    )
    writer.join()
    want: list[tuple[int, str, str]] = []
    state = None
    for i, s in enumerate(plan):
        at = os_.LEAD_IN_S + i * slice_s
        wanted = s.probe if s.on else None
        # at each bound: the probe before off, the CPU read, the next probe on
        want += [(at, state, "off")] if state and wanted != state else []
        want += [(at, "bound", str(i))]
        want += [(at, wanted, "on")] if wanted and wanted != state else []
        state = wanted
    want += [(total, state, "off")] if state else []  # the plan's end: all off
    want += [(total, "bound", str(len(plan)))]
    assert events == want
    assert 0.0 <= delay < 1.0


def test_bad_flags_exit_2_before_anything_starts() -> None:
    assert main(["selftest", "overhead", "--probe", "nope"]) == 2
    assert main(["selftest", "overhead", "--blocks", "1"]) == 2
    assert main(["selftest", "overhead", "--design", "abab"]) == 2
    assert main(["selftest", "overhead", "--slice", "0"]) == 2


def test_the_per_probe_table() -> None:
    from blocklab.commands.selftest import slice_lines

    plan = schedule(["sampler", "cpu_log"], 3)
    noise = np.random.default_rng(3).normal(0.0, 4.0, len(plan))
    tps = [
        4000.0 + i + noise[i] - (80.0 if s.on and s.probe == "sampler" else 0.0)
        for i, s in enumerate(plan)
    ]
    probe_s = [0.01 + (0.09 if s.on and s.probe == "sampler" else 0.0) for s in plan]
    probe_s = [x + 0.0001 * noise[i] for i, x in enumerate(probe_s)]  # 1.5 % of 6 s
    res = SliceResult(plan, list(tps), probe_ratios(plan, list(tps)), {"pg_stat_io": 0.002})
    res.shares = probe_cpu_shares(plan, list(probe_s), [6.0] * len(plan))
    lines = slice_lines(res)
    assert lines[0].split()[:2] == ["probe", "tps"]
    assert lines[1].startswith("cpu_log") and lines[4].startswith("sampler")
    assert abs(float(lines[4].split()[1]) - 0.98) < 0.005 and lines[4].split()[-1] == "3"
    assert "target missed" in lines[5]
    share = lines[6].split()
    assert share[:2] == ["CPU", "share"] and abs(float(share[2]) - 1.5) < 0.05
    assert share[3:7] == ["%", "(95", "%", "CI"] and share[8] == "to"
    assert float(share[7]) < 1.5 < float(share[9].rstrip("),"))
    assert "0.0894 cpu_s per slice, 3 blocks" in lines[6] and "target missed" in lines[6]
    assert "target met" in lines[3]  # cpu_log: a share of about 0 %
    assert lines[-2] == "outside the window (once per run, no tps cost): pg_stat_io 0.002 s"


def test_both_switches_the_sampler_and_the_cpu_log_as_one() -> None:
    """`both` is the real two switched together (on in order, off in reverse), so the
    whole set's cost is measured as a run with a placement has it; the CLI offers each."""
    from blocklab.commands.selftest import overhead

    switches = os_.switches_for(object(), 123)  # type: ignore[arg-type]  # nothing started
    both = switches[os_.BOTH]
    assert isinstance(both, os_._Together)
    assert both.parts == (switches["sampler"], switches["cpu_log"])
    events: list[tuple[int, str, str]] = []
    both.parts = (_Recorder("sampler", events, [0]), _Recorder("cpu_log", events, [0]))
    both.on()
    both.off()
    assert [e[1:] for e in events] == [
        ("sampler", "on"), ("cpu_log", "on"), ("cpu_log", "off"), ("sampler", "off")
    ]  # fmt: skip
    probe = next(p for p in overhead.params if p.name == "probes")
    assert list(probe.type.choices) == [*os_.PROBES, os_.BOTH]  # type: ignore[attr-defined]
    assert set(switches) == {*os_.PROBES, os_.BOTH}

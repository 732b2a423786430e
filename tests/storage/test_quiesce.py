"""Quiesce (blocklab.storage.quiesce): /proc/meminfo and inflight parsing, and the bounded
wait with an injected reader and clock."""

from __future__ import annotations

import pytest

from blocklab.storage import quiesce
from blocklab.storage.quiesce import Sample

MEMINFO = """MemTotal:        4015124 kB
MemFree:          177860 kB
Dirty:              9196 kB
Writeback:           128 kB
AnonPages:        811340 kB
WritebackTmp:         64 kB
"""


def test_dirty_plus_writeback_in_bytes() -> None:
    assert quiesce.parse_meminfo_dirty_bytes(MEMINFO) == (9196 + 128) * 1024


def test_meminfo_without_the_lines_is_an_error() -> None:
    with pytest.raises(ValueError, match="no Dirty, Writeback"):
        quiesce.parse_meminfo_dirty_bytes("MemTotal: 1 kB\n")
    with pytest.raises(ValueError, match="unreadable"):
        quiesce.parse_meminfo_dirty_bytes("Dirty: lots\nWriteback: 0 kB\n")


def test_inflight() -> None:
    assert quiesce.parse_inflight("       0        0\n") == 0
    assert quiesce.parse_inflight("       2       17\n") == 19
    with pytest.raises(ValueError, match="two counts"):
        quiesce.parse_inflight("3\n")


def test_the_running_machine_reads(tmp_path: object) -> None:
    got = quiesce.read_sample([])
    assert got.dirty_bytes >= 0 and got.inflight_ios == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _reader(samples: list[Sample]):  # type: ignore[no-untyped-def]
    it = iter(samples)
    last: list[Sample] = []

    def read() -> Sample:
        last[:] = [next(it, last[0] if last else samples[-1])]
        return last[0]

    return read


MIB = 1024 * 1024


def test_waits_until_dirty_and_inflight_drain() -> None:
    clock = FakeClock()
    samples = [Sample(200 * MIB, 4), Sample(40 * MIB, 1), Sample(10 * MIB, 2), Sample(9 * MIB, 0)]
    got = quiesce.wait(_reader(samples), 30, clock=clock, sleep=clock.sleep, poll_s=0.25)
    assert got.drained and got.wait_s == 0.75 and got.dirty_bytes == 9 * MIB
    assert got.metrics() == {"quiesce_wait_s": 0.75, "quiesce_dirty_bytes": 9 * MIB}


def test_gives_up_at_the_bound_and_says_what_was_dirty() -> None:
    clock = FakeClock()
    got = quiesce.wait(_reader([Sample(100 * MIB, 3)]), 2, clock=clock, sleep=clock.sleep)
    assert not got.drained and got.wait_s == 2.0
    assert got.dirty_bytes == 100 * MIB and got.inflight_ios == 3
    assert got.to_json()["threshold_bytes"] == 16 * MIB


def test_a_quiet_machine_does_not_wait() -> None:
    clock = FakeClock()
    got = quiesce.wait(_reader([Sample(MIB, 0)]), 30, clock=clock, sleep=clock.sleep)
    assert got.drained and got.wait_s == 0.0


def test_zero_bound_looks_once() -> None:
    clock = FakeClock()
    got = quiesce.wait(_reader([Sample(100 * MIB, 0)]), 0, clock=clock, sleep=clock.sleep)
    assert not got.drained and got.wait_s == 0.0

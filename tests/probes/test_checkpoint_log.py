"""The checkpoint log parser on recorded real server logs (tests/data/logs).

pg15.log: Debian's PostgreSQL 15.20; pg18.log: a blocklab PG 18.6 build (8 kB pages).
Both servers ran with log_line_prefix '%n [%p] ', log_checkpoints=on, lc_messages=C,
max_wal_size=32MB, checkpoint_timeout=30s: pgbench -i -s 2, 40 s of pgbench (WAL-
triggered checkpoints), CHECKPOINT, a clean stop/start (shutdown checkpoint), a crash
(SIGKILL; on 18 it hit a running checkpoint) and recovery (end-of-recovery checkpoint),
then a clean stop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.probes.checkpoints import counts, parse_log, timeline, trigger_of

LOGS = Path(__file__).parents[1] / "data" / "logs"


def load(name: str) -> str:
    return (LOGS / name).read_text()


@pytest.mark.parametrize("name", ["pg15.log", "pg18.log"])
def test_every_logged_checkpoint_is_parsed(name: str) -> None:
    text = load(name)
    cps = parse_log(text)
    starts = sum(1 for line in text.splitlines() if "LOG:  checkpoint starting:" in line)
    completes = sum(1 for line in text.splitlines() if "LOG:  checkpoint complete:" in line)
    assert len(cps) == starts == 16
    assert sum(1 for c in cps if c.end_epoch is not None) == completes
    triggers = [c.trigger for c in cps]
    assert {"wal", "immediate", "shutdown", "end-of-recovery"} <= set(triggers)
    assert triggers[-2:] == ["end-of-recovery", "shutdown"]
    for c in cps:
        assert c.kind == "checkpoint" and c.start_epoch is not None
        if c.end_epoch is not None:
            assert c.end_epoch >= c.start_epoch
            assert c.buffers_written is not None and c.wal_distance_bytes is not None
            assert c.wal_distance_bytes % 1024 == 0
            # "total" starts a little before the "starting" line is logged (tens of ms)
            assert c.total_s is not None and c.total_s <= c.end_epoch - c.start_epoch + 0.1


def test_pg15_message_details() -> None:
    first = parse_log(load("pg15.log"))[0]
    assert first.flags == ("wal",)
    # "... distance=<N> kB, estimate=<M> kB" with kB = 1024 bytes; PG 15 has no lsn= part
    assert first.lsn is None and first.slru_buffers_written is None
    line = next(x for x in load("pg15.log").splitlines() if "checkpoint complete" in x)
    kb = int(line.split("distance=")[1].split(" kB")[0])
    assert first.wal_distance_bytes == kb * 1024
    assert first.buffers_written == int(line.split("wrote ")[1].split(" buffers")[0])
    assert first.wal_files_recycled is not None


def test_pg18_message_details() -> None:
    cps = parse_log(load("pg18.log"))
    first = cps[0]
    assert first.slru_buffers_written is not None  # "wrote N SLRU buffers" (18)
    assert first.lsn is not None and first.redo_lsn is not None  # "lsn=..., redo lsn=..." (17+)
    crashed = [c for c in cps if c.end_epoch is None]
    assert len(crashed) == 1 and crashed[0].trigger == "wal"  # killed mid-checkpoint


@pytest.mark.parametrize("block_size", [4096, 8192, 32768])
def test_timeline_window_bytes_and_incomplete(block_size: int) -> None:
    cps = parse_log(load("pg18.log"))
    third = cps[2]
    assert third.start_epoch is not None and third.end_epoch is not None
    begin = third.start_epoch + 0.5  # the run starts while the third checkpoint runs
    end = cps[5].start_epoch + 0.1 if cps[5].start_epoch else 0.0  # ends during the sixth
    tl = timeline(cps, begin, end, block_size)
    assert [round(c["start_s"], 3) for c in tl][0] == -0.5
    assert len(tl) == 4  # third (started before), fourth, fifth, sixth (still running)
    assert [c["incomplete"] for c in tl] == [False, False, False, True]
    assert tl[-1]["end_s"] is None and tl[-1]["bytes_written"] is None
    for c, cp in zip(tl[:3], cps[2:5], strict=True):
        assert c["bytes_written"] == cp.buffers_written * block_size  # the build's, not 8192
        assert c["wal_distance_bytes"] == cp.wal_distance_bytes
    assert counts(tl) == {
        "checkpoints_started": 3,
        "checkpoints_completed": 3,
        "checkpoints_overlapping": 4,
    }


def test_window_without_checkpoints() -> None:
    cps = parse_log(load("pg15.log"))
    assert timeline(cps, 1.0, 2.0, 8192) == []
    assert counts([]) == {
        "checkpoints_started": 0,
        "checkpoints_completed": 0,
        "checkpoints_overlapping": 0,
    }


def test_other_shapes() -> None:
    text = "\n".join(
        [
            "100.000 [9] LOG:  checkpoint complete: wrote 5 buffers (0.1%); 0 WAL file(s) added,"
            " 0 removed, 0 recycled; write=1.000 s, sync=0.500 s, total=2.000 s; sync files=1,"
            " longest=0.1 s, average=0.1 s; distance=10 kB, estimate=10 kB",
            "110.000 [9] LOG:  checkpoint starting: time",
            "111.000 [9] DETAIL:  not a checkpoint line",
            "112.000 [9] LOG:  checkpoint complete: wrote 7 buffers (0.1%); 0 WAL file(s) added,"
            " 0 removed, 0 recycled; write=1.000 s, sync=0.500 s, total=2.000 s; sync files=1,"
            " longest=0.1 s, average=0.1 s; distance=1 kB, estimate=10 kB",
            "120.000 [9] LOG:  restartpoint starting: time",
            "121.000 [9] LOG:  restartpoint complete: wrote 1 buffers (0.0%), wrote 0 SLRU"
            " buffers; 0 WAL file(s) added, 0 removed, 0 recycled; write=0.1 s, sync=0.1 s,"
            " total=1.000 s; sync files=1, longest=0.1 s, average=0.1 s; distance=2 kB,"
            " estimate=10 kB; lsn=0/3000060, redo lsn=0/3000028",
            "garbage line without prefix",
        ]
    )
    cps = parse_log(text)
    assert [(c.kind, c.trigger) for c in cps] == [
        ("checkpoint", "unknown"),
        ("checkpoint", "time"),
        ("restartpoint", "time"),
    ]
    assert cps[0].start_epoch is None and cps[0].effective_start == 98.0  # end - total
    assert cps[2].redo_lsn == "0/3000028" and cps[2].wal_distance_bytes == 2048
    tl = timeline(cps, 99.0, 130.0, 4096)
    assert [c["kind"] for c in tl] == ["checkpoint", "checkpoint", "restartpoint"]
    assert counts(tl)["checkpoints_started"] == 1  # the first began before the window


def test_triggers() -> None:
    assert trigger_of(["immediate", "force", "wait"]) == "immediate"
    assert trigger_of(["fast", "force", "wait"]) == "immediate"  # newer servers say "fast"
    assert trigger_of(["force", "wait"]) == "requested"
    assert trigger_of(["wal"]) == "wal" and trigger_of(["xlog"]) == "wal"
    assert trigger_of(["time"]) == "time"
    assert trigger_of(["shutdown", "immediate"]) == "shutdown"
    assert trigger_of(["end-of-recovery", "immediate", "wait"]) == "end-of-recovery"
    assert trigger_of([]) == "unknown"

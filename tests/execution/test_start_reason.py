"""A failed server start's reason is its own (issue 23, item 11): two variants of one
build share one server log; the second start's reason quotes only the lines written
since its own start and names the copy of the log kept in the run's raw directory."""

from __future__ import annotations

from pathlib import Path

from blocklab.execution.runner import SERVER_START_FAILED, start_failure_reason
from blocklab.postgres.cluster import ServerStartError, log_tail_since

FIRST = (
    "1.0 [1111] LOG:  starting PostgreSQL 18\n"
    '1.1 [1111] FATAL:  invalid value for parameter "io_method": "io_uring"\n'
)
SECOND = (
    "2.0 [2222] LOG:  starting PostgreSQL 18\n"
    '2.1 [2222] FATAL:  unrecognized configuration parameter "wal_compression_x"\n'
)


def test_the_tail_starts_at_this_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(FIRST)
    offset = log.stat().st_size
    with open(log, "a") as f:
        f.write(SECOND)
    tail = log_tail_since(log, offset)
    assert tail == SECOND.rstrip("\n")
    assert "1111" not in tail and "io_uring" not in tail


def test_the_tail_keeps_the_last_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert log_tail_since(log, 0, lines=3) == "line 27\nline 28\nline 29"
    assert log_tail_since(tmp_path / "missing.log", 0) == ""


def test_the_reason_names_the_kept_log_not_the_server_dir(tmp_path: Path) -> None:
    server_log = tmp_path / "servers" / "abc" / "server.log"
    kept = tmp_path / "runs" / "r002-v2" / "server.log"
    e = ServerStartError("exit code 1", server_log, SECOND.rstrip("\n"))
    reason = start_failure_reason(e, kept)
    assert reason.startswith(f"RunError: {SERVER_START_FAILED}: exit code 1"), reason
    assert str(kept) in reason and str(server_log) not in reason
    assert "[2222]" in reason and "wal_compression_x" in reason
    assert "[1111]" not in reason
    assert str(e).startswith("the server did not start: exit code 1; see ")

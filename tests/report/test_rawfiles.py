"""A run's raw files in the site (report/rawfiles.py): linked into a directory of the run's
own, made only when there is a regular file to put in it."""

from __future__ import annotations

import os
from pathlib import Path

from blocklab.report.rawfiles import LEFT_NOTE, MAX_SITE_RAW_FILE_BYTES, copy_raw


def test_links_regular_files_into_a_directory_it_makes(tmp_path: Path) -> None:
    raw = tmp_path / "results" / "runs" / "r1"
    (raw / "sub").mkdir(parents=True)
    (raw / "pgbench.stdout").write_text("tps = 1\n")
    (raw / "sub" / "server.log").write_text("LOG\n")
    dest = tmp_path / "site" / "runs" / "1-raw"
    got = copy_raw(tmp_path / "results", "runs/r1", dest, "1-raw")
    assert [(f["name"], f["href"], f["size"]) for f in got] == [
        ("pgbench.stdout", "1-raw/pgbench.stdout", 8),
        ("sub/server.log", "1-raw/sub/server.log", 4),
    ]
    assert (dest / "pgbench.stdout").read_text() == "tps = 1\n"
    assert os.path.samefile(dest / "pgbench.stdout", raw / "pgbench.stdout")  # a hard link
    assert (dest / "sub" / "server.log").read_text() == "LOG\n"


def test_makes_no_directory_without_a_regular_file(tmp_path: Path) -> None:
    raw = tmp_path / "results" / "runs" / "r1"
    raw.mkdir(parents=True)
    (raw / "elsewhere").symlink_to(tmp_path / "secret.txt")  # never followed nor listed
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    dest = tmp_path / "site" / "runs" / "1-raw"
    assert copy_raw(tmp_path / "results", "runs/r1", dest, "1-raw") == []
    assert not dest.exists()
    assert copy_raw(tmp_path / "results", "runs/gone", dest, "1-raw") == []
    assert not dest.exists()


def test_replaces_a_file_the_site_had(tmp_path: Path) -> None:
    raw = tmp_path / "results" / "runs" / "r1"
    raw.mkdir(parents=True)
    (raw / "run.json").write_text("{}\n")
    dest = tmp_path / "site" / "1-raw"
    dest.mkdir(parents=True)
    (dest / "run.json").write_text("old\n")
    copy_raw(tmp_path / "results", "runs/r1", dest, "1-raw")
    assert (dest / "run.json").read_text() == "{}\n"


def test_a_large_file_stays_in_the_results_and_is_linked_there(tmp_path: Path) -> None:
    """A per-transaction log (about 500 kB a real minute) is not put into the site: the
    page links the results directory's copy and says so; a small file beside it is."""
    raw = tmp_path / "results" / "runs" / "r1"
    (raw / "driver").mkdir(parents=True)
    log = raw / "driver" / "pgbench_log.42"
    log.write_bytes(b"0 1 2 3 4 5\n" * (MAX_SITE_RAW_FILE_BYTES // 12 + 1))
    (raw / "server.log").write_bytes(b"L" * MAX_SITE_RAW_FILE_BYTES)  # at the cap: copied
    dest = tmp_path / "site" / "1-raw"
    got = {f["name"]: f for f in copy_raw(tmp_path / "results", "runs/r1", dest, "1-raw")}
    assert got["driver/pgbench_log.42"]["href"] == log.as_uri()
    assert got["driver/pgbench_log.42"]["note"] == LEFT_NOTE
    assert got["driver/pgbench_log.42"]["size"] == log.stat().st_size
    assert not (dest / "driver").exists()
    assert got["server.log"]["href"] == "1-raw/server.log" and not got["server.log"]["note"]
    assert (dest / "server.log").stat().st_size == MAX_SITE_RAW_FILE_BYTES

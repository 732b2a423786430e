"""A run's raw files in the site (report/rawfiles.py): linked into a directory of the run's
own, made only when there is a regular file to put in it."""

from __future__ import annotations

import os
from pathlib import Path

from blocklab.report.rawfiles import copy_raw


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

"""A results directory blocklab cannot write (a read-only mount of a published copy):
`summary` and `report` read it as they read a writable one, and change nothing."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixture import write_synthetic_results

from blocklab.cli import main
from blocklab.store import RESULTS_DB_NAME


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(writable results, the same directory bind-mounted read-only)."""
    results = write_synthetic_results(tmp_path / "results", rounds=2, seconds=20)
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(results), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], check=True)
        yield results, mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def _summary(results: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["summary", "--results", str(results)])
    out, err = capsys.readouterr()
    return code, out + err


def _listing(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*")}


@pytest.mark.root
def test_summary_and_report_read_a_read_only_results_directory(
    read_only: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, mounted = read_only
    assert not (results / f"{RESULTS_DB_NAME}-wal").exists()  # closed cleanly
    before = _listing(results)
    with pytest.raises(OSError):  # root too: the mount is what refuses
        (mounted / "probe").write_text("")
    code, shown = _summary(mounted, capsys)
    assert code == 0, shown
    assert _listing(results) == before  # nothing written, not even WAL's -shm file
    # the same figures as from the writable directory (where the trends are then kept)
    code, writable = _summary(results, capsys)
    assert code == 0 and shown.replace(str(mounted), str(results)) == writable
    # the site's default place is inside the results: refused, naming --out
    kept = _listing(results)
    assert main(["report", "--results", str(mounted)]) == 2
    assert "--out" in capsys.readouterr().err and _listing(results) == kept
    assert main(["report", "--results", str(mounted), "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.root
def test_a_read_only_database_of_an_older_schema_is_refused_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    results = write_synthetic_results(tmp_path / "results", rounds=2, seconds=20)
    with sqlite3.connect(results / RESULTS_DB_NAME) as conn:
        conn.execute("DELETE FROM schema_version WHERE version > 4")
    conn.close()
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", "-o", "ro", str(results), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], check=True)
        code, shown = _summary(mounted, capsys)
    finally:
        subprocess.run(["umount", str(mounted)], check=True)
    assert code == 2, shown
    assert "--results" in shown and "schema version 4" in shown and "copy" in shown, shown

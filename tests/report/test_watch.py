"""blocklab report --watch and serve --watch (blocklab.report.watch): the site made once,
then updated each time a run is stored, by one process, on SYNTHETIC results."""

from __future__ import annotations

import http.client
import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from report_fixture import add_synthetic_run, differing_files, write_synthetic_results

from blocklab import proc
from blocklab.report import SiteResult, build_site
from blocklab.report.manifest import MANIFEST
from blocklab.report.resident import Resident
from blocklab.report.watch import watch
from blocklab.store import ResultsDB

NAME = "synthetic-geometry"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    write_synthetic_results(res, rounds=2, seconds=10)
    return res


def test_an_update_each_time_a_run_is_stored_and_none_while_nothing_is(
    results: Path, tmp_path: Path
) -> None:
    """Polls that find the store unchanged update nothing; a run stored between two polls
    is on the site after the next one, as a full rebuild has it; `full` makes the first
    update whole, not the next ones."""
    out = tmp_path / "site"
    told: list[SiteResult] = []
    polls: list[float] = []
    added: list[int] = []

    def sleep(s: float) -> None:  # each wait between two polls
        polls.append(s)
        assert len(polls) < 10, "the run stored was not seen"
        if len(polls) == 3:
            added.append(add_synthetic_run(results, NAME, seconds=10))

    build_site(results, out)  # a site there: with full, only the first update is whole
    made = watch(results, out, every_s=0.5, told=told.append, full=True, updates=2, sleep=sleep)
    assert made == 2 and polls == [0.5, 0.5, 0.5]
    first, second = told
    assert not first.incremental and second.incremental
    assert second.runs == first.runs + 1 and 0 < second.written < second.pages
    assert next(out.glob(f"e/*/runs/{added[0]}.html"))
    whole = tmp_path / "whole"
    build_site(results, whole)
    assert differing_files(out, whole) == []  # the runs kept between updates (Resident) too


def test_a_missing_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from blocklab.errors import UserError

    with pytest.raises(UserError, match="--results"):
        watch(tmp_path / "none", tmp_path / "site", every_s=1, told=print, updates=1)
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["report", "--every", "1"], "--every: only with --watch"),
        (["serve", "--every", "1"], "--every: only with --watch"),
        (["report", "--watch", "--every", "0"], "--every"),
    ],
)
def test_every_without_watch_or_out_of_range_is_refused(
    args: list[str], named: str, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from blocklab.cli import main

    out = tmp_path / "site"
    assert main([*args, "--results", str(results), "--out", str(out)]) == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


def _wait_for(log: Path, pattern: str, p: object, n: int = 1, timeout_s: float = 60) -> str:
    """The output once `pattern` is in it `n` times."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and p.poll() is None:  # type: ignore[attr-defined]
        if len(re.findall(pattern, text := log.read_text())) >= n:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} not printed:\n{log.read_text()}")


def _wait_for_page(out: Path, run_id: int, p: object, timeout_s: float = 60) -> Path:
    """A run's page, once the watcher has written it and its update has ended (the
    manifest is written last)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and p.poll() is None:  # type: ignore[attr-defined]
        pages = list(out.glob(f"e/*/runs/{run_id}.html"))
        listed = json.loads((out / MANIFEST).read_text())["experiments"].values()
        if pages and any(run_id == e[0] for runs in listed for e in runs):
            return pages[0]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id}'s page not written")


def _get(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("command", "stop"), [("report", signal.SIGINT), ("serve", signal.SIGTERM)]
)
def test_cli_watch_updates_on_a_new_run_and_ctrl_c_ends_it(
    command: str, stop: signal.Signals, results: Path, tmp_path: Path
) -> None:
    """`blocklab report --watch` / `serve --watch`: the site made, each of three runs
    stored by another process meanwhile updates it (served at once by serve), Ctrl-C or
    SIGTERM ends the watch with exit 0, even with SIGINT ignored by inheritance (CI's test
    command is a shell's `&` job). (A connection the watcher held open saw the second run
    never: blocklab.report.watch._marker.)"""
    out, log = tmp_path / "site", tmp_path / "watch.out"
    argv = [sys.executable, "-m", "blocklab.cli", command, "--results", str(results)]
    argv += ["--out", str(out), "--watch", "--every", "0.2"]
    argv += ["--port", "0"] if command == "serve" else []
    p = proc.spawn(argv, stdout_path=log)
    try:
        said = _wait_for(log, r"watching .* every 0\.2 s \(Ctrl-C to stop\)", p)
        assert "generated whole" in log.read_text()
        port = re.search(r"http://127\.0\.0\.1:(\d+)/", said)
        updated = r"\d\d:\d\d:\d\d updated: wrote \d+ pages, kept \d+"
        for _ in range(3):  # three runs, each stored once the last one's page is there
            # (its round is stored a transaction before it: a poll between the two makes
            # an update of its own, without the run)
            run_id = add_synthetic_run(results, NAME, seconds=10)
            page = _wait_for_page(out, run_id, p)
            if port is not None:
                assert _get(int(port.group(1)), f"/{page.relative_to(out)}") == 200
        n = len(re.findall(updated, _wait_for(log, updated, p, 3)))
        time.sleep(1.0)  # five polls
        assert len(re.findall(updated, log.read_text())) == n  # none while nothing changed
        p.send_signal(stop)
        assert p.wait(timeout=60) == 0
        assert log.read_text().rstrip().endswith("stopped watching")
    finally:
        if p.poll() is None:
            proc.terminate(p.pid)


def test_a_resident_process_keeps_every_run_read_and_judged_as_stored(
    results: Path, tmp_path: Path
) -> None:
    """report.resident across updates: after each it holds every run read (row, view, digest),
    every successful run's window and the summaries' reductions and comparisons, those
    the summaries' process read and made too (forked in an update, with a second core); a
    window whose run's key columns changed (its id given again) is not taken; and the
    site equals one made whole."""
    out = tmp_path / "site"
    build_site(results, out)
    resident = Resident()
    add_synthetic_run(results, NAME, seconds=10)  # an experiment changed: its summary made
    build_site(results, out, resident=resident)  # an update: its summary made aside
    with ResultsDB(results, create=False) as db:
        runs = db.runs(NAME)
    ok = [r["id"] for r in runs if r["status"] == "ok"]
    key = {r["id"]: (r["id"], r["started_at"], r["ended_at"]) for r in runs}
    assert set(resident.windows) == {key[i] for i in ok}
    assert set(resident.digests) == set(resident.views) == set(key.values())
    assert list(resident.runs[NAME]) == [r["id"] for r in runs]
    # the summaries' reductions of every variant's metrics, made in their process
    reduced = {k[1] for k in resident.memo.reductions}
    assert reduced == {r["variant_id"] for r in runs} and resident.memo.comparisons
    first = key[ok[0]]
    other = (first[0], "another start", first[2])
    resident.windows[other] = resident.windows.pop(first)
    assert sorted(resident.windows_known()) == sorted(ok[1:])
    resident.runs["removed since"] = {ok[0]: (other, {}, {})}
    view = resident.views[key[ok[1]]]
    added = add_synthetic_run(results, NAME, seconds=10)
    build_site(results, out, resident=resident)
    assert resident.views[key[ok[1]]] is view  # taken again, not made
    assert sorted(k[0] for k in resident.windows) == sorted([*ok, added])
    assert first in resident.windows and other not in resident.windows
    assert list(resident.runs) == [NAME]
    whole = tmp_path / "whole"
    build_site(results, whole)
    assert differing_files(out, whole) == []

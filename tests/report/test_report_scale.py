"""The report at scale: pages stay bounded as runs grow, and an update after one more run
rewrites only the pages that run changes, giving the same bytes as a full rebuild.
SYNTHETIC data (tests/report_fixture.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from report_fixture import (
    add_synthetic_run,
    differing_files,
    scale_series,
    write_synthetic_results,
)

from blocklab.report import build_site, data, runs_lists
from blocklab.report.manifest import MANIFEST
from blocklab.report.writer import Writer
from blocklab.store import ResultsDB

NAME = "synthetic-geometry"


def _largest_page(out: Path) -> tuple[str, int]:
    return max(
        ((str(p.relative_to(out)), p.stat().st_size) for p in out.rglob("*.html")),
        key=lambda kv: kv[1],
    )


def _snapshot(out: Path) -> dict[str, tuple[int, str]]:
    """Every file: (mtime_ns, sha256)."""
    return {
        str(p.relative_to(out)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in out.rglob("*")
        if p.is_file()
    }


def test_pages_stay_bounded_as_runs_grow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 runs per page stands for the 500 of a real site: 120 runs here are 6 pages,
    # as 3,000 runs are at 500 a page.
    monkeypatch.setattr(runs_lists, "RUNS_PER_PAGE", 20)
    sizes = {}
    for rounds in (10, 20):
        res = write_synthetic_results(tmp_path / f"r{rounds}", rounds=rounds, seconds=10)
        r = build_site(res, tmp_path / f"s{rounds}")
        assert r.runs == 6 * rounds
        sizes[rounds] = _largest_page(tmp_path / f"s{rounds}")
        assert (r.largest_page, r.largest_page_bytes) == sizes[rounds]
    (_, small), (_, large) = sizes[10], sizes[20]
    assert large <= small * 1.05 + 2_000, sizes  # twice the runs, no bigger pages
    assert large < 1_000_000
    runs_pages = sorted(p.name for p in (tmp_path / "s20" / "e" / NAME).glob("runs-*.html"))
    assert len(runs_pages) == 6
    grid = (tmp_path / "s20" / "e" / NAME / "grid.html").read_text()
    assert '"src":"grid/cell-0.js"' in grid and '"v":[' not in grid  # no series in the page


def test_one_more_run_rewrites_only_its_pages_and_matches_a_full_rebuild(
    tmp_path: Path,
) -> None:
    res = write_synthetic_results(tmp_path / "results", rounds=3, seconds=10)
    write_synthetic_results(res, name="other", rounds=2, seconds=10, seed=3)
    out = tmp_path / "site"
    first = build_site(res, out)
    assert not first.incremental and first.written == first.pages
    before = _snapshot(out)
    run_id = add_synthetic_run(res, NAME, seconds=10)

    r = build_site(res, out)
    assert r.incremental and r.written + r.kept == r.pages
    after = _snapshot(out)
    changed = {k for k in after if before.get(k) != after[k]}
    base = f"e/{NAME}"
    new_run = {f"{base}/runs/{run_id}.html"}
    new_run |= {k for k in after if k.startswith(f"{base}/runs/{run_id}-raw/")}
    expected_pages = {"index.html", "compare.html", f"{base}/index.html", f"{base}/grid.html"}
    csvs = {f"{base}/runs.csv", f"{base}/rounds.csv"}
    csvs.add(f"{base}/plots.js")  # the experiment page's rounds and runs plots
    cells = {k for k in changed if k.startswith(f"{base}/grid/")}
    assert len(cells) == 1  # the new run's cell only
    assert changed == new_run | expected_pages | csvs | cells | {MANIFEST}
    assert r.written == len({k for k in changed if k.endswith(".html")})
    assert not any(k.startswith("e/other/") for k in changed)

    full = build_site(res, tmp_path / "full", full=True)
    assert not full.incremental and full.pages == r.pages
    assert differing_files(out, tmp_path / "full") == []


def test_a_changed_grid_cell_takes_its_unchanged_runs_lines_from_its_old_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One more run rewrites its cell's shard from the lines the old shard holds (its
    other runs' series are not read again); a run whose line the old shard lacks is read
    again. Either way the site equals a full rebuild."""
    res = write_synthetic_results(tmp_path / "results", rounds=3, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    read: list[list[int]] = []
    series_of_runs = ResultsDB.series_of_runs

    def recorded(db: ResultsDB, run_ids: Any, *a: Any, **k: Any) -> Any:
        if k.get("names") == data.THROUGHPUT_SERIES:
            read.append(list(run_ids))
        return series_of_runs(db, run_ids, *a, **k)

    monkeypatch.setattr(ResultsDB, "series_of_runs", recorded)
    add_synthetic_run(res, NAME, seconds=10)
    build_site(res, out)
    assert read == [[]]  # the new run's line from its page's series, the others' kept
    assert differing_files(out, build_site(res, tmp_path / "full", full=True).out) == []

    shards = sorted((out / "e" / NAME / "grid").glob("cell-*.js"))
    cell = next(p for p in shards if f'"label":"{_first_label(res)}"' in p.read_text())
    head, body = cell.read_text().split("] = ", 1)
    lines = json.loads(body.removesuffix(";\n"))
    dropped = lines.pop(0)["id"]
    cell.write_text(f"{head}] = {json.dumps(lines)};\n")
    read.clear()
    add_synthetic_run(res, NAME, seconds=10, seed=7)
    build_site(res, out)
    assert read == [[dropped]]
    assert differing_files(out, build_site(res, tmp_path / "full2", full=True).out) == []


def _first_label(results: Path) -> str:
    with ResultsDB(results, create=False) as db:
        v = db.variants(NAME)[0]
        return str(v["label"] or v["variant_id"])


def test_runs_are_listed_by_variant_and_a_new_run_rewrites_one_list_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past RUNS_PER_PAGE runs, each variant's runs are on pages of their own
    (runs-<variant>-<n>.html, linked from the experiment page and to each other): one
    more run of the first variant rewrites that variant's last list page and no other."""
    monkeypatch.setattr(runs_lists, "RUNS_PER_PAGE", 4)
    res = write_synthetic_results(tmp_path / "results", rounds=5, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    exp_dir = out / "e" / NAME
    lists = sorted(p.name for p in exp_dir.glob("runs-*.html"))
    assert lists == sorted(f"runs-{v}-{n}.html" for v in range(1, 7) for n in (1, 2))
    index = (exp_dir / "index.html").read_text()
    assert all(f'href="runs-{v}-1.html"' in index for v in range(1, 7))
    assert "30 runs, listed by variant, 4 a page" in index
    first, second = ((exp_dir / f"runs-1-{n}.html").read_text() for n in (1, 2))
    assert 'href="runs-1-2.html" id="next-page"' in first and "prev-page" not in first
    assert 'href="runs-1-1.html" id="prev-page"' in second and "next-page" not in second
    assert first.count('class="run-link"') == 4 and second.count('class="run-link"') == 1

    before = _snapshot(out)
    add_synthetic_run(res, NAME, seconds=10)
    made: list[str] = []
    page = Writer.page

    def recorded(w: Writer, rel: str, template: str, **context: Any) -> None:
        made.append(rel)
        page(w, rel, template, **context)

    monkeypatch.setattr(Writer, "page", recorded)
    build_site(res, out)
    assert [m for m in made if "/runs-" in m] == [f"e/{NAME}/runs-1-2.html"]  # others kept
    after = _snapshot(out)
    changed = sorted(
        k for k in after if k.startswith(f"e/{NAME}/runs-") and before.get(k) != after[k]
    )
    assert changed == [f"e/{NAME}/runs-1-2.html"]
    assert differing_files(out, build_site(res, tmp_path / "full", full=True).out) == []


def test_a_store_made_again_in_the_same_place_updates_every_file_it_changes(
    tmp_path: Path,
) -> None:
    """The results made again where they were (the same experiment, so the same run ids),
    one run measured differently (its start and series): the update equals a full build.
    By ids alone, runs.csv kept the old store's row of that run and its grid cell the old
    store's line."""
    res = write_synthetic_results(tmp_path / "results", rounds=3, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    shutil.rmtree(res)
    write_synthetic_results(tmp_path / "results", rounds=3, seconds=10)
    with ResultsDB(res, create=False) as db:  # made later (the experiment's row says so)
        db.conn.execute("UPDATE experiments SET created_at = '2030-01-01T00:00:00+00:00'")
        run_id = int(db.runs(NAME)[0]["id"])
        db.conn.execute(
            "UPDATE runs SET started_at = '2030-01-01T00:00:00+00:00' WHERE id = ?", (run_id,)
        )
        scale_series(db, 2.0, run_id)
        db.conn.commit()
    assert build_site(res, out).incremental
    assert differing_files(out, build_site(res, tmp_path / "full", full=True).out) == []


def test_a_run_page_missing_from_the_site_is_written_again(tmp_path: Path) -> None:
    """The run pages kept are those the runs directory lists: one deleted is written
    again (and only it), the site then as a full rebuild."""
    res = write_synthetic_results(tmp_path / "results", rounds=2, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    gone = sorted((out / "e" / NAME / "runs").glob("*.html"))[1]
    gone.unlink()
    r = build_site(res, out)
    assert r.incremental and r.written == 1 and gone.is_file()
    assert differing_files(out, build_site(res, tmp_path / "full", full=True).out) == []


def test_new_templates_or_version_rebuild_the_whole_site(tmp_path: Path) -> None:
    res = write_synthetic_results(tmp_path / "results", rounds=2, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    assert build_site(res, out).incremental
    body = json.loads((out / MANIFEST).read_text())
    body["version"] = "0.0.1+oldtemplates"
    (out / MANIFEST).write_text(json.dumps(body))
    r = build_site(res, out)
    assert not r.incremental and r.written == r.pages
    assert not build_site(res, out, full=True).incremental


def test_bulk_series_read_matches_the_per_run_read(tmp_path: Path) -> None:
    res = write_synthetic_results(tmp_path / "results", rounds=2, seconds=5)
    with ResultsDB(res, create=False) as db:
        ids = [int(r["id"]) for r in db.runs(NAME)]
        ids = ids[::-1] + ids[:1]  # any order, repeats
        bulk = list(db.series_of_runs(ids, chunk=4))
        assert [r for r, _ in bulk] == ids
        assert all(s == db.series(r) for r, s in bulk)
        assert any(s == {} for _, s in bulk) and any(s for _, s in bulk)  # the failed run

"""Hostile names, descriptions and labels in the report: HTML, quotes, newlines, `../`
and very long strings. In Debian's Chromium no injected script runs on any page kind
(index, experiment, run, grid, compare), and every file the site writes stays inside it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from report_fixture import write_synthetic_results
from test_browser import Page, browser, page, shots  # noqa: F401, F811 - pytest fixtures

from blocklab.report import build_site
from blocklab.store import RESULTS_DB_NAME

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '"><img src=x onerror=window.__pwned=1>'
ATTR = "' onmouseover='window.__pwned=1' x='"
NAMES = [f"..{'/..' * 6}/tmp/escape{SCRIPT}", f"x{IMG}\n../../etc"]
DESCRIPTION = f"{SCRIPT}{IMG}{ATTR}\nline two ../../etc \"quoted\" 'single' " + "L" * 5000


def _poison(results: Path) -> None:
    """Hostile description and variant labels, written into the database the way a
    results file from anywhere could hold them."""
    conn = sqlite3.connect(results / RESULTS_DB_NAME)
    with conn:
        conn.execute("UPDATE experiments SET description = ?", (DESCRIPTION,))
        hostile = (SCRIPT, IMG, ATTR, "/../../" + "w" * 300)
        rows = conn.execute("SELECT experiment, variant_id FROM variants").fetchall()
        for i, (exp, vid) in enumerate(rows):
            conn.execute(
                "UPDATE variants SET label = label || ? WHERE experiment = ? AND variant_id = ?",
                (f"{hostile[i % len(hostile)]}#{i}", exp, vid),
            )
    conn.close()


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("hostile-report")
    results = base / "results"
    for i, name in enumerate(NAMES):
        write_synthetic_results(
            results, name=name, rounds=2, raw_files=False, seed=3 + i, block_sizes_kb=(4, 8)
        )
    _poison(results)
    build_site(results, base / "site")
    return base / "site"


def test_every_file_of_the_site_stays_inside_it(hostile_site: Path) -> None:
    root = hostile_site.resolve()
    files = [p for p in hostile_site.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert root in p.resolve().parents, p
    # the whole pytest base: what the hostile name would make, named "escape..." (other
    # tests' directories are named after them, "test_...escapes...", and hold files such
    # as PostgreSQL's src/test/modules/test_escape/test_escape.c)
    for p in hostile_site.parent.parent.rglob("escape*"):
        assert root in p.resolve().parents, p
    assert not Path("/tmp/escape").exists()


def _pages(site: Path) -> dict[str, list[Path]]:
    html = sorted(site.rglob("*.html"))
    kinds = {
        "index": [site / "index.html"],
        "compare": [p for p in html if p.name == "compare.html"],
        "grid": [p for p in html if p.name == "grid.html"],
        "experiment": [p for p in html if p.name == "index.html" and p.parent.parent.name == "e"],
        "run": [p for p in html if p.parent.name == "runs"][:6],
    }
    return kinds


def test_no_injected_script_runs_on_any_page_kind(hostile_site: Path, page: Page) -> None:  # noqa: F811
    kinds = _pages(hostile_site)
    for kind, found in kinds.items():
        assert found, f"no {kind} page in {sorted(hostile_site.rglob('*.html'))[:20]}"
    seen = 0
    for kind, found in kinds.items():
        for path in found:
            page.page.goto(path.as_uri())
            try:
                if kind == "index":  # no charts: site.js never marks it ready
                    page.page.wait_for_load_state("load")
                else:
                    page.ready()
            except Exception as e:  # noqa: BLE001 - say which page and why
                raise AssertionError(f"{kind} {path} never ready: {page.errors}") from e
            page.page.mouse.move(10, 10)
            page.page.wait_for_timeout(200)  # an onerror fires after the image fails
            pwned: Any = page.page.evaluate("typeof window.__pwned")
            assert pwned == "undefined", (kind, path)
            seen += 1
    assert seen >= 5

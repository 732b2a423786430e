"""A run page at fleet scale (issue 33): its data packed in the page, gzip-compressed (the
page's script unpacks and draws it, from file:// too), every stored series in it and no
per-run series file beside it. SYNTHETIC data (tests/report_fixture.py)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from report_fixture import SERIES_NAMES, write_synthetic_results

from blocklab.report import build_site
from blocklab.report.data import details_of, load_experiment
from blocklab.report.pagedata import differences
from blocklab.store import ResultsDB

NAME = "synthetic-geometry"
# A run page of the fixture's runs (60 s of 8 series) weighed 12 kB with its series and
# panels as text and JSON; packed, it weighs about 6 kB (these are exact byte counts):
# 5.9 kB at gzip's level 9, 6.2 kB at level 1 (pagedata.PACK_LEVEL).
MAX_RUN_PAGE_BYTES = 6_500


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("run-page")
    write_synthetic_results(base / "results")
    build_site(base / "results", base / "site")
    return base / "site"


def _unpack(packed: str) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress(base64.b64decode(packed))))


def unpacked(page: Path) -> dict[str, Any]:
    """What site.js unpacks: the base64 of gzip-compressed JSON, its details' shared part
    merged from details.js beside the page as site.js merges it (withBase)."""
    found = re.search(r'id="page-data-gz">([A-Za-z0-9+/=]*)</script>', page.read_text())
    assert found is not None, page
    data = _unpack(found.group(1))
    details = data["details"]
    if "base" in details:
        script = (page.parent / "details.js").read_text()
        bases = json.loads(script.removeprefix("window.blocklabDetails = ").rstrip().rstrip(";"))
        base = _unpack(bases[details.pop("base")])
        for name, diff in details.pop("differs").items():
            details[name] = patched(base[name], diff)
    return data


def patched(base: dict[str, Any] | None, diff: dict[str, Any]) -> dict[str, Any]:
    """`base` made into what `diff` describes, as site.js's patched makes it."""
    out = (base or {}) | diff.get("changed", {})
    for key in diff.get("removed", []):
        del out[key]
    for key, sub in diff.get("patched", {}).items():
        out[key] = patched(out.get(key), sub)
    return out


def test_differences_patch_nested_objects_back_and_hold_only_what_changed() -> None:
    """A run's details against its variant's first run's: nested objects are patched, not
    repeated (a probe fact's number, not the 40 facts), and every kind of change (a new
    key, a removed one at any depth, an object become a list, a list changed) comes back
    whole."""
    base = {
        "probe_facts": {"begin_epoch": 1.5, "basis": {"a": "pg_stat_io", "b": "x"}, "n": 3},
        "phases_s": {"run": 3.0},
        "gone": 1,
        "same": {"k": [1, 2]},
        "listed": [1, 2],
        "shape": {"x": 1},
    }
    own = {
        "probe_facts": {"begin_epoch": 2.5, "basis": {"a": "pg_stat_io"}, "n": 3, "new": None},
        "phases_s": {"run": 3.0},
        "same": {"k": [1, 2]},
        "listed": [1, 3],
        "shape": [1],
        "added": {"y": 2},
    }
    diff = differences(own, base)
    assert patched(base, diff) == own
    assert diff["patched"] == {
        "probe_facts": {
            "changed": {"begin_epoch": 2.5, "new": None},
            "patched": {"basis": {"changed": {}, "removed": ["b"]}},
        }
    }
    assert diff["changed"] == {"listed": [1, 3], "shape": [1], "added": {"y": 2}}
    assert diff["removed"] == ["gone"]
    assert differences(base, base) == {"changed": {}}


def points(data: dict[str, Any], name: str) -> list[tuple[float, float | None]]:
    if name in data["series"]:
        return [(float(t), v) for t, v in zip(data["t"], data["series"][name], strict=True)]
    return [(float(t), v) for t, v in data["pairs"][name]]


def test_a_run_page_packs_every_stored_series_and_what_it_shows(site: Path) -> None:
    results = site.parent / "results"
    with ResultsDB(results, create=False) as db:
        exp = load_experiment(db, NAME)
        for run in exp.runs:
            data = unpacked(site / "e" / NAME / "runs" / f"{run.id}.html")
            stored = db.series(run.id)
            assert sorted([*data["series"], *data["pairs"]]) == sorted(stored)
            assert all(points(data, n) == stored[n] for n in stored)
            assert [c["start_s"] for c in data["checkpoints"]] == [
                c["start_s"] for c in db.checkpoints(run.id)
            ]
            details = data["details"]
            settings, provenance = db.run_texts([run.id])[run.id]
            assert details["provenance"] == json.loads(provenance)
            assert details["settings"] == json.loads(settings)
            assert details["metrics"] == run.metrics
            assert details["variant"] == exp.variant(run.variant_id).variant
            if run.status == "ok":
                assert sorted(stored) == sorted(SERIES_NAMES)
                assert len(data["ma10"]) == len(data["t"]) == 60
                assert data["throughput"] == "tps" and data["panels"]


def test_run_pages_weigh_less_and_no_run_has_a_series_file(site: Path) -> None:
    runs = site / "e" / NAME / "runs"
    pages = sorted(runs.glob("*.html"))
    assert len(pages) == 18
    sizes = {p.name: p.stat().st_size for p in pages}
    assert max(sizes.values()) < MAX_RUN_PAGE_BYTES, sizes
    others = [p.name for p in runs.iterdir() if p.is_file() and p.suffix != ".html"]
    assert others == ["details.js"]  # each variant's shared details, once (pagedata.py)
    html = pages[0].read_text()
    assert 'id="page-data"' not in html and "<section" not in html  # drawn by site.js
    assert 'download="1-series.csv" id="run-series-csv"' in html


def test_a_failed_run_page_says_so_and_offers_no_series(site: Path) -> None:
    with ResultsDB(site.parent / "results", create=False) as db:
        failed = [r for r in load_experiment(db, NAME).runs if r.status != "ok"]
        stored = details_of(db.run_texts([failed[0].id])[failed[0].id])
    assert len(failed) == 1
    page = site / "e" / NAME / "runs" / f"{failed[0].id}.html"
    html = page.read_text()
    assert "This run recorded no per-second series (it failed)" in html
    assert "run-series-csv" not in html and 'id="run-panels"' not in html
    data = unpacked(page)
    assert data["series"] == {} and data["pairs"] == {} and data["t"] == []
    assert data["details"]["provenance"] == stored["provenance"] != {}


def test_real_runs_details_are_shared_by_their_variant_and_merge_back_whole(
    tmp_path: Path,
) -> None:
    """The fixture's real_details (a recorded real run's provenance and 399 settings, what
    differs between real runs drawn per run; bench/bench_report.py uses them by default).
    Whole, a page with them weighed 19.8 kB (a real 3-second run). Now each variant's first
    run's are in details.js, once, and a page holds what differs from them: every page's
    details merge back to the stored ones (as site.js merges them), and a page of a
    variant's later run weighs less than half as much."""
    real = tmp_path / "real"
    write_synthetic_results(
        real, rounds=3, block_sizes_kb=(4, 8), fs_block_sizes=(4096,), real_details=True
    )
    build_site(real, tmp_path / "site")
    runs_dir = tmp_path / "site" / "e" / NAME / "runs"
    with ResultsDB(real, create=False) as db:
        exp = load_experiment(db, NAME)
        texts = db.run_texts([r.id for r in exp.runs])
    firsts = {}
    for run in sorted(exp.runs, key=lambda r: r.id):
        firsts.setdefault(run.variant_id, run.id)
        details = unpacked(runs_dir / f"{run.id}.html")["details"]
        stored = details_of(texts[run.id])
        assert details["provenance"] == stored["provenance"]
        assert details["settings"] == stored["settings"]
        assert len(details["settings"]) == 399 and "collected" in details["provenance"]
    script = (runs_dir / "details.js").read_text()
    assert script.startswith("window.blocklabDetails = ") and all(v in script for v in firsts)
    later = [r for r in exp.runs if r.id not in firsts.values() and r.status == "ok"]
    sizes = [(runs_dir / f"{r.id}.html").stat().st_size for r in later]
    # 6.6 kB; 7.8 kB when a changed object was held whole (differences: patched)
    assert len(sizes) == 3 and max(sizes) < MAX_RUN_PAGE_BYTES + 500, sizes

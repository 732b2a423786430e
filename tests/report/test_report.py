"""Report site: pure helpers, generation from a SYNTHETIC results database, CLI, server."""

from __future__ import annotations

import csv
import http.client
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import plotly
import pytest
from helpers import serving
from report_fixture import write_synthetic_results

from blocklab import proc
from blocklab.analysis import stats
from blocklab.analysis.metrics import metric_info
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.report import build_site, resolve_in_site, shape
from blocklab.report.data import load_experiment
from blocklab.report.pagedata import compare_json
from blocklab.store import ResultsDB

# ---------------------------------------------------------------- pure helpers


def test_moving_average_matches_a_brute_force_window() -> None:
    pts: list[tuple[float, float | None]] = [(float(t), float(t)) for t in range(30)]
    pts[12] = (12.0, None)
    got = dict(shape.moving_average(pts, 10.0))
    for t in range(30):
        window = [v for (u, v) in pts if t - 10 < u <= t and v is not None]
        assert got[float(t)] == pytest.approx(sum(window) / len(window), abs=1e-3)  # rounded
    assert got[9.0] == pytest.approx(4.5)  # 0..9
    assert got[19.0] == pytest.approx(sum(x for x in range(10, 20) if x != 12) / 9, abs=1e-3)


def test_default_axes_prefer_block_size_against_fs_then_wal() -> None:
    assert shape.default_axes(["wal_block_size_kb", "block_size_kb", "fs_block_size"]) == (
        "fs_block_size",
        "block_size_kb",
    )
    assert shape.default_axes(["block_size_kb", "wal_block_size_kb"]) == (
        "wal_block_size_kb",
        "block_size_kb",
    )
    assert shape.default_axes(["clients", "fillfactor"]) == ("fillfactor", "clients")
    assert shape.default_axes(["block_size_kb"]) == ("block_size_kb", None)
    assert shape.default_axes([]) == (None, None)


def test_free_dims_drop_the_storage_label_but_keep_the_fs_kind() -> None:
    dims = [
        {"block_size_kb": bs, "fs": fs, "fs_block_size": b, "storage": f"{fs}-{b}"}
        for bs in (4, 8)
        for fs in ("ext4", "xfs")
        for b in (1024, 4096)
    ]
    assert shape.free_dims(dims, ["fs_block_size", "block_size_kb"]) == ["fs"]
    assert shape.slices(dims, ["fs"]) == [{"fs": "ext4"}, {"fs": "xfs"}]
    one_fs = [d for d in dims if d["fs"] == "ext4"]
    axes = ["fs_block_size", "block_size_kb"]
    assert shape.free_dims(one_fs, axes) == []


def test_checkpoint_kinds() -> None:
    assert shape.checkpoint_kind("time") == "time"
    assert [shape.checkpoint_kind(t) for t in ("wal", "requested", "immediate")] == ["wal"] * 3
    assert shape.checkpoint_kind("shutdown") == "other"


def test_cell_stats_use_blocklab_stats_and_name_the_direction() -> None:
    ref = {1: 1000.0, 2: 1010.0, 3: 990.0, 4: 1005.0}
    more = {1: 1200.0, 2: 1215.0, 3: 1190.0, 4: 1207.0}
    info = metric_info("wal_bytes_per_xact")
    cell = shape.cell_stats(more, ref, info)
    assert cell is not None and cell.comparison is not None
    assert cell.summary == stats.summarize(list(more.values()))
    expected = stats.compare_paired(ref, more, higher_is_better=False)
    assert cell.comparison == expected
    assert cell.verdict == "worse"  # 20 % more WAL per transaction
    assert shape.cell_stats(more, ref, metric_info("tps")).verdict == stats.FASTER  # type: ignore[union-attr]
    assert (
        shape.cell_stats(more, ref, metric_info("fpi_bytes_share_of_wal_max")).verdict == "higher"
    )  # type: ignore[union-attr]
    assert shape.cell_stats(ref, None, info, is_reference=True).verdict == "reference"  # type: ignore[union-attr]


def test_metric_order_puts_known_metrics_first() -> None:
    found = ["zeta_s", "fpi_bytes_share_of_wal_max", "tps", "wal_bytes_per_xact"]
    keys = [m.key for m in shape.order_metrics(found)]
    assert keys == ["tps", "wal_bytes_per_xact", "fpi_bytes_share_of_wal_max", "zeta_s"]
    assert metric_info("zeta_s").unit == "s"


def test_resolve_in_site_refuses_every_way_out(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_text("index")
    (site / "assets" / "a.js").write_text("js")
    (tmp_path / "secret.txt").write_text("secret")
    (site / "link-out").symlink_to(tmp_path / "secret.txt")
    assert resolve_in_site(site, "/") == (site / "index.html").resolve()
    assert resolve_in_site(site, "/assets/a.js?x=1") == (site / "assets" / "a.js").resolve()
    for bad in (
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/assets/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/assets/..%5c..%5csecret.txt",
        "/link-out",
        "/index.html%00.js",
        "/missing.html",
    ):
        assert resolve_in_site(site, bad) is None, bad


# ---------------------------------------------------------------- generated site


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = tmp_path_factory.mktemp("report") / "results"
    write_synthetic_results(res)
    write_synthetic_results(
        res, name="synthetic-fs-kinds", fs_kinds=("ext4", "xfs"), seed=11, failed_run=False
    )
    return res


@pytest.fixture(scope="module")
def site(results: Path) -> Path:
    out = results.parent / "site"
    build_site(results, out)
    return out


def test_site_has_every_page_and_the_bundled_chart_library(results: Path, site: Path) -> None:
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert (site / "assets" / "plotly.min.js").read_bytes() == bundled.read_bytes()
    with ResultsDB(results, create=False) as db:
        for e in db.experiments():
            base = site / "e" / e["name"]
            assert (base / "index.html").is_file() and (base / "grid.html").is_file()
            for r in db.runs(e["name"]):
                assert (base / "runs" / f"{r['id']}.html").is_file()
            # a run's series are in its page only: no file of their own, no experiment-wide copy
            assert not list(base.glob("runs/*.csv*")) and not list(base.glob("*series*"))
    assert (site / "index.html").is_file() and (site / "compare.html").is_file()


def test_pages_load_nothing_from_the_network(site: Path) -> None:
    for page in site.rglob("*.html"):
        html = page.read_text()
        for url in re.findall(r'(?:src|href)="([^"]*)"', html):
            assert not re.match(r"^[a-z]+://|^//", url), (page, url)
    assert "http" not in (site / "assets" / "site.js").read_text()


def test_index_lists_experiments_with_run_counts(site: Path) -> None:
    html = (site / "index.html").read_text()
    assert "synthetic-geometry" in html and "synthetic-fs-kinds" in html
    row = html[html.index('href="e/synthetic-geometry/index.html"') :].split("</tr>")[0]
    cells = re.findall(r'<td class="num[^"]*">(\d+)</td>', row)
    assert cells == ["6", "17", "1"]  # variants, ok, failed


def test_experiment_page_summary_matches_stats_and_lists_the_failure(
    results: Path, site: Path
) -> None:
    html = (site / "e" / "synthetic-geometry" / "index.html").read_text()
    with ResultsDB(results, create=False) as db:
        exp = load_experiment(db, "synthetic-geometry")
        ref = exp.reference
        tps = [r.tps for r in exp.runs if r.variant_id == ref and r.status == "ok"]
        failed = [r for r in exp.runs if r.status == "failed"]
    s = stats.summarize([t for t in tps if t is not None])
    assert f"{shape.fmt_num(s.mean)} ± {shape.fmt_num(s.stdev)}" in html
    assert len(failed) == 1 and failed[0].reason in html
    page_data = json.loads(re.search(r'id="page-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert page_data["axes"] == ["fs_block_size", "block_size_kb"]
    assert {m["key"] for m in page_data["metrics"]} >= {
        "tps",
        "wal_bytes_per_xact",
        "fpi_bytes_share_of_wal_max",
    }
    ref_json = next(v for v in page_data["variants"] if v["ref"])
    assert ref_json["stats"]["tps"]["mean"] == pytest.approx(s.mean, rel=1e-5)


def test_dimension_values_carry_their_units() -> None:
    assert shape.dim_label("block_size_kb", 4) == "4 kB"
    assert shape.dim_label("wal_block_size_kb", 16) == "16 kB"
    assert [shape.dim_label("fs_block_size", b) for b in (1024, 4096, 65536)] == [
        "1 kB",
        "4 kB",
        "64 kB",
    ]
    assert shape.dim_label("fs_block_size", "default") == "default"
    assert shape.dim_label("storage", "ext4-4k") == "ext4-4k"
    assert shape.dim_label("clients", 8) == "8"
    assert shape.dim_label("duration_s", 60) == "60 s"


def test_pages_label_both_block_sizes_in_kb(results: Path, site: Path) -> None:
    from blocklab.report.pagedata import grid_json

    with ResultsDB(results, create=False) as db:
        exp = load_experiment(db, "synthetic-geometry")
    html = (site / "e" / "synthetic-geometry" / "index.html").read_text()
    page_data = json.loads(re.search(r'id="page-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert page_data["dimLabels"]["fs_block_size"] == {"1024": "1 kB", "4096": "4 kB"}
    assert page_data["dimLabels"]["block_size_kb"] == {"4": "4 kB", "8": "8 kB", "16": "16 kB"}
    assert "fs_block_size=1 kB" in html and "fs_block_size=1024" not in html
    grid = grid_json(exp, {})
    assert (grid["xl"], grid["yl"]) == (["1 kB", "4 kB"], ["4 kB", "8 kB", "16 kB"])


def test_a_comparison_without_a_ratio_reads_as_a_difference() -> None:
    info = metric_info("bgwriter_write_bytes_per_xact")
    cell = shape.cell_stats({1: 1024.0, 2: 8192.0, 3: 2048.0}, {1: 0.0, 2: 4096.0, 3: 0.0}, info)
    assert cell is not None and cell.comparison is not None
    text = shape.vs_reference(cell.comparison, info.unit)
    assert text.startswith("+2.33 kB (") and "1.0" not in text.split(" (")[0]
    ratio = shape.cell_stats({1: 110.0, 2: 121.5}, {1: 100.0, 2: 110.0}, metric_info("tps"))
    assert ratio is not None and ratio.comparison is not None
    # the CLI's form (summary_table.gain_text), not the ratio "1.102 (...)" it was
    assert shape.vs_reference(ratio.comparison, "transactions/s").startswith("+10.2 % (")


def test_compare_offers_each_storage_of_an_experiment(results: Path) -> None:
    with ResultsDB(results, create=False) as db:
        exps = [load_experiment(db, e["name"]) for e in db.experiments()]
    titles = [it["title"] for it in compare_json(exps)["items"]]
    assert titles == [
        "synthetic-geometry",
        "synthetic-fs-kinds — fs=ext4",
        "synthetic-fs-kinds — fs=xfs",
    ]


def test_csv_files_parse_and_hold_every_run(results: Path, site: Path) -> None:
    base = site / "e" / "synthetic-geometry"
    with open(base / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == 18 and sum(r["status"] == "failed" for r in runs) == 1


def test_run_page_links_raw_files_that_exist_in_the_site(site: Path) -> None:
    run_page = site / "e" / "synthetic-geometry" / "runs" / "1.html"
    hrefs = re.findall(r'href="(1-raw/[^"]+)"', run_page.read_text())
    assert sorted(Path(h).name for h in hrefs) == ["pgbench.stdout", "run.json", "server.log"]
    for h in hrefs:
        assert "SYNTHETIC" in (run_page.parent / h).read_text() or h.endswith("run.json")


def test_regenerating_replaces_the_site_and_refuses_foreign_dirs(
    results: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    build_site(results, out)
    (out / "stale.html").write_text("old")
    build_site(results, out)
    assert not (out / "stale.html").exists() and (out / "index.html").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="--out"):
        build_site(results, foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
    with pytest.raises(UserError, match="--out"):
        build_site(results, results)


# ---------------------------------------------------------------- CLI


def test_cli_bad_results_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--results", str(tmp_path / "nope")]) == 2
    assert "--results" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "--results", str(empty)]) == 2
    ResultsDB(tmp_path / "noexp").close()  # a database without experiments
    assert main(["report", "--results", str(tmp_path / "noexp")]) == 2
    assert "no experiment" in capsys.readouterr().err


def test_cli_report_writes_the_site(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-site"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    assert (out / "e" / "synthetic-fs-kinds" / "index.html").is_file()


# ---------------------------------------------------------------- server


@pytest.fixture()
def served(site: Path) -> Iterator[tuple[str, int]]:
    with serving(site) as addr:
        yield addr


def _get(addr: tuple[str, int], path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*addr, timeout=10)
    try:
        conn.request("GET", path)  # sent as written: no client-side normalisation
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_server_binds_loopback_and_serves_the_site(served: tuple[str, int]) -> None:
    assert served[0] == "127.0.0.1"
    status, body = _get(served, "/")
    assert status == 200 and b"synthetic-geometry" in body
    assert _get(served, "/e/synthetic-geometry/runs.csv")[0] == 200
    assert _get(served, "/assets/")[0] == 404  # no directory listings


def test_server_never_serves_outside_the_site(site: Path, served: tuple[str, int]) -> None:
    secret = site.parent / "secret.txt"
    secret.write_text("TOP-SECRET")
    link = site / "e" / "out-link"
    link.symlink_to(secret)
    try:
        for path in (
            "/../secret.txt",
            "/e/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E%2Fsecret.txt",
            "/e/%2e%2e%2f%2e%2e%2fsecret.txt",
            "/..%5csecret.txt",
            "/%252e%252e/secret.txt",
            "/e/out-link",
            "/../../../../etc/passwd",
        ):
            status, body = _get(served, path)
            assert status == 404, path
            assert b"TOP-SECRET" not in body and b"root:" not in body
    finally:
        link.unlink()
        secret.unlink()


def test_cli_serve_regenerates_and_serves_on_loopback(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "served"
    log = tmp_path / "serve.out"
    argv = [sys.executable, "-m", "blocklab.cli", "serve", "--results", str(results)]
    p = proc.spawn([*argv, "--out", str(out), "--port", "0"], stdout_path=log)
    try:
        port = None
        deadline = time.monotonic() + 120
        while port is None and time.monotonic() < deadline and p.poll() is None:
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read_text())
            port = int(m.group(1)) if m else None
            time.sleep(0.2)
        assert port is not None, log.read_text()
        status, body = _get(("127.0.0.1", port), "/index.html")
        assert status == 200 and b"synthetic-fs-kinds" in body
        assert _get(("127.0.0.1", port), "/%2e%2e/serve.out")[0] == 404
    finally:
        proc.terminate(p.pid)
    assert not proc.pid_alive(p.pid)
    shutil.rmtree(out, ignore_errors=True)

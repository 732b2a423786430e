"""The report site in a real browser: Debian's Chromium driven by Playwright, no network.

Opens the index from disk and through the server, clicks through to a run, ticks two
items on the compare page, downloads a CSV and parses it, and checks from screenshots
that the charts are drawn (counts pixels that are not the white background).
"""

from __future__ import annotations

import csv
import json
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixture import SERIES_NAMES, write_synthetic_results

from blocklab.report import build_site, make_server
from blocklab.store import ResultsDB

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Screenshots go to pytest's temporary directory, or to BLOCKLAB_REPORT_SHOTS when set
# (to look at them).
SHOTS_ENV = "BLOCKLAB_REPORT_SHOTS"


# ---------------------------------------------------------------- PNG pixels


def png_pixels(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) to HxWxC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, -1)
    return _unfilter(raw, width, channels)


def _unfilter(raw: np.ndarray, width: int, bpp: int) -> np.ndarray:
    out = np.zeros((raw.shape[0], width * bpp), dtype=np.int32)
    for y in range(raw.shape[0]):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros_like(line)
        if kind in (0, 2):
            out[y] = (line + (prev if kind == 2 else 0)) % 256
            continue
        row = np.zeros_like(line)
        for x in range(len(line)):
            a = row[x - bpp] if x >= bpp else 0
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                pred = a
            elif kind == 3:
                pred = (a + prev[x]) // 2
            else:  # Paeth
                p = a + prev[x] - c
                pa, pb, pc = abs(p - a), abs(p - prev[x]), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (prev[x] if pb <= pc else c)
            row[x] = (line[x] + pred) % 256
        out[y] = row
    return out.reshape(raw.shape[0], width, bpp)[:, :, :3].astype(np.uint8)


def colour_share(png: bytes) -> float:
    """Share of coloured pixels: data (lines, cells, shading), not the white background
    or the grey and black of axes, grid lines and text."""
    px = png_pixels(png).astype(np.int32)
    return float((px.max(axis=2) - px.min(axis=2) > 40).mean())


def near_share(png: bytes, rgb: tuple[int, int, int], tol: int = 30) -> float:
    """Share of pixels within `tol` of one colour (a trace's line colour)."""
    px = png_pixels(png).astype(np.int32)
    return float((np.abs(px - np.array(rgb)).max(axis=2) <= tol).mean())


def test_png_decoder_on_a_known_image() -> None:
    # 2x1 RGB: red, white; filter 0 — the checker must see one inked pixel in two.
    raw = b"\x00" + bytes([255, 0, 0, 255, 255, 255])
    chunk = lambda k, b: struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b))  # noqa: E731
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    assert colour_share(png) == 0.5


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("browser")
    results = base / "results"
    write_synthetic_results(results)
    write_synthetic_results(
        results, name="synthetic-fs-kinds", fs_kinds=("ext4", "xfs"), seed=11, failed_run=False
    )
    build_site(results, base / "site")
    return base / "site"


@pytest.fixture(scope="module")
def server_url(site: Path) -> Iterator[str]:
    server = make_server(site, port=0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (Debian package chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A page that records script errors and refuses every request off this machine."""

    def __init__(self, browser: Any, shots: Path):
        self.shots = shots
        self.ctx = browser.new_context(
            viewport={"width": 1300, "height": 900}, accept_downloads=True
        )
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.ctx.route("**/*", self._route)
        self.page = self.ctx.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if re.match(r"^(file://|http://127\.0\.0\.1[:/]|data:|blob:)", url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def ready(self) -> None:
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)

    def check_clean(self) -> None:
        assert self.errors == [] and self.blocked == [], (self.errors, self.blocked)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get(SHOTS_ENV)
    path = Path(wanted) if wanted else tmp_path_factory.mktemp("shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def page(browser: Any, shots: Path) -> Iterator[Page]:
    p = Page(browser, shots)
    try:
        yield p
    finally:
        p.ctx.close()


def png_of(page: Page, selector: str, name: str) -> bytes:
    el = page.page.locator(selector).first
    el.scroll_into_view_if_needed()
    return bytes(el.screenshot(path=str(page.shots / f"{name}.png")))


def shot(page: Page, selector: str, name: str) -> float:
    return colour_share(png_of(page, selector, name))


# ---------------------------------------------------------------- tests


def test_file_index_click_through_to_a_run(site: Path, page: Page) -> None:
    p = page.page
    p.goto((site / "index.html").as_uri())
    p.click("a.experiment-link:text('synthetic-geometry')")
    page.ready()
    assert p.url.endswith("/e/synthetic-geometry/index.html")
    assert shot(page, "#heatmap", "heatmap") > 0.4  # filled cells, not an empty frame
    assert p.locator("#failed-runs").inner_text().count("SYNTHETIC failure") == 1
    p.click("a.run-link >> nth=0")
    page.ready()
    assert re.search(r"/runs/\d+\.html$", p.url)
    charts = ("chart-tps", "chart-latency", "chart-latency-log", "chart-device-write", "chart-cpu")
    for chart in charts:
        assert p.locator(f"#{chart} .main-svg").count() > 0, chart
        assert shot(page, f"#{chart}", chart) > 0.05, chart  # lines and checkpoint shading
    ma_line = near_share(png_of(page, "#chart-tps", "chart-tps"), (0x1F, 0x5F, 0xA8))
    assert ma_line > 0.002  # the moving average is drawn, not only the shading
    log_axis = p.evaluate("document.getElementById('chart-latency-log').layout.yaxis.type")
    assert log_axis == "log"
    assert p.locator("#chart-tps .shapelayer path").count() >= 2  # checkpoints shaded
    # drawn from the page's packed data (from file://): the checkpoints, the stored details
    assert p.locator("#checkpoints tbody tr").count() == 3
    assert "still running" in p.locator("#checkpoints").inner_text()
    assert "SYNTHETIC" in p.locator("#run-details details[open] pre").inner_text()
    assert p.locator("#run-details summary").all_text_contents() == [
        "provenance",
        "variant definition",
        "settings (2)",
        "metrics (5)",
    ]
    raw = p.locator("#raw-files a", has_text="pgbench.stdout")
    raw.click()
    assert "SYNTHETIC" in p.locator("body").inner_text()
    page.check_clean()


def test_heatmap_metric_switch_and_cell_click(site: Path, page: Page) -> None:
    p = page.page
    p.goto((site / "e" / "synthetic-geometry" / "index.html").as_uri())
    page.ready()
    p.select_option("#metric", "wal_bytes_per_xact")
    assert p.locator("table.summary[data-metric='wal_bytes_per_xact']").is_visible()
    assert not p.locator("table.summary[data-metric='tps']").is_visible()
    title = p.locator("#heatmap .cbtitle").text_content() or ""
    assert "WAL bytes per transaction" in title
    # both block sizes on the axes in one unit: fs blocks 1024 / 4096 read as kB like pages
    axes = p.evaluate(
        "(() => { const t = document.getElementById('heatmap').data[0]; return [t.x, t.y]; })()"
    )
    assert axes == [["1 kB", "4 kB"], ["4 kB", "8 kB", "16 kB"]]
    ticks = p.locator("#heatmap .xtick text").all_text_contents()
    assert ticks == ["1 kB", "4 kB"]
    p.locator("#heatmap").scroll_into_view_if_needed()  # below the answer: into view first
    box = p.locator("#heatmap .nsewdrag").first.bounding_box()
    assert box is not None
    p.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + box["height"] * 0.2)
    p.wait_for_function("location.hash.startsWith('#runs-')", timeout=10_000)
    page.check_clean()


def test_served_compare_two_storages_on_one_scale(server_url: str, page: Page) -> None:
    p = page.page
    p.goto(f"{server_url}/index.html")
    p.click("#nav-compare")
    page.ready()
    boxes = p.locator("input.compare-item")
    assert boxes.count() == 3
    p.check("input.compare-item[data-title$='fs=ext4']")
    p.check("input.compare-item[data-title$='fs=xfs']")
    assert p.locator("#panels .panel").count() == 2
    p.wait_for_selector("#panels .panel:nth-child(2) .main-svg")
    scales = p.evaluate(
        "[...document.querySelectorAll('#panels .panel .js-plotly-plot')]"
        ".map(d => [d.data[0].zmin, d.data[0].zmax, d.data[0].showscale])"
    )
    assert len(scales) == 2 and scales[0][:2] == scales[1][:2]
    assert [s[2] for s in scales] == [False, True]  # one colour bar for both
    assert "One colour scale" in p.locator("#compare-scale").inner_text()
    assert shot(page, "#panels", "compare") > 0.2
    page.check_clean()


def test_served_download_csv_and_parse_it(
    site: Path, server_url: str, page: Page, tmp_path: Path
) -> None:
    p = page.page
    p.goto(f"{server_url}/e/synthetic-geometry/index.html")
    page.ready()
    with p.expect_download() as info:
        p.click("#runs-csv")
    path = tmp_path / "runs.csv"
    info.value.save_as(path)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 18
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and "SYNTHETIC failure" in failed[0]["reason"]
    p.click("a.run-link >> nth=0")
    page.ready()
    with p.expect_download() as info:
        p.click("#run-series-csv")  # made in the page from its packed data
    series = tmp_path / "series.csv"
    info.value.save_as(series)
    assert info.value.suggested_filename == re.sub(r".*/(\d+)\.html$", r"\1-series.csv", p.url)
    with open(series, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 60 and float(rows[10]["tps"]) > 0
    assert list(rows[0]) == ["t_s", *sorted(SERIES_NAMES)]  # every stored series
    run_id = int(info.value.suggested_filename.split("-")[0])
    with ResultsDB(site.parent / "results", create=False) as db:
        stored = db.series(run_id)
    for name in SERIES_NAMES:
        assert [(float(r["t_s"]), float(r[name])) for r in rows] == stored[name]
    page.check_clean()


def test_grid_has_one_chart_per_cell(site: Path, page: Page) -> None:
    p = page.page
    p.goto((site / "e" / "synthetic-geometry" / "grid.html").as_uri())
    page.ready()
    assert p.locator("#grid .cell .js-plotly-plot").count() == 6  # 3 page sizes x 2 fs block sizes
    assert shot(page, "#grid", "grid") > 0.008  # thin lines in six small charts
    page.check_clean()


def test_failed_run_page_draws_without_errors(site: Path, page: Page) -> None:
    p = page.page
    p.goto((site / "e" / "synthetic-geometry" / "index.html").as_uri())
    page.ready()
    p.click("#failed-runs a")
    page.ready()
    assert "no per-second series" in p.locator("main").inner_text()
    assert "SYNTHETIC failure" in p.locator(".facts").inner_text()
    page.check_clean()


def test_one_dimension_is_a_forest_of_changes_against_no_change(
    tmp_path: Path, browser: Any, shots: Path
) -> None:
    """One dimension is drawn as each variant's change with its CI against no change
    (it was bars coloured on a scale that painted any gap full yellow against purple)."""
    results = tmp_path / "results"
    write_synthetic_results(results, name="one-dim", fs_block_sizes=(4096,), rounds=4)
    build_site(results, tmp_path / "site")
    page = Page(browser, shots)
    try:
        p = page.page
        p.goto((tmp_path / "site" / "e" / "one-dim" / "index.html").as_uri())
        page.ready()
        trace, shapes = p.evaluate(
            "(() => { const d = document.getElementById('heatmap'); const t = d.data[0];"
            " return [[t.type, t.y, t.x, t.text, t.error_x.array],"
            " d.layout.shapes.map(s => [s.type, s.x0, s.x1])]; })()"
        )
        kind, ys, xs, texts, plus = trace
        assert kind == "scatter" and ys == ["4 kB", "8 kB (reference)", "16 kB"]
        assert xs[1] == 0 and xs[0] > 0 > xs[2]  # 4 kB faster, 16 kB slower (the fixture)
        assert plus[0] > 0 and plus[2] > 0  # each change has its CI
        assert re.fullmatch(r"\+\d+\.\d % \(\+\d+\.\d to \+\d+\.\d\)   faster", texts[0]), texts
        assert ["line", 0, 0] in shapes and ["rect", -2, 2] in shapes  # no change, ±2 %
        png = png_of(page, "#heatmap", "forest-one-dim")  # thin marks on white: by colour
        assert near_share(png, (0x1E, 0x7B, 0x34)) > 0.0002  # faster: green
        assert near_share(png, (0xB3, 0x26, 0x1E)) > 0.0002  # slower: red
        page.check_clean()
    finally:
        page.ctx.close()


def test_experiment_page_answers_as_the_cli_and_draws_rounds_and_runs(
    tmp_path: Path, browser: Any, shots: Path
) -> None:
    from blocklab.analysis.first_screen import first_screen
    from blocklab.analysis.summary import summarize_experiment
    from blocklab.store import ResultsDB

    results = tmp_path / "results"
    write_synthetic_results(results, name="one-dim", fs_block_sizes=(4096,), rounds=4)
    build_site(results, tmp_path / "site")
    with ResultsDB(results, create=False) as db:
        cli = first_screen(summarize_experiment(db, "one-dim"))
    page = Page(browser, shots)
    try:
        p = page.page
        p.goto((tmp_path / "site" / "e" / "one-dim" / "index.html").as_uri())
        page.ready()
        assert p.locator("#answer-heading").inner_text() == cli[0]
        assert p.locator("#answer-setting").inner_text() == cli[1].strip()  # host, version
        assert "paired" in p.locator("#design-kind").inner_text()
        assert "4 done of 4 planned" in p.locator("#design-rounds").inner_text()
        verdicts = p.locator("#verdicts li").all_inner_texts()
        assert [v.replace(" vs bs=8k wal=8k ext4-4k", "") for v in verdicts] == [
            line.strip() for line in cli[2:4]
        ]
        assert p.locator("#check-lines li").count() >= 1
        assert p.locator("#what-changed tbody tr").count() > 0
        forest = p.evaluate("document.getElementById('forest').data[0].text")
        assert [t.split("   ")[1] for t in forest] == ["faster", "slower"]
        counts = p.evaluate(
            "['rounds-chart', 'round-changes-chart', 'spread-chart', 'timeline-chart',"
            " 'overlay-chart'].map(id => document.getElementById(id).data.length)"
        )
        assert counts == [3, 2, 3, 3, 2]  # round 4 of the reference failed: 2 lines
        latency = p.evaluate("document.getElementById('latency-chart').data.map(t => t.x[0])")
        assert latency == ["average"] * 3  # pgbench: the average only, and the page says so
        assert "No percentile" in p.locator("#latency-note").inner_text()
        spread = p.evaluate(
            "document.getElementById('spread-chart').data.map(t => [t.type, t.y.length])"
        )
        assert spread == [["box", 4], ["box", 3], ["box", 4]]  # every successful run a point
        dashed = p.evaluate(
            "document.getElementById('overlay-chart').layout.shapes"
            ".filter(s => s.type === 'line' && s.line.dash === 'dash').length"
        )
        assert dashed >= 2  # each run's checkpoint starts marked
        assert near_share(png_of(page, "#forest", "forest"), (0x1E, 0x7B, 0x34)) > 0.0002
        for chart in (
            "latency-chart",
            "rounds-chart",
            "round-changes-chart",
            "spread-chart",
            "timeline-chart",
            "overlay-chart",
        ):
            assert shot(page, f"#{chart}", chart) > 0.002, chart  # points and lines
        p.screenshot(path=str(shots / "experiment-answer.png"), full_page=True)
        page.check_clean()
    finally:
        page.ctx.close()


def _add_series(db: Any, run_id: int, rows: list[tuple[int, str, float, float]]) -> None:
    """Add (run_id, name, t_s, value) points to a stored run, as its own series."""
    from blocklab.store import series_packed

    series: dict[str, list[tuple[float, float | None]]] = {}
    for _, name, t, v in rows:
        series.setdefault(name, []).append((t, v))
    with db.tx() as c:
        c.executemany("INSERT INTO run_series VALUES (?,?,?,?)", series_packed.rows(run_id, series))


def _with_probe_series(results: Path, experiment: str) -> int:
    """Give one stored run the series the probes write on a plain directory: the shared
    host device, and counters whose exit flush is kept apart from the per-second line
    (blocklab.probes.derived.build_series). Returns the run's id."""
    from blocklab.store import ResultsDB

    with ResultsDB(results) as db:
        run_id = next(r["id"] for r in db.runs(experiment) if r["status"] == "ok")
        rows = [(run_id, "blks_hit_per_s", float(t), 50_000.0) for t in range(1, 60)]
        rows += [(run_id, "host_device_write_bytes_per_s", float(t), 3e6) for t in range(1, 61)]
        rows += [
            (run_id, "blks_hit_final_flush", 60.02, 31_000.0),
            (run_id, "wal_bytes_final_flush", 60.02, 1_234_000.0),
        ]
        _add_series(db, run_id, rows)
    return run_id


def test_run_page_states_the_final_flush_and_leaves_it_out_of_the_lines(
    tmp_path: Path, browser: Any, shots: Path
) -> None:
    results = tmp_path / "results"
    write_synthetic_results(results, name="flush", fs_block_sizes=(4096,), rounds=1)
    run_id = _with_probe_series(results, "flush")
    build_site(results, tmp_path / "site")
    page = Page(browser, shots)
    try:
        p = page.page
        p.goto((tmp_path / "site" / "e" / "flush" / "runs" / f"{run_id}.html").as_uri())
        page.ready()
        charts = p.evaluate(
            "Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => ({"
            " title: d.parentElement.querySelector('h3') ?"
            "   d.parentElement.querySelector('h3').textContent : '',"
            " traces: d.data.map(t => [t.name, Math.max(...t.x)]),"
            " notes: (d.layout.annotations || []).map(a => a.text) }))"
        )
        titles = [c["title"] for c in charts]
        assert not any("final_flush" in t for t in titles), titles  # no chart of its own
        # no line reaches the final flush's stamp (60.02 s): it is not a point of a line
        assert all(x < 60.01 for c in charts for _, x in c["traces"]), charts
        io = next(c for c in charts if c["title"].startswith("Device writes"))
        assert "host device (shared)" in [name for name, _ in io["traces"]]
        wal = next(c for c in charts if c["title"] == "WAL volume (MiB/s)")
        flushed = "WAL generated (pg_stat_wal) 1.18 MiB"  # 1,234,000 bytes
        assert any("final flush" in n and flushed in n for n in wal["notes"]), wal
        assert shot(page, "#chart-device-write", "chart-io-final-flush") > 0.02
        hits = next(c for c in charts if c["title"].startswith("Shared buffer hits"))
        assert any("final flush" in n and "buffer hits 31,000" in n for n in hits["notes"]), hits
        page.check_clean()
    finally:
        page.ctx.close()


def _with_zero_series(results: Path, experiment: str) -> int:
    """One stored run gets the counters a probe records, some of them zero throughout."""
    from blocklab.store import ResultsDB

    with ResultsDB(results) as db:
        run_id = next(r["id"] for r in db.runs(experiment) if r["status"] == "ok")
        rows = []
        for t in range(1, 61):
            for key, v in (
                ("wal_fpi_per_s", 300.0 + t),
                ("wal_records_per_s", 5000.0),
                ("checkpointer_write_bytes_per_s", 2e6 if 18 <= t < 28 else 0.0),
                ("n_tup_upd_per_s", 1200.0),
                ("n_tup_hot_upd_per_s", 1100.0),
                ("n_tup_newpage_upd_per_s", 0.0),
                ("bgwriter_write_bytes_per_s", 0.0),
                ("relation_extend_bytes_per_s", 0.0),
            ):
                rows.append((run_id, key, float(t), v))
        _add_series(db, run_id, rows)
    return run_id


def test_run_page_groups_series_in_panels_and_folds_the_zero_ones(
    tmp_path: Path, browser: Any, shots: Path
) -> None:
    results = tmp_path / "results"
    write_synthetic_results(
        results, name="panels", fs_block_sizes=(4096,), rounds=4, failed_run=False
    )
    run_id = _with_zero_series(results, "panels")
    build_site(results, tmp_path / "site")
    page = Page(browser, shots)
    try:
        p = page.page
        p.goto((tmp_path / "site" / "e" / "panels" / "runs" / f"{run_id}.html").as_uri())
        page.ready()
        heads = p.locator("section.series-panel > h2").all_text_contents()
        assert heads == [
            "Throughput and latency",
            "WAL",
            "Device I/O",
            "Buffers, background writer and checkpoints",
            "Tuples and HOT",
            "CPU and memory",
        ]
        wal = p.locator("#panel-wal h3").all_text_contents()
        assert wal == ["WAL volume (MiB/s)", "WAL records and full-page images (/s)"]
        assert p.locator("#chart-wal-records .main-svg").count() > 0
        names = p.evaluate("document.getElementById('chart-wal-records').data.map(t => t.name)")
        assert names == ["WAL records", "full-page images"]
        tuples = p.locator("#panel-tuples .zero").inner_text()
        assert tuples.startswith("zero throughout: updates onto a new page")
        buffers = p.locator("#panel-buffers .zero").inner_text()
        assert "background writer, relations extended" in buffers
        assert "checkpointer" not in buffers  # it wrote during the checkpoint: drawn
        title = p.locator("#panel-tuples h3").first.get_attribute("title")
        assert title == "columns: n_tup_upd_per_s, n_tup_hot_upd_per_s"
        raw = p.locator("#panel-tuples .zero details.raw-names")
        assert not raw.locator("code").first.is_visible()
        raw.locator("summary").click()
        assert raw.locator("code").all_text_contents() == ["n_tup_newpage_upd_per_s"]
        assert p.locator(".js-plotly-plot").count() == 10  # no chart of a zero series
        assert shot(page, "#panel-wal", "run-panel-wal") > 0.05
        p.screenshot(path=str(shots / "run-page.png"), full_page=True)
        p.goto((tmp_path / "site" / "index.html").as_uri())
        answer = p.locator("#experiments td.answer").inner_text()
        assert "vs bs=8k" in answer and re.search(r"[+-]\d+\.\d % \([+-]", answer)
        assert re.search(r"faster|slower|no difference detected", answer)
        p.screenshot(path=str(shots / "index.png"), full_page=True)
        page.check_clean()
    finally:
        page.ctx.close()


def test_a_later_runs_details_are_its_own_merged_with_its_variants(
    tmp_path: Path, page: Page
) -> None:
    """A run page holds what its details differ in from its variant's first run's (in
    details.js, pagedata.py): site.js shows the run's own port and timings, and all 399
    settings, from file://."""
    results = tmp_path / "results"
    write_synthetic_results(
        results, name="real", rounds=2, block_sizes_kb=(4, 8), fs_block_sizes=(4096,),
        real_details=True,
    )  # fmt: skip
    build_site(results, tmp_path / "site")
    with ResultsDB(results, create=False) as db:
        later = max(db.runs("real"), key=lambda r: r["id"])
    settings = json.loads(later["settings_json"])
    phases = json.loads(later["provenance_json"])["phases_s"]
    p = page.page
    p.goto((tmp_path / "site" / "e" / "real" / "runs" / f"{later['id']}.html").as_uri())
    page.ready()
    summaries = p.locator("#run-details summary").all_text_contents()
    assert summaries[2] == "settings (399)", summaries
    p.locator("#run-details summary", has_text="settings").click()
    shown = json.loads(p.locator("#run-details details >> nth=2 >> pre").inner_text())
    base_port = first_port(results, later["variant_id"])
    assert shown == settings and shown["port"]["setting"] != base_port  # its own port
    provenance = json.loads(p.locator("#run-details details[open] pre").first.inner_text())
    assert provenance["phases_s"] == phases and "collected" in provenance
    page.check_clean()


def first_port(results: Path, variant_id: str) -> str:
    """The port of the run whose details are its variant's base (the least id)."""
    with ResultsDB(results, create=False) as db:
        first = min(db.runs("real", variant_id), key=lambda r: r["id"])
    return str(json.loads(first["settings_json"])["port"]["setting"])

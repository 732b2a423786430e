"""The experiment page's answer is the CLI's: the same lines, the same numbers in the same
form, the same verdicts and the same "what changed" (blocklab.report.answer, .plots)."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from pathlib import Path

import pytest
from report_fixture import write_synthetic_results

from blocklab.analysis import changed_metrics, first_screen, stats
from blocklab.analysis.metrics import metric_info
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import DESIGN_ANALYSIS, INTERLEAVED_CHECKPOINT, gain_text
from blocklab.report import answer, build_site, plots, shape
from blocklab.report.data import RunView, load_experiment
from blocklab.report.explain import changed_cells
from blocklab.store import RESULTS_DB_NAME, ResultsDB
from blocklab.workloads.execution import DRIVER_DIR
from blocklab.workloads.pgbench_driver import LOG_NAME, PgbenchDriver

NAME = "one-dim"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("answer") / "results"
    write_synthetic_results(path, name=NAME, fs_block_sizes=(4096,), rounds=4)
    return path


def _comparison(ratio: float, low: float, high: float, verdict: str) -> stats.Comparison:
    return stats.Comparison(5, stats.RATIO, ratio, low, high, 0.2, verdict, 8.0)


def test_a_ratio_reads_as_the_cli_prints_it_not_as_a_ratio() -> None:
    c = _comparison(1.045, 0.966, 1.130, stats.UNDECIDED)
    assert shape.vs_reference(c, "transactions/s") == "+4.5 % (-3.4 to +13.0)"
    assert shape.vs_reference(c, "") == gain_text(c, "")  # one function, not two


def test_the_page_holds_the_cli_first_screen_line_for_line(results: Path) -> None:
    with ResultsDB(results, create=False) as db:
        s = summarize_experiment(db, NAME)
    got = answer.answer_json(s, {1: ["a", "b"]}, 4)
    cli = first_screen.first_screen(s)
    assert got["heading"] == cli[0]
    for v in got["verdicts"]:
        assert f"  {v['label']}: {v['text']}" in cli  # one reference: not named per line
    assert [f"  {line}" for line in got["checks"]] == cli[cli.index("checks:") + 1 :]
    assert got["design"]["kind"] == "paired" and got["design"]["planned"] == 4
    assert got["design"]["equivalence_pct"] == stats.EQUIVALENCE_PCT
    words = {v["word"] for v in got["verdicts"]}
    assert words == {"faster", "slower"}  # the fixture: 4 kB faster, 16 kB slower


def test_the_interleaved_caveat_is_on_the_page(results: Path) -> None:
    with ResultsDB(results, create=False) as db:
        s = summarize_experiment(db, NAME, side=False)
    s.design = "interleaved"
    s.checkpoint = "aligned"
    caveats = answer.answer_json(s, {}, None)["caveats"]
    assert caveats[0] == (
        "design interleaved: "
        + DESIGN_ANALYSIS["interleaved"]
        + "; "
        + INTERLEAVED_CHECKPOINT["aligned"]
    )
    assert '"free"' not in caveats[0]  # only the experiment's own checkpoint mode


def test_forest_rows_are_the_verdicts_numbers(results: Path) -> None:
    with ResultsDB(results, create=False) as db:
        s = summarize_experiment(db, NAME, side=False)
    rows = answer.forest_rows(s)["rows"]
    compared = [v for v in s.variants if not v.is_reference]
    assert len(rows) == len(compared) == 2
    for row, v in zip(rows, compared, strict=True):
        c = v.comparison
        assert c is not None and c.ci95_low is not None and c.ci95_high is not None
        assert row["text"] == gain_text(c, s.info.unit)
        assert row["pct"] == pytest.approx((c.estimate - 1) * 100)
        assert (row["lo"], row["hi"]) == pytest.approx(
            ((c.ci95_low - 1) * 100, (c.ci95_high - 1) * 100)
        )
        assert row["lo"] < row["pct"] < row["hi"]


def test_what_changed_is_the_cli_selection(results: Path) -> None:
    """The page's table from its own statistics equals changed_metrics.find's lines."""
    with ResultsDB(results, create=False) as db:
        cli = changed_metrics.find(db, NAME)
        exp = load_experiment(db, NAME)
    page = answer.changed_from_cells(changed_cells(exp))
    assert page.tested == cli.tested > 0
    assert changed_metrics.lines(page) == changed_metrics.lines(cli)
    rows = answer.changed_rows(page)["rows"]
    assert rows and all(r["metric"] == metric_info(r["key"]).label for r in rows)
    assert not any(r["metric"] == r["key"] for r in rows)  # words, not raw names


def test_the_tables_verdicts_use_the_experiments_margin(results: Path, tmp_path: Path) -> None:
    wide = tmp_path / "results"
    write_synthetic_results(wide, name=NAME, fs_block_sizes=(4096,), rounds=4)
    with sqlite3.connect(wide / RESULTS_DB_NAME) as con:
        spec = json.loads(con.execute("SELECT spec_json FROM experiments").fetchone()[0])
        con.execute(
            "UPDATE experiments SET spec_json = ?", (json.dumps(spec | {"equivalence_pct": 50}),)
        )
    with ResultsDB(wide, create=False) as db:
        s = summarize_experiment(db, NAME, side=False)
        exp = load_experiment(db, NAME)
    cli = {v.label: v.verdict for v in s.variants if not v.is_reference}
    page = {v.label: v.cells["tps"].verdict for v in exp.variants if not v.is_reference}
    assert page == cli
    assert any("within ±50 %" in w for w in page.values())


def test_per_round_change_is_each_rounds_ratio() -> None:
    ref = {1: 100.0, 2: 200.0, 3: 0.0, 5: 50.0}
    mine = {1: 110.0, 2: 190.0, 3: 7.0, 4: 1.0}
    assert plots.per_round_change(ref, mine) == [[1, pytest.approx(10.0)], [2, pytest.approx(-5.0)]]


def _run(
    i: int, variant: str, status: str = "ok", start: str = "", tps: float | None = 1.0
) -> RunView:
    return RunView(i, variant, i, 0, status, "", start, "", tps, None, "", "", 0, {})


def test_runs_in_start_order_without_failures_and_dates_the_chart_reads() -> None:
    runs = [
        _run(1, "a", start="2025-03-01T12:05:00.250+00:00"),
        _run(2, "b", start="2025-03-01T12:00:00Z"),
        _run(3, "a", status="failed", start="2025-03-01T12:01:00Z", tps=None),
    ]
    got = plots.runs_json(runs, {"a": "A", "b": "B"})
    assert [(r["id"], r["label"], r["start"]) for r in got] == [
        (2, "B", "2025-03-01 12:00:00"),
        (1, "A", "2025-03-01 12:05:00.250"),
    ]
    assert got[0]["href"] == "runs/2.html"


def test_overlay_only_for_a_few_variants_and_the_last_rounds() -> None:
    runs = [_run(i, "a") for i in range(1, 41)]
    assert plots.overlay_rounds(runs, plots.MAX_OVERLAY_VARIANTS + 1) == []
    assert plots.overlay_rounds(runs, 2) == list(range(11, 41))
    cps = {5: [{"start_s": 3.0, "end_s": None, "kind": "time"}]}
    got = plots.overlay_json(runs[4:5], {"a": "A"}, {5: [(0.0, 9.0), (1.0, None)]}, cps)
    assert got["order"] == ["5"]
    assert got["rounds"]["5"] == [
        {
            "id": 5,
            "label": "A",
            "t": [0, 1],
            "v": [9.0, None],
            "checkpoints": [{"start": 3.0, "end": None, "kind": "time"}],
        }
    ]


def test_the_experiment_page_states_design_verdicts_and_what_changed(
    results: Path, tmp_path: Path
) -> None:
    build_site(results, tmp_path / "site")
    page = html.unescape((tmp_path / "site" / "e" / NAME / "index.html").read_text())
    with ResultsDB(results, create=False) as db:
        s = summarize_experiment(db, NAME)
    for line in first_screen.first_screen(s)[1:]:
        if line.endswith(":"):
            continue  # the section headings are the page's own
        assert line.strip().split(": ", 1)[-1] in page, line
    assert 'id="design-kind"><b>paired</b>' in page
    assert "within ±2 %" in page and 'id="what-changed"' in page
    assert not re.search(r"\d\.\d{3} \(", page)  # no ratio "1.045 (0.966 – 1.130)" anywhere


def test_latency_draws_what_the_driver_stored_and_says_when_no_percentile_exists() -> None:
    pgbench = [_run(1, "a"), _run(2, "b")]
    pgbench[0].latency_avg_ms, pgbench[1].latency_avg_ms = 3.0, 4.0
    got = plots.latency_json(pgbench, {"a": "A", "b": "B"})
    assert got["stats"] == ["average"] and got["percentiles"] is False
    assert got["variants"] == [
        {"label": "A", "x": ["average"], "y": [3.0]},
        {"label": "B", "x": ["average"], "y": [4.0]},
    ]
    sysbench = _run(3, "a")
    sysbench.latency_avg_ms = 2.0
    sysbench.metrics = {"latency_max_ms": 40.0, "latency_p95_ms": 9.0, "qps": 1.0}
    tpcc = _run(4, "b", status="failed")
    tpcc.metrics = {"new_order_latency_p95_ms": 7.0}  # failed: a statistic, not a value
    got = plots.latency_json([sysbench, tpcc], {"a": "A", "b": "B"})
    assert got["stats"] == ["average", "p95", "max", "new order p95"]
    assert got["percentiles"] is True
    assert got["variants"] == [
        {"label": "A", "x": ["average", "p95", "max"], "y": [2.0, 9.0, 40.0]}
    ]


def test_the_latency_panel_draws_pgbench_percentiles_from_its_transaction_log(
    tmp_path: Path,
) -> None:
    """pgbench's record from a recorded real per-transaction log (tests/data/pgbench):
    the panel shows its average, p50, p95 and p99 in that order, as stored."""
    data = Path(__file__).parents[1] / "data" / "pgbench"
    stem = "pg18-translog-simple-update"
    logs = tmp_path / DRIVER_DIR
    logs.mkdir()
    for i, src in enumerate(sorted(data.glob(f"{stem}.log*"))):
        (logs / f"{LOG_NAME}.77.{i}").write_text(src.read_text())
    driver = PgbenchDriver()
    stdout, stderr = ((data / f"{stem}.{x}").read_text() for x in ("stdout", "stderr"))
    result = driver.parse(stdout, stderr)
    run = _run(1, "a")
    run.latency_avg_ms = result.latency_avg_ms
    run.metrics = dict(driver.record(result, stderr, tmp_path).metrics)
    got = plots.latency_json([run], {"a": "A"})
    assert got["stats"] == ["average", "p50", "p95", "p99"] and got["percentiles"] is True
    [variant] = got["variants"]
    assert variant["x"] == got["stats"]
    assert variant["y"] == [
        run.latency_avg_ms,
        *(run.metrics[f"latency_p{q}_ms"] for q in (50, 95, 99)),
    ]
    assert None not in variant["y"] and variant["y"][1] < variant["y"][2] < variant["y"][3]

"""summary = report = rounds.csv: one per-round reduction (blocklab.analysis.rounds) on a
SYNTHETIC abba results database with a half palindrome (one copy failed), a zero copy
and a carry-over penalty. Every number is made up."""

from __future__ import annotations

import csv
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from report_fixture import SYNTHETIC, write_synthetic_results

from blocklab.analysis import round_table
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import verdict_lines
from blocklab.cli import main
from blocklab.report import build_site, data, manifest, site
from blocklab.report.pagedata import experiment_json
from blocklab.report.writer import Writer
from blocklab.store import ResultsDB, RunRecord

NAME = "synthetic-abba"
ROUNDS = 6
WAL = "wal_bytes_per_xact"
STORM = "4k8wext41024"  # the synthetic variant whose full-page images decay
PAIRED = "synthetic-geometry"


def _write(results: Path) -> None:
    rng = random.Random(11)
    variants = [
        (vid, f"bs={vid}", f'{{"label": "bs={vid}"}}', {"block_size_kb": int(vid[:-1])})
        for vid in ("8k", "4k")
    ]
    with ResultsDB(results) as db:
        db.upsert_experiment(
            NAME,
            description=f"{SYNTHETIC}: abba",
            spec={"name": NAME, "design": {"kind": "abba"}},
            seed=1,
            reference="8k",
            created_at="2025-03-01T12:00:00+00:00",
            host={"hostname": "synthetic-host"},
            variants=variants,
        )
        for rnd in range(1, ROUNDS + 1):
            order = ["8k", "4k", "4k", "8k"] if rnd % 2 else ["4k", "8k", "8k", "4k"]
            db.record_round(NAME, rnd, rnd, order)
            seen: dict[str, int] = {}
            for pos, vid in enumerate(order):
                copy = seen[vid] = seen.get(vid, -1) + 1
                switch = pos > 0 and order[pos - 1] != vid
                tps = (1000 if vid == "8k" else 1080) * rng.gauss(1, 0.01) * (0.9 if switch else 1)
                rec = RunRecord(
                    experiment=NAME, variant_id=vid, round=rnd, position=pos, status="ok",
                    started_at=f"2025-03-01T12:{rnd:02d}:{pos:02d}+00:00",
                    ended_at=f"2025-03-01T12:{rnd:02d}:{pos:02d}+00:00",
                    tps=round(tps, 3), latency_avg_ms=round(4000 / tps, 3), copy_index=copy,
                    metrics={WAL: 0.0 if (rnd, vid, copy) == (2, "4k", 1) else 700.0 + pos},
                )  # fmt: skip
                if (rnd, vid, copy) == (3, "4k", 1):
                    rec.status, rec.reason, rec.tps, rec.metrics = "failed", "SYNTHETIC", None, {}
                db.record_run(rec)
        db.set_experiment_state(NAME, "done", "rounds reached")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = tmp_path_factory.mktemp("abba")
    _write(res)
    return res


def _csv_rounds(results: Path, tmp: Path) -> dict[tuple[str, str], dict[int, str]]:
    assert main(["export", "--csv", str(tmp), "--results", str(results)]) == 0
    out: dict[tuple[str, str], dict[int, str]] = {}
    with open(tmp / "rounds.csv", newline="") as f:
        for row in csv.DictReader(f):
            out.setdefault((row["variant_id"], row["metric"]), {})[int(row["round"])] = (
                row["value"] or row["left_out"]
            )
    return out


@pytest.mark.parametrize("metric", ["tps", WAL])
def test_summary_report_and_csv_keep_the_same_rounds(
    results: Path, tmp_path: Path, metric: str
) -> None:
    with ResultsDB(results, create=False) as db:
        summary = summarize_experiment(db, NAME, metric)
        view = data.load_experiment(db, NAME)
    rows = _csv_rounds(results, tmp_path)
    for v in summary.variants:
        got = data.round_values(view.runs, v.variant_id, metric, "abba", is_reference=False)
        assert got.values == pytest.approx(v.values)
        assert got.dropped == v.dropped
        csv_values = {r: float(x) for r, x in rows[(v.variant_id, metric)].items() if r in v.values}
        assert csv_values == pytest.approx(v.values)
        cell = view.variant(v.variant_id).cells[metric]
        assert cell.summary.n == len(v.values)
    four = next(v for v in summary.variants if v.variant_id == "4k")
    assert sorted(four.values) == [1, 2, 4, 5, 6]  # round 3 is half a palindrome
    assert four.dropped[3].startswith("half a palindrome")
    assert rows[("4k", metric)][3].startswith("half a palindrome")
    if metric == WAL:  # the zero copy: the mean of 0 and the other copy, kept
        assert four.values[2] == pytest.approx((700.0 + 0.0) / 2)  # B A A B: copy 0 first
        ref = next(v for v in summary.variants if v.variant_id == "8k")
        assert ref.values[3] > 0 and 3 not in four.values


@pytest.mark.parametrize("metric", ["tps", WAL])
def test_a_summary_without_its_checks_has_the_same_rows(results: Path, metric: str) -> None:
    """checks=False (a side metric's summary) leaves out the experiment-wide checks and
    each variant's own summary and latency, not a number of the rows' comparisons."""
    with ResultsDB(results, create=False) as db:
        whole = summarize_experiment(db, NAME, metric, side=False)
        rows = summarize_experiment(db, NAME, metric, side=False, checks=False)
    assert [replace(v, latency_avg_ms=None, summary=None) for v in whole.variants] == rows.variants
    assert rows.variants and all(v.latency_avg_ms is not None for v in whole.variants)
    assert all(v.summary is not None for v in whole.variants)
    assert whole.carryover is not None and whole.setting
    assert rows.carryover is None and rows.setting == "" and rows.layout is None


def test_carryover_is_found_in_the_summary_and_the_report(results: Path, tmp_path: Path) -> None:
    with ResultsDB(results, create=False) as db:
        summary = summarize_experiment(db, NAME)
        view = data.load_experiment(db, NAME)
    data.take_checks(view, summary)  # as the site's page takes them
    c = summary.carryover
    assert c is not None and c.comparison is not None and c.detected
    assert c.comparison.ratio == pytest.approx(0.90, abs=0.02)
    lines = verdict_lines(summary)
    assert any(line.startswith("runs right after a switch were") for line in lines)
    page = experiment_json(view)
    assert page["design"] == "abba" and page["aa"] is None
    assert page["carryover"]["flagged"] is True
    assert page["carryover"]["ratio"] == pytest.approx(c.comparison.ratio, rel=1e-5)
    assert page["carryover"]["text"] == lines[-1]
    # the site's page takes it from the summary it makes (its views leave it out)
    html = (build_site(results, tmp_path / "site").out / "e" / view.slug / "index.html").read_text()
    assert f'<p id="carryover" class="bad">{lines[-1]}</p>' in html


def test_the_summary_prints_the_half_palindrome_and_the_carryover(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", NAME, "--results", str(results)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "runs right after a switch were" in out
    assert "compare with A B B A or a longer warm-up" in out
    assert "bs=4k: round 3: half a palindrome, left out" in out


def _results(kind: str, abba: Path, tmp_path: Path) -> tuple[Path, str]:
    if kind == "abba":
        return abba, NAME
    return write_synthetic_results(tmp_path / "paired", rounds=3, fpi_storm=STORM), PAIRED


@pytest.mark.parametrize("kind", ["abba", "paired"])
def test_the_site_s_rounds_csv_is_export_s(results: Path, tmp_path: Path, kind: str) -> None:
    """The report's rounds.csv (data.variant_round_rows, from the reductions its cells made) is
    byte for byte `blocklab export --csv`'s (round_table.round_rows, from the store): an
    abba design with half a palindrome and a zero copy, and a paired one with a failed
    run and series-only metrics."""
    results, name = _results(kind, results, tmp_path)
    site = build_site(results, tmp_path / "site")
    assert main(["export", "--csv", str(tmp_path / "csv"), "--results", str(results)]) == 0
    exported = (tmp_path / "csv" / "rounds.csv").read_text()
    assert (site.out / "e" / data.slug(name) / "rounds.csv").read_text() == exported
    left_out = "half a palindrome" if kind == "abba" else "SYNTHETIC failure"
    assert exported.count("\n") > 10 and left_out in exported


@pytest.mark.parametrize("kind", ["abba", "paired"])
def test_rounds_csv_reduces_nothing_the_cells_reduced(
    results: Path, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stored metric's per-round values were reduced for the page's cells; rounds.csv
    reuses them (at 10,000 runs, reducing them again took an update 0.5 s)."""
    results, name = _results(kind, results, tmp_path)
    with ResultsDB(results, create=False) as db:
        view = data.load_experiment(db, name)
        assert view.reduced
        calls: list[str] = []
        for module in (data, round_table):
            reduce = module.per_round_values

            def counted(design: str, runs: Any, *, is_reference: bool, reduce: Any = reduce) -> Any:
                calls.append(design)
                return reduce(design, runs, is_reference=is_reference)

            monkeypatch.setattr(module, "per_round_values", counted)
        site.write_rounds_csv(Writer(tmp_path, manifest.Manifest("test")), db, view)
    assert calls == []
    assert (tmp_path / "e" / view.slug / "rounds.csv").stat().st_size > 0

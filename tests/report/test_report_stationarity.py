"""The experiment page says which variant's measured windows drifted, with the sentence
the summary prints after "! stationarity: " (blocklab.analysis.stationarity.notes): on
SYNTHETIC results where one variant's full-page images/s decay through every run
(tests/report_fixture.py)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.analysis import stationarity
from blocklab.analysis.summary import summarize_experiment
from blocklab.report import build_site
from blocklab.store import ResultsDB

NAME = "synthetic-geometry"
STORM = "4k8wext41024"  # bs=4k, fs blocks of 1 kB


def _notes(db: ResultsDB) -> list[str]:
    """The drift sentences by a second route (the oracle): every ok run's series judged
    by stationarity.notes, runs grouped by their variant's label."""
    labels = {v["variant_id"]: v["label"] or v["variant_id"] for v in db.variants(NAME)}
    ids_of: dict[str, list[int]] = {label: [] for label in labels.values()}
    for r in db.runs(NAME):
        if r["status"] == "ok":
            ids_of[labels[r["variant_id"]]].append(int(r["id"]))
    names = list(stationarity.SERIES)
    series = dict(db.series_of_runs([i for ids in ids_of.values() for i in ids], names=names))
    return stationarity.notes({label: [series[i] for i in ids] for label, ids in ids_of.items()})


def _results(tmp_path: Path, storm: str) -> Path:
    return write_synthetic_results(
        tmp_path / "results", block_sizes_kb=(4, 8), fs_block_sizes=(1024,), fpi_storm=storm
    )


def test_the_experiment_page_carries_the_drift_sentence(tmp_path: Path) -> None:
    results = _results(tmp_path, STORM)
    with ResultsDB(results, create=False) as db:
        notes = _notes(db)
        summary = summarize_experiment(db, NAME, "tps")
        label = next(v["label"] for v in db.variants(NAME) if v["variant_id"] == STORM)
    fpi = [n for n in notes if n.startswith("full-page images/s")]
    # 3 rounds, the second variant's last run failed: the storm variant ran 3 times ok
    finding = "! stationarity: full-page images/s"
    assert fpi == [
        n.removeprefix("! stationarity: ") for n in summary.stationarity if n.startswith(finding)
    ]
    assert len(fpi) == 1 and f"in 3 of 3 runs of {label}: " in fpi[0]
    # 2,000/s x 0.95^t over 60 s: 2,000 -> 92/s
    assert fpi[0].startswith(
        "full-page images/s fell 95 % inside the measured window (from about 1,997/s to 94.5/s)"
    )
    assert 'checkpoint = "cycles"' in fpi[0]
    build_site(results, tmp_path / "site")
    page = (tmp_path / "site" / "e" / NAME / "index.html").read_text()
    data = json.loads(re.search(r'id="page-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert data["stationarity"] == notes
    section = re.search(r'<section id="stationarity-section">(.*?)</section>', page, re.S)
    assert section is not None
    assert fpi[0] in html.unescape(section.group(1))
    assert stationarity.RULE in html.unescape(section.group(1))


def test_no_drift_no_section(tmp_path: Path) -> None:
    results = write_synthetic_results(tmp_path / "results")  # no image series, no storm
    with ResultsDB(results, create=False) as db:
        assert _notes(db) == []
    build_site(results, tmp_path / "site")
    page = (tmp_path / "site" / "e" / NAME / "index.html").read_text()
    assert 'id="stationarity-section"' not in page
    data = json.loads(re.search(r'id="page-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert data["stationarity"] == []


def _count_judged(monkeypatch: Any, log: Path) -> Callable[[], int]:
    """Count the runs whose series stationarity.runs_trends judges (run_trends too judges
    through it), in this process and in the processes it forks (the site's summary is
    made in one: report.parallel.begun), by a line each in `log`."""
    judge = stationarity.runs_trends

    def counted(runs: Any) -> Any:
        with open(log, "a") as f:
            f.write("run\n" * len(runs))
        return judge(runs)

    monkeypatch.setattr(stationarity, "runs_trends", counted)
    return lambda: len(log.read_text().splitlines()) if log.exists() else 0


def test_the_site_judges_each_run_s_series_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The page's drift notes come from the summary's lines (report.data.drift_notes), not
    from a second trend test of every run (issue 33: at 10,000 runs the report judged each
    run's series twice, half of its serial time); the page still says what it said."""
    results = _results(tmp_path, STORM)
    with ResultsDB(results, create=False) as db:
        expected = _notes(db)
        ok_runs = sum(1 for r in db.runs(NAME) if r["status"] == "ok")
    calls = _count_judged(monkeypatch, tmp_path / "judged")
    build_site(results, tmp_path / "site")
    assert calls() == ok_runs
    page = (tmp_path / "site" / "e" / NAME / "index.html").read_text()
    data = json.loads(re.search(r'id="page-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert data["stationarity"] == expected and expected


def test_an_update_judges_only_the_new_run(tmp_path: Path, monkeypatch: Any) -> None:
    """Each run's trends are kept in the results store once judged
    (blocklab.analysis.kept_trends): one more run's update judges that run alone, and says
    what a full rebuild (which judges every run again) says."""
    results = _results(tmp_path, STORM)
    build_site(results, tmp_path / "site")
    add_synthetic_run(results, NAME)
    calls = _count_judged(monkeypatch, tmp_path / "judged")
    build_site(results, tmp_path / "site")
    assert calls() == 1
    build_site(results, tmp_path / "full", full=True)
    with ResultsDB(results, create=False) as db:
        assert calls() == 1 + sum(1 for r in db.runs(NAME) if r["status"] == "ok")
    for page in ("index.html", f"e/{NAME}/index.html", f"e/{NAME}/rounds.csv"):
        assert (tmp_path / "site" / page).read_bytes() == (tmp_path / "full" / page).read_bytes()

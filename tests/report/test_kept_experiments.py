"""An experiment whose stored rows did not change keeps its files whole on an update
(blocklab.report.kept_experiments): its summary is not made, the site equals a full
build, and a record or a file that does not hold is made again. SYNTHETIC data
(tests/report_fixture.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, differing_files, write_synthetic_results

from blocklab.report import build_site, explain, parallel
from blocklab.report.manifest import MANIFEST

STORE = Path(__file__).parents[2] / "blocklab" / "store"


@pytest.fixture
def two(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    write_synthetic_results(res, name="first", rounds=3, seconds=10)
    write_synthetic_results(res, name="second", rounds=3, seconds=10, seed=3)
    return res


@pytest.fixture
def summaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The experiments whose summary a build made: "given:<name>" for those handed to the
    summaries' process (forked in an update: seen here through what it was given),
    "<name>" for those made in this process alone."""
    made: list[str] = []
    real = explain.summary_for

    def counted(db: Any, name: str, *args: Any, **kw: Any) -> Any:
        made.append(name)
        return real(db, name, *args, **kw)

    real_begun = parallel.begun

    def begun(fn: Any, **kw: Any) -> Any:
        made.extend(f"given:{name}" for name, _ in fn.__self__.todo)  # Summaries.make
        made.append("begun")
        return real_begun(fn, **kw)

    monkeypatch.setattr(explain, "summary_for", counted)
    monkeypatch.setattr(parallel, "begun", begun)
    return made


def _given(made: list[str]) -> list[str]:
    return sorted(n.removeprefix("given:") for n in made if n.startswith("given:"))


def _alone(made: list[str]) -> list[str]:
    """Made in this process outside the summaries' process (an update's fallback)."""
    after = made[made.index("begun") + 1 :] if "begun" in made else made
    return [n for n in after if not n.startswith("given:")]


def test_an_update_keeps_the_unchanged_experiment_and_equals_a_full_build(
    two: Path, tmp_path: Path, summaries: list[str]
) -> None:
    out = tmp_path / "site"
    build_site(two, out)
    assert _given(summaries) == ["first", "second"]

    summaries.clear()
    add_synthetic_run(two, "first", seconds=10)
    r = build_site(two, out)
    assert _given(summaries) == ["first"] and _alone(summaries) == []
    second = json.loads((out / MANIFEST).read_text())["kept_experiments"]["second"]
    assert "e/second/index.html" in second["files"] and second["answer"][0]
    assert r.kept > 0

    full = build_site(two, tmp_path / "full", full=True)
    assert differing_files(out, full.out) == []

    summaries.clear()
    build_site(two, out)  # nothing new: no summary made
    assert _given(summaries) == [] and _alone(summaries) == []

    # one more run in a round already recorded: only the runs changed
    summaries.clear()
    add_synthetic_run(two, "first", seconds=10, same_round=True)
    build_site(two, out)
    assert _given(summaries) == ["first"]
    assert differing_files(out, build_site(two, tmp_path / "full", full=True).out) == []


@pytest.mark.parametrize(
    "breaks",
    [
        lambda out, rec: (out / "e/second/runs.csv").unlink(),
        lambda out, rec: (out / "e/second/runs" / next(iter(_run_pages(out)))).unlink(),
        lambda out, rec: rec["second"].update(answer=[[[1, "x", "y"]], "", ""]),
        lambda out, rec: rec["second"].pop("drift"),
        lambda out, rec: rec["second"].update(digest="0" * 32),
    ],
    ids=["a file gone", "a run page gone", "an answer not text", "a field gone", "other rows"],
)
def test_a_kept_experiment_whose_files_or_record_do_not_hold_is_made_again(
    two: Path, tmp_path: Path, breaks: Any, summaries: list[str]
) -> None:
    out = tmp_path / "site"
    build_site(two, out)
    body = json.loads((out / MANIFEST).read_text())
    breaks(out, body["kept_experiments"])
    (out / MANIFEST).write_text(json.dumps(body))
    summaries.clear()
    add_synthetic_run(two, "first", seconds=10)
    build_site(two, out)
    assert "second" in _given(summaries) + _alone(summaries)
    assert differing_files(out, build_site(two, tmp_path / "full", full=True).out) == []


def _run_pages(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "e/second/runs").glob("*.html"))


def test_the_store_never_rewrites_a_run_after_recording_it() -> None:
    """experiment_digest stands a run by its id: the store's SQL inserts a run's rows
    and never updates, replaces or deletes them alone (an experiment's removal cascades)."""
    tables = ("runs", "metrics", "checkpoints", "run_queries")
    text = "\n".join(p.read_text() for p in sorted(STORE.glob("*.py")))
    for table in tables:
        writes = re.findall(
            rf"(UPDATE|DELETE FROM|REPLACE INTO|INSERT OR REPLACE INTO)\s+{table}\b", text
        )
        assert writes == [], (table, writes)
    assert re.search(r"INSERT INTO runs \(", text)  # the check looks at the right code

"""runs.csv made by parts, a part a round (blocklab.report.csv_parts): byte for byte
`blocklab export --csv`'s, after a full build and after updates; an update makes only the
parts whose rounds changed, and copies nothing from a file that is not the one its
manifest recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.cli import main
from blocklab.report import build_site, csv_parts, data
from blocklab.report.manifest import MANIFEST
from blocklab.store import export

NAME = "synthetic-geometry"
REL = f"e/{NAME}/runs.csv"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    # a failed run among them (its reason in a column, no metrics)
    return write_synthetic_results(tmp_path / "results", rounds=4, seconds=10)


def _exported(results: Path, out: Path) -> str:
    assert main(["export", "--csv", str(out), "--results", str(results)]) == 0
    return (out / "runs.csv").read_text()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The rounds each export.run_rows call was asked for."""
    asked: list[Any] = []
    real = export.run_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("rounds"))
        return real(*args, **kwargs)

    monkeypatch.setattr(export, "run_rows", counted)
    return asked


def test_runs_csv_is_export_s_and_an_update_makes_only_the_new_round(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "site"
    asked = _counting(monkeypatch)
    build_site(results, out)
    assert asked == [{1, 2, 3, 4}]  # every round's part made, in one pass
    assert (out / REL).read_text() == _exported(results, tmp_path / "csv0")

    asked.clear()
    build_site(results, out)  # nothing new: the experiment kept whole
    assert asked == []

    add_synthetic_run(results, NAME, seconds=10)  # a fifth round
    asked.clear()
    build_site(results, out)
    assert asked == [{5}]
    assert (out / REL).read_text() == _exported(results, tmp_path / "csv1")

    add_synthetic_run(results, NAME, seconds=10, same_round=True)  # the fifth again
    asked.clear()
    build_site(results, out)
    assert asked == [{5}]
    text = (out / REL).read_text()
    assert text == _exported(results, tmp_path / "csv2") and text.count("\n") > 10
    full = build_site(results, tmp_path / "full", full=True)
    assert (full.out / REL).read_text() == text
    assert (out / MANIFEST).read_text() == (full.out / MANIFEST).read_text()


def test_nothing_is_copied_from_a_file_changed_since_or_a_record_that_does_not_fit(
    results: Path, tmp_path: Path
) -> None:
    db = data.open_results(results)
    try:
        text, record = csv_parts.runs_csv(db, NAME, None, None, None)
        assert len(record["parts"]) == 4
        assert csv_parts.runs_csv(db, NAME, None, record, text) == (text, record)
        # the same length, changed in a part that would be copied
        at = text.index(",ok,")
        tampered = f"{text[:at]},OK,{text[at + 4 :]}"
        assert len(tampered) == len(text) and tampered != text
        assert csv_parts.runs_csv(db, NAME, None, record, tampered)[0] == text
        wrong = {**record, "parts": {k: [0, 10**9] for k in record["parts"]}}
        assert csv_parts.runs_csv(db, NAME, None, wrong, text)[0] == text
        # a file whose parts are places in another text: the digest tells them apart
        shifted = {**record, "parts": {k: [a + 1, b + 1] for k, (a, b) in record["parts"].items()}}
        assert csv_parts.runs_csv(db, NAME, None, shifted, " " + text)[0] == text
    finally:
        db.close()


def test_the_columns_found_without_the_rows_are_the_rows_own(tmp_path: Path) -> None:
    """export.run_columns (the header of a file made by parts) is what the rows give,
    with a failed run (no metrics) among them and for a store without runs."""
    results = write_synthetic_results(tmp_path / "results", rounds=2, seconds=10)
    db = data.open_results(results)
    try:
        rows = list(export.run_rows(db, NAME))
        assert any(r["status"] != "ok" for r in rows)
        assert export.run_columns(db, NAME) == export.csv_columns(
            {k for r in rows for k in r}, export.RUN_FIELDS
        )
    finally:
        db.close()

"""A variant's runs on more than one build or dataset (analysis/mixed_inputs.py): named in
the summary's checks and beside the verdicts it touches, from the stored provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report_fixture import write_synthetic_results

from blocklab.analysis import first_screen, mixed_inputs
from blocklab.analysis.summary import summarize_experiment
from blocklab.report import answer
from blocklab.store import ResultsDB

LABELS = {"v4": "bs=4k", "v8": "bs=8k"}


def _prov(build: str | None, dataset: str | None = "d1") -> dict[str, Any]:
    prov: dict[str, Any] = {"version": "18.1"}
    if build is not None:
        prov["build_key"] = build
    if dataset is not None:
        prov["dataset"] = {"key": dataset, "scale": 1}
    return prov


def test_one_build_and_one_dataset_a_variant_says_nothing() -> None:
    runs = [("v4", _prov("b4")), ("v4", _prov("b4")), ("v8", _prov("b8", "d2"))]
    assert mixed_inputs.find(LABELS, runs) == []


def test_two_builds_are_named_with_their_runs_most_first() -> None:
    runs = [("v8", _prov("b8"))] + [("v4", _prov("old", "d1"))] * 3
    runs += [("v4", _prov("new", "d9"))] * 5
    (m,) = mixed_inputs.find(LABELS, runs)
    assert (m.variant_id, m.label, m.what, m.runs) == (
        "v4",
        "bs=4k",
        "builds",
        {"new": 5, "old": 3},
    )
    assert m.line() == (  # a build's dataset differs too: only the builds are named
        "! bs=4k: its 8 runs came from 2 builds (new: 5, old: 3); its comparisons pool "
        "them: rerun it as a new experiment"
    )


def test_one_build_two_datasets_and_runs_that_name_neither() -> None:
    runs = [("v8", _prov("b8", "d1")), ("v8", _prov("b8", "d2")), ("v8", _prov("b8", None))]
    runs += [("v4", _prov(None, None)), ("v4", {"dataset": "not a mapping"}), ("v4", _prov("b4"))]
    (m,) = mixed_inputs.find(LABELS, runs)
    assert (m.label, m.what, m.runs) == ("bs=8k", "datasets", {"d1": 1, "d2": 1})


def test_in_the_labels_order() -> None:
    runs = [("v8", _prov(b)) for b in "xy"] + [("v4", _prov(b)) for b in "xy"]
    assert [m.label for m in mixed_inputs.find(LABELS, runs)] == ["bs=4k", "bs=8k"]


def _store(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_synthetic_results(
        results, name="mix", rounds=4, block_sizes_kb=(4, 8), fs_block_sizes=(4096,)
    )
    return results


def test_the_summary_names_a_variant_resumed_on_another_build(tmp_path: Path) -> None:
    """Runs of bs=4k's last two rounds as a resumed experiment stores them after its patch
    was edited: same variant, another build key. Its verdict and the checks say so, on
    the CLI's first screen and on the report's answer."""
    results = _store(tmp_path)
    with ResultsDB(results) as db:
        before = summarize_experiment(db, "mix")
        assert before.mixed == []
        assert not [line for line in first_screen.first_screen(before) if "builds" in line]
        four = next(v for v in before.variants if v.label.startswith("bs=4k"))
        edited = "variant_id = ? AND round >= 3 AND status = 'ok'"
        db.conn.execute(
            "UPDATE runs SET provenance_json = json_set(provenance_json, '$.build_key', "
            f"'pg18-4k-edited') WHERE {edited}",
            (four.variant_id,),
        )
        db.conn.execute(  # the facts stored with such a run (schema 6: run_facts)
            "UPDATE run_facts SET facts_json = json_set(facts_json, '$.build_key', "
            f"'pg18-4k-edited') WHERE run_id IN (SELECT id FROM runs WHERE {edited})",
            (four.variant_id,),
        )
        db.conn.commit()
        whole = summarize_experiment(db, "mix")  # the runs' provenance parsed
        db.read_ahead("mix")  # as the report and `blocklab summary` read them: their facts
        after = summarize_experiment(db, "mix")
    assert whole.mixed == after.mixed
    (m,) = after.mixed
    assert (m.label, m.what) == (four.label, "builds")
    assert m.runs["pg18-4k-edited"] >= 1 and m.runs["pg18-4k"] >= 1
    screen = first_screen.first_screen(after)
    assert f"  {m.line()}" in screen
    flagged = [i for i, line in enumerate(screen) if "! not one comparison" in line]
    assert len(flagged) == 1 and screen[flagged[0] - 1].startswith(f"  {four.label}")
    got = answer.verdicts(after)
    assert [v["label"] for v in got if v["mixed"]] == [four.label]
    assert f"{four.label}'s runs came from 2 builds" in next(v["mixed"] for v in got if v["mixed"])

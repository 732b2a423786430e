"""Each variant's per-round values kept in the site's manifest, and rounds.csv made by
parts (blocklab.report.reduction_cache): read back equal to the values reduced afresh,
reduced again when a variant's runs changed or its entry does not read back, and
rounds.csv's kept parts copied only from the file the manifest describes. SYNTHETIC data
(tests/report_fixture.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.analysis.round_table import ROUND_FIELDS, metric_order
from blocklab.report import build_site, data, reduction_cache
from blocklab.report.manifest import MANIFEST
from blocklab.report.reduction_cache import KeyedValues, ReductionCache, rounds_csv
from blocklab.store import export

NAME = "synthetic-geometry"


def _through_json(used: dict[str, Any]) -> dict[str, Any]:
    """The entries as the manifest writes and reads them."""
    body: dict[str, Any] = json.loads(json.dumps(used, separators=(",", ":")))
    return body


def _view(res: Path, cache: ReductionCache | None) -> data.ExperimentView:
    db = data.open_results(res)
    try:
        return data.load_experiment(db, NAME, reduce=cache.reduce if cache else None)
    finally:
        db.close()


def _plain(reduced: dict[tuple[str, str], Any]) -> dict[tuple[str, str], Any]:
    return {k: (dict(rv.values), rv.dropped) for k, rv in reduced.items()}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    # a failed run among them: a round dropped with its reason
    return write_synthetic_results(tmp_path / "results", rounds=4, seconds=10)


def test_kept_reductions_read_back_equal_to_those_reduced_afresh(results: Path) -> None:
    fresh = _view(results, None)
    assert any(rv.dropped for rv in fresh.reduced.values())  # the failed run's round

    first = ReductionCache({})
    made = _view(results, first)
    assert first.made == len(fresh.variants)
    assert _plain(made.reduced) == _plain(fresh.reduced)
    assert all(isinstance(rv.values, KeyedValues) for rv in made.reduced.values())
    assert [v.cells for v in made.variants] == [v.cells for v in fresh.variants]

    again = ReductionCache(_through_json(first.used))
    read = _view(results, again)
    assert again.made == 0
    assert _plain(read.reduced) == _plain(fresh.reduced)
    digests = {k: rv.values.digest for k, rv in read.reduced.items()}  # type: ignore[attr-defined]
    assert digests == {k: rv.values.digest for k, rv in made.reduced.items()}  # type: ignore[attr-defined]
    assert _through_json(again.used) == _through_json(first.used)


def test_a_changed_variant_or_an_entry_that_does_not_read_back_is_reduced_again(
    results: Path,
) -> None:
    first = ReductionCache({})
    _view(results, first)
    kept = _through_json(first.used)

    add_synthetic_run(results, NAME, seconds=10)  # one more run of the first variant
    cache = ReductionCache(kept)
    view = _view(results, cache)
    assert cache.made == 1
    assert _plain(view.reduced) == _plain(_view(results, None).reduced)

    # entries a hand or a fault changed: a value that is not a number, lists of unequal
    # length, a round that is not an integer, a metric missing, not a list at all
    broken = [
        lambda e: e["tps"][1].__setitem__(0, "5000"),
        lambda e: e["tps"][1].pop(),
        lambda e: e["tps"][0].__setitem__(0, 1.5),
        lambda e: e.pop("tps"),
        lambda e: e.__setitem__("tps", {"1": 5000.0}),
    ]
    kept = _through_json(cache.used)
    expected = _plain(view.reduced)
    for k, breaks in enumerate(broken):
        bad = _through_json(kept)
        breaks(next(iter(bad.values())))
        cache = ReductionCache(bad)
        assert _plain(_view(results, cache).reduced) == expected, k
        assert cache.made == 1, k


def _rounds_csv_afresh(view: data.ExperimentView, metrics: list[str]) -> str:
    rows = [row for v in view.variants for row in data.variant_round_rows(view, v, metrics)]
    return export.csv_text(rows, ROUND_FIELDS)


def test_rounds_csv_by_parts_equals_it_made_whole_and_copies_only_from_its_own_file(
    results: Path,
) -> None:
    db = data.open_results(results)
    try:
        metrics = metric_order(db.metric_names(NAME))
    finally:
        db.close()
    cache = ReductionCache({})
    view = _view(results, cache)
    text, record = rounds_csv(view, metrics, None, None)
    assert text == _rounds_csv_afresh(view, metrics)
    assert len(record["parts"]) == len(view.variants)

    # one more run: its variant's part made, the others copied from the old text
    add_synthetic_run(results, NAME, seconds=10)
    cache = ReductionCache(_through_json(cache.used))
    view = _view(results, cache)
    expected = _rounds_csv_afresh(view, metrics)
    assert expected != text
    again, _ = rounds_csv(view, metrics, _through_json(record), text)
    assert again == expected

    # a file changed by hand since (the same length, in the last variant's part, which
    # would be copied): nothing copied from it
    at = text.rindex(",tps,")
    tampered = f"{text[:at]},tpz,{text[at + 5 :]}"
    assert len(tampered) == len(text) and tampered != text
    assert rounds_csv(view, metrics, record, tampered)[0] == expected
    # a record whose places do not fit the file: nothing copied from them
    wrong = {**record, "parts": {k: [0, 10**9] for k in record["parts"]}}
    assert rounds_csv(view, metrics, wrong, text)[0] == expected


def test_an_update_reduces_only_the_new_run_s_variant_and_equals_a_full_build(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = data.reduce_variant

    def counted(runs: Any, variant_id: str, *args: Any) -> Any:
        calls.append(variant_id)
        return real(runs, variant_id, *args)

    monkeypatch.setattr(data, "reduce_variant", counted)
    out = tmp_path / "site"
    build_site(results, out)
    variants = len(set(calls))
    assert variants > 2 and len(calls) == variants

    calls.clear()
    build_site(results, out)  # nothing new: every variant read back
    assert calls == []

    add_synthetic_run(results, NAME, seconds=10)
    build_site(results, out)
    assert len(calls) == 1
    full = build_site(results, tmp_path / "full", full=True)
    rel = f"e/{NAME}/rounds.csv"
    assert (out / rel).read_text() == (full.out / rel).read_text()
    assert (out / MANIFEST).read_text() == (full.out / MANIFEST).read_text()


def test_a_run_digest_known_from_an_update_before_is_taken_only_for_the_same_run(
    results: Path,
) -> None:
    """A resident process's run digests (report.resident) are taken by the run's key
    columns (id, started_at, ended_at); a run id with other ones is hashed again, and
    of_key holds this build's digests only."""
    runs = _view(results, None).runs
    made = ReductionCache({})
    digests = [made.run_digest(r) for r in runs]
    keys = [(r.id, r.started_at, r.ended_at) for r in runs]
    assert list(made.of_key) == keys and list(made.of_key.values()) == digests
    known = {**made.of_key, keys[0]: "kept", (-1, "", ""): "a run gone since"}
    again = ReductionCache({}, known)
    assert [again.run_digest(r) for r in runs] == ["kept", *digests[1:]]  # none hashed again
    assert list(again.of_key) == keys  # the gone run's digest not carried on
    runs[0].ended_at = "another end"  # its id given again, to another run
    assert ReductionCache({}, known).run_digest(runs[0]) == reduction_cache.run_digest(runs[0])

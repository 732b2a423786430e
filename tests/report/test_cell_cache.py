"""The experiment page's cells kept in the site's manifest (blocklab.report.cell_cache):
read back equal to the cells made afresh, made again when their inputs changed or their
entry does not read back, and an update after one more run makes only its variant's.
SYNTHETIC data (tests/report_fixture.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from report_fixture import add_synthetic_run, write_synthetic_results

from blocklab.analysis.metrics import KNOWN_METRICS
from blocklab.report import build_site, cell_cache, jsontext, shape
from blocklab.report.manifest import MANIFEST

NAME = "synthetic-geometry"
TPS, SHARE = KNOWN_METRICS[0], next(m for m in KNOWN_METRICS if m.unit == "fraction")


def _inputs(seed: int) -> list[tuple[dict[int, Any], dict[int, Any] | None, Any, bool]]:
    """Cells of every kind: compared, the reference's own, a share (its difference in
    points), one with a missing and a non-finite round, one round only, none finite."""
    rng = random.Random(seed)
    ref = {r: rng.gauss(5000, 200) for r in range(1, 9)}
    other = {r: v * rng.gauss(1.02, 0.03) for r, v in ref.items()}
    gappy = {**other, 3: None, 5: float("nan")}
    shares = {r: rng.uniform(0.90, 0.99) for r in range(1, 9)}
    return [
        (other, ref, TPS, False),
        (ref, None, TPS, True),
        (shares, {r: v - 0.01 for r, v in shares.items()}, SHARE, False),
        (gappy, ref, TPS, False),
        ({1: 4000.0}, ref, TPS, False),
        ({1: None, 2: float("inf")}, ref, TPS, False),
    ]


def _through_json(used: dict[str, Any]) -> dict[str, Any]:
    """The entries as the manifest writes and reads them (report.jsontext)."""
    body: dict[str, Any] = jsontext.loads(jsontext.dumps(used))
    return body


def test_a_cell_s_nan_and_infinities_read_back_as_they_were() -> None:
    """The manifest's JSON has no NaN (null would read back as None): a cell's non-finite
    fields are kept marked and read back as the floats they were."""
    values, ref_values, info, _ = _inputs(3)[0]
    cell = shape.cell_stats(values, ref_values, info)
    assert cell is not None and cell.comparison is not None
    odd = dataclasses.replace(
        cell,
        summary=dataclasses.replace(cell.summary, stdev=math.nan, cv=math.inf),
        comparison=dataclasses.replace(cell.comparison, ci95_low=-math.inf),
    )
    entry = _through_json({"k": cell_cache.entry_of(odd)})["k"]
    back = cell_cache.restore(entry, values)
    assert back is not None and back.comparison is not None
    assert math.isnan(back.summary.stdev) and back.summary.cv == math.inf
    assert back.comparison.ci95_low == -math.inf
    assert dataclasses.replace(back.summary, stdev=None) == dataclasses.replace(
        odd.summary, stdev=None
    )
    assert back.comparison == odd.comparison and back.verdict == odd.verdict


def test_kept_cells_read_back_equal_to_the_cells_made_afresh() -> None:
    inputs = _inputs(7)
    first = cell_cache.CellCache({})
    made = [first.cell_stats(v, r, m, is_reference=ref) for v, r, m, ref in inputs]
    assert first.made == len(inputs)
    assert made == [shape.cell_stats(v, r, m, is_reference=ref) for v, r, m, ref in inputs]
    assert made[-1] is None and made[0] is not None and made[0].comparison is not None

    again = cell_cache.CellCache(_through_json(first.used))
    read = [again.cell_stats(v, r, m, is_reference=ref) for v, r, m, ref in inputs]
    assert again.made == 0 and read == made
    assert _through_json(again.used) == _through_json(first.used)


def test_a_changed_input_or_an_entry_that_does_not_read_back_is_made_again() -> None:
    inputs = _inputs(11)
    first = cell_cache.CellCache({})
    for v, r, m, ref in inputs:
        first.cell_stats(v, r, m, is_reference=ref)
    kept = _through_json(first.used)
    values, ref_values, info, _ = inputs[0]

    # one more round of the variant, or of its reference, or another margin: new inputs
    cache = cell_cache.CellCache(kept)
    cache.cell_stats({**values, 9: 5100.0}, ref_values, info)
    cache.cell_stats(values, {**(ref_values or {}), 9: 5000.0}, info)
    cache.cell_stats(values, ref_values, info, equivalence_pct=3.0)
    assert cache.made == 3

    # entries a hand or a fault changed: not scalars, a field missing or unknown, a
    # verdict that is not a string
    broken = [
        lambda e: e[0].update(mean={"x": 1}),
        lambda e: e[0].pop("mean"),
        lambda e: e[1].update(surprise=1),
        lambda e: e.__setitem__(2, 5),
    ]
    for k, breaks in enumerate(broken):
        bad = _through_json(kept)
        key = next(key for key, e in bad.items() if e and e[1] is not None)
        breaks(bad[key])
        cache = cell_cache.CellCache(bad)
        cells = [cache.cell_stats(v, r, m, is_reference=ref) for v, r, m, ref in inputs]
        assert cache.made == 1, k
        assert cells == [shape.cell_stats(v, r, m, is_reference=ref) for v, r, m, ref in inputs]


def test_an_update_makes_only_the_cells_of_the_new_run_s_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = shape.cell_stats

    def counted(values: Any, ref_values: Any, info: Any, **kw: Any) -> Any:
        calls.append(info.key)
        return real(values, ref_values, info, **kw)

    monkeypatch.setattr(shape, "cell_stats", counted)
    res = write_synthetic_results(tmp_path / "results", rounds=4, seconds=10)
    out = tmp_path / "site"
    build_site(res, out)
    whole = len(calls)
    kept = json.loads((out / MANIFEST).read_text())["stats"]
    assert whole == len(kept) > 6  # every cell made once, each kept

    calls.clear()
    build_site(res, out)  # nothing new: every cell read back
    assert calls == []

    add_synthetic_run(res, NAME, seconds=10)
    build_site(res, out)
    # the first variant's cells, one a metric, and no other
    assert 0 < len(calls) == len(set(calls)) < whole
    full = build_site(res, tmp_path / "full", full=True)
    assert (out / MANIFEST).read_text() == (full.out / MANIFEST).read_text()

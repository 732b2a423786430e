"""[design] layout_control in the summary: the arms' spread is one check line, and each
page-size comparison is judged against it (blocklab.analysis.layout, first_screen)."""

from __future__ import annotations

import random
from pathlib import Path

from helpers import small_experiment

from blocklab.analysis import layout
from blocklab.analysis.first_screen import first_screen
from blocklab.analysis.summary import summarize_experiment
from blocklab.store import ResultsDB, RunRecord

ROUNDS = 6


def _experiment(tmp_path: Path, offsets: dict[str, float]) -> list[str]:
    """bs=8k (reference), bs=4k and two layout arms of bs=8k; tps = 1000 x (1 + offset)
    with 1 % noise per run and a round level shared by every variant of the round."""
    dims = {
        "bs=8k": {"block_size_kb": 8},
        "bs=4k": {"block_size_kb": 4},
        "bs=8k layout1": {"block_size_kb": 8, "layout_seed": 1},
        "bs=8k layout2": {"block_size_kb": 8, "layout_seed": 2},
    }
    rng = random.Random(3)
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "lc", "bs=8k", [(v, v, "{}", d) for v, d in dims.items()])
        for rnd in range(1, ROUNDS + 1):
            level = rng.uniform(0.9, 1.1)
            for vid in dims:
                tps = 1000 * level * (1 + offsets[vid]) * rng.gauss(1, 0.01)
                db.record_run(RunRecord("lc", vid, rnd, 0, "ok", "t0", "t1", tps=tps))
        return first_screen(summarize_experiment(db, "lc", side=False))


def test_a_difference_layout_alone_produces_is_said_so(tmp_path: Path) -> None:
    offsets = {"bs=8k": 0.0, "bs=4k": 0.04, "bs=8k layout1": 0.05, "bs=8k layout2": -0.04}
    lines = _experiment(tmp_path, offsets)
    text = "\n".join(lines)
    assert "  bs=4k: faster by " in text  # its own interval excludes no change ...
    assert "code layout alone could produce it" in text  # ... layout's does not
    assert not any(line.startswith("  bs=8k layout") for line in lines)  # arms: one line
    (check,) = [line for line in lines if "layout alone: 3 builds" in line]
    assert "larger than run noise" in check


def test_a_difference_beyond_layout_stands(tmp_path: Path) -> None:
    offsets = {"bs=8k": 0.0, "bs=4k": 0.12, "bs=8k layout1": 0.003, "bs=8k layout2": -0.002}
    text = "\n".join(_experiment(tmp_path, offsets))
    assert "larger than code layout alone produces" in text
    assert "not told apart from run noise" in text


def test_the_group_is_the_reference_and_its_layout_copies_only() -> None:
    arm = lambda label, dims, ref, is_ref=False: layout.Armed(label, dims, ref, is_ref, {1: 1.0})  # noqa: E731
    variants = [
        arm("8k", {"bs": 8}, "8k", True),
        arm("4k", {"bs": 4}, "8k"),
        arm("4k l1", {"bs": 4, "layout_seed": 1}, "8k"),  # another geometry: not a control arm
        arm("8k l1", {"bs": 8, "layout_seed": 1}, "8k"),
        arm("8k l2", {"bs": 8, "layout_seed": 2}, "8k"),
    ]
    assert list(layout.control_group(variants)) == ["8k", "8k l1", "8k l2"]
    assert layout.control_group(variants[:2]) == {}


def test_judged_widens_the_interval_by_two_builds_variance() -> None:
    s = layout.LayoutSpread(
        3, 6, {}, sigma_build_pct=1.0, sigma_run_pct=1.0, f_stat=5, p_value=0.01
    )
    text = layout.judged(4.0, (3.0, 5.0), s)
    # half-width sqrt((log(1.05/1.03)/2)^2 + 2 (1.96 x 1 %)^2) = 0.0293 around log(1.04)
    assert "+1.0 to +7.1 %" in text and "larger than code layout alone produces" in text


def _two(tmp_path: Path, dims: dict[str, dict[str, object]]) -> list[str]:
    rng = random.Random(5)
    ref = next(iter(dims))
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "two", ref, [(v, v, "{}", d) for v, d in dims.items()])
        for rnd in range(1, ROUNDS + 1):
            for vid in dims:
                tps = 1000 * rng.gauss(1, 0.01)
                db.record_run(RunRecord("two", vid, rnd, 0, "ok", "t0", "t1", tps=tps))
        return first_screen(summarize_experiment(db, "two", side=False))


def test_a_comparison_of_two_builds_without_the_control_says_layout_is_not_controlled(
    tmp_path: Path,
) -> None:
    """The demo's case: 4 kB against 8 kB, one build each: the checks say layout is not
    controlled, under 100 columns; a comparison within one build (fillfactor) says nothing."""
    pages = _two(tmp_path / "p", {"bs=8k": {"block_size_kb": 8}, "bs=4k": {"block_size_kb": 4}})
    assert f"  {layout.UNCONTROLLED}" in pages and len(layout.UNCONTROLLED) < 98
    wal = _two(tmp_path / "w", {"w8": {"wal_block_size_kb": 8}, "w4": {"wal_block_size_kb": 4}})
    assert f"  {layout.UNCONTROLLED}" in wal
    same_build = _two(tmp_path / "f", {"ff=100": {"fillfactor": 100}, "ff=80": {"fillfactor": 80}})
    assert not any("layout" in line for line in same_build)


def test_with_the_control_the_uncontrolled_line_is_not_printed(tmp_path: Path) -> None:
    offsets = {"bs=8k": 0.0, "bs=4k": 0.12, "bs=8k layout1": 0.003, "bs=8k layout2": -0.002}
    lines = _experiment(tmp_path, offsets)
    assert f"  {layout.UNCONTROLLED}" not in lines

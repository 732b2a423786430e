"""A family of metrics, one error rate (issue 30): "what changed" is Benjamini-Hochberg at
5 % over every (metric x comparison), checked against statsmodels and in simulated
experiments with a fixed seed; the first screen of `summary` answers in at most 15 lines.

SYNTHETIC results: made-up numbers shaped like a page-size experiment."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

import numpy as np
import pytest
from helpers import small_experiment
from rich.console import Console
from scipy import stats as sp
from statsmodels.stats.multitest import multipletests

from blocklab.analysis import changed_metrics, stats
from blocklab.analysis.first_screen import MAX_LINES, first_screen
from blocklab.analysis.summary import summarize_experiment
from blocklab.analysis.summary_table import print_summary
from blocklab.cli import main
from blocklab.store import ResultsDB, RunRecord


@pytest.mark.parametrize("seed", range(5))
def test_discoveries_are_statsmodels_fdr_bh(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 1, 30), rng.uniform(0, 0.003, 5 * seed)])
    oracle, *_ = multipletests(p, alpha=0.05, method="fdr_bh")
    assert changed_metrics.discoveries(list(p)) == list(oracle)
    assert changed_metrics.discoveries([]) == []


@pytest.mark.parametrize("seed", range(20))
def test_discoveries_with_ties_and_p_values_on_the_line_are_statsmodels_fdr_bh(seed: int) -> None:
    """Hand-written (changed_metrics.discoveries): ties, p-values exactly k / m x 5 %,
    and a single p-value, against statsmodels. (scipy's false_discovery_control, used
    before, compares p x m / k with 5 % and can round a p-value on the line out.)"""
    rng = np.random.default_rng(100 + seed)
    m = int(rng.integers(1, 40))
    p = np.round(rng.uniform(0, 0.02 * (1 + seed % 4), m), 3)  # ties
    on_line = rng.integers(1, m + 1, size=max(1, m // 5))
    p[on_line - 1] = on_line / m * 0.05
    oracle, *_ = multipletests(p, alpha=0.05, method="fdr_bh")
    assert changed_metrics.discoveries(list(p)) == list(oracle)


def test_the_p_value_is_the_paired_t_test_on_the_log_ratios() -> None:
    rng = random.Random(3)
    ref = {r: 1000 * rng.uniform(0.9, 1.1) for r in range(7)}
    other = {r: v * math.exp(rng.gauss(0.02, 0.03)) for r, v in ref.items()}
    c = stats.compare_paired(ref, other)
    logs = [math.log(other[r] / ref[r]) for r in ref]
    assert c.p_value == pytest.approx(sp.ttest_1samp(logs, 0).pvalue, rel=1e-9)


def _simulate(seed: int, true: int, n_exp: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """n_exp experiments of 40 metrics x 8 rounds: per-round log ratios with noise
    shared by every metric of a round (the machine's mood, stdev 3 %) plus each
    metric's own (4 %); the first `true` metrics change by +10 %. The p-values are the
    paired t-test's (scipy, vectorised; equal to compare_paired's, tested above)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.03, (n_exp, 1, 8)) + rng.normal(0, 0.04, (n_exp, 40, 8))
    x[:, :true, :] += math.log1p(0.10)
    p = sp.ttest_1samp(x, 0, axis=2).pvalue
    return np.array([changed_metrics.discoveries(list(row)) for row in p]), p


def test_no_true_change_shows_a_line_in_at_most_5_percent_of_experiments() -> None:
    keep, p = _simulate(30, true=0)
    assert keep.any(axis=1).mean() <= 0.05  # 4.4 % with this seed
    assert (p < 0.05).any(axis=1).mean() > 0.5  # each 95 % CI alone: 71 %


def test_a_true_10_percent_change_is_found_in_most_experiments() -> None:
    keep, _p = _simulate(31, true=3)
    assert keep[:, :3].mean() >= 0.75  # 76.6 % of the true changes are listed
    assert keep[:, :3].any(axis=1).mean() >= 0.9  # an experiment lists at least one


ROUNDS = 5
METRICS = 40


def _record(db: ResultsDB, name: str, vid: str, rnd: int, scale: float) -> None:
    rng = random.Random(f"{vid}-{rnd}")
    metrics: dict[str, float | None] = {
        f"probe{i:02d}_bytes_per_xact": 100.0 * (1 + i) * rng.uniform(0.97, 1.03)
        for i in range(METRICS)
    }
    metrics |= {f"idle{i:02d}_bytes_per_xact": 0.0 for i in range(12)}  # 0 in both
    metrics |= {
        "cache_hit_ratio": 1.0,  # pinned at 100 %
        "wal_bytes_per_xact": 640.0 * scale * rng.uniform(0.99, 1.01),
        "wal_fpi_per_xact": 0.5 * scale * rng.uniform(0.98, 1.02),
    }
    tps = 1000.0 / scale * rng.uniform(0.98, 1.02)
    latency = scale * rng.uniform(0.98, 1.02)
    db.record_run(
        RunRecord(
            name, vid, rnd, 0, "ok", "t0", "t1", tps=tps, latency_avg_ms=latency, metrics=metrics
        )
    )


@pytest.fixture
def three_variants(tmp_path: Path) -> Path:
    scales = {"bs=8k": 1.0, "bs=4k": 0.8, "bs=16k": 1.0}
    with ResultsDB(tmp_path / "results") as db:
        variants = [(v, v, "{}", {}) for v in scales]
        small_experiment(db, "geo", "bs=8k", variants, spec={"equivalence_pct": 5.0})
        for vid, scale in scales.items():
            for rnd in range(1, ROUNDS + 1):
                _record(db, "geo", vid, rnd, scale)
        failed = RunRecord("geo", "bs=16k", ROUNDS + 1, 0, "failed", "t0", "t1", reason="crash")
        db.record_run(failed)
    return tmp_path / "results"


def test_the_first_screen_answers_in_at_most_15_lines(three_variants: Path) -> None:
    with ResultsDB(three_variants, create=False) as db:
        s = summarize_experiment(db, "geo")
    console = Console(width=100, record=True, file=io.StringIO())
    print_summary(console, s)
    text = console.export_text()
    screen = text[: text.index("geo: throughput (transactions/s) per variant")]
    lines = screen.strip("\n").splitlines()
    assert len(lines) <= MAX_LINES, screen
    assert lines == first_screen(s)  # nothing wraps at 100 columns
    assert "equal means within ±5 %" in lines[0]
    assert any(line.startswith("  bs=4k: faster by ") for line in lines)
    assert any(line.startswith("  bs=16k: equal within ±5 %") for line in lines)
    assert any(line.startswith("  WAL bytes per transaction: bs=4k -20.") for line in lines)
    assert any("full-page images per transaction" in line for line in lines)
    latency = [line for line in lines if line.startswith("  latency (average): bs=4k -")]
    assert len(latency) == 1 and "% (faster); bs=16k " in latency[0]
    assert "checks:" in lines and "  failed runs: 1 failed, 1 round values left out" in text


def test_summary_folds_the_idle_metrics_and_all_lists_them(
    three_variants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", "geo", "--results", str(three_variants)]) == 0
    out = capsys.readouterr().out
    assert "What changed (Benjamini-Hochberg, false discovery rate 5 % over " in out
    assert "13 metrics are 0 in both variants or the same in every round; summary --all" in out
    assert "idle00" not in out
    assert main(["summary", "geo", "--all", "--results", str(three_variants)]) == 0
    everything = capsys.readouterr().out
    assert "0 in both: idle00 bytes per xact" in everything
    assert "the same value in every round: buffer cache hit ratio" in everything

"""Steady-state detection (blocklab.execution.steady) on synthetic series and on real pgbench -P 1
output recorded from a cold PG 18 server."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from blocklab.execution import steady
from blocklab.workloads.pgbench import parse_progress

DATA = Path(__file__).parents[1] / "data" / "pgbench"


def _noisy(level: float, n: int, cv: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, cv)) for _ in range(n)]


def test_ramp_then_plateau_is_steady_after_the_ramp() -> None:
    ramp = [1000 + 400 * i for i in range(15)]  # 15 s climbing to 6600 tps
    series = ramp + _noisy(7000, 60, 0.01, seed=1)
    result = steady.detect(series)
    assert result.steady and result.window is not None
    assert 12 <= result.warmup_s <= 16
    assert result.window.cv <= steady.MAX_CV and "steady from second" in result.note


def test_a_slow_ramp_with_a_small_cv_is_not_steady() -> None:
    # +0.8 % per second: each 10 s window's CV is about 2.4 %, but it drifts 7 %
    series = [5000 * (1 + 0.008 * i) for i in range(40)]
    assert steady.window_stats(series, 0, 10).cv < steady.MAX_CV
    result = steady.detect(series, max_warmup_s=25)
    assert not result.steady and result.warmup_s == 25
    assert "not steady within the max warm-up of 25 s" in result.note


def test_noise_above_the_threshold_is_bounded_by_the_max_warmup() -> None:
    series = _noisy(5000, 200, 0.15, seed=2)
    result = steady.detect(series, max_warmup_s=60)
    assert not result.steady and result.warmup_s == 60


def test_a_short_series_is_not_steady_yet() -> None:
    result = steady.detect([100.0, 5000.0, 6000.0, 6100.0])
    assert not result.steady and "not steady yet after 4 s" in result.note
    assert not steady.warmup_done([100.0, 5000.0, 6000.0, 6100.0])
    assert steady.warmup_done(_noisy(7000, 12, 0.005, seed=3))
    assert steady.warmup_done([float(i) for i in range(1, 31)], max_warmup_s=30)  # bounded
    with pytest.raises(ValueError, match="at least 3"):
        steady.detect([1.0] * 10, window_s=2)


def _recorded_tps(name: str) -> list[float]:
    rows = parse_progress((DATA / f"{name}.stderr").read_text())
    return [r.tps for r in rows]


def test_recorded_cold_start_warmup() -> None:
    # Real `-P 1` output of a PG 18 server started cold (pgbench -i, then a restart), on
    # this 2-core machine while other jobs ran: per-second tps swings by 10-15 %.
    tps = _recorded_tps("pg18-warmup-simple-update")
    assert len(tps) == 60
    loose = steady.detect(tps, window_s=10, max_cv=0.10, max_drift=0.10, max_warmup_s=40)
    assert loose.steady and loose.window is not None
    assert loose.warmup_s == 9
    assert loose.window.cv <= 0.10 and loose.window.drift <= 0.10
    for start in range(loose.warmup_s):  # every earlier window was noisier or sloped
        w = steady.window_stats(tps, start, 10)
        assert w.cv > 0.10 or w.drift > 0.10
    # at the default 5 % no window of this noisy run qualifies: bounded, and said so
    strict = steady.detect(tps, max_warmup_s=30)
    assert not strict.steady and strict.warmup_s == 30
    assert "not steady within the max warm-up of 30 s" in strict.note


def test_recorded_short_runs_are_not_steady_yet() -> None:
    # the 4-5 s parser recordings are shorter than one window
    for name in ("pg18-tpcb-extended-j2", "pg18-simple-update-prepared"):
        result = steady.detect(_recorded_tps(name))
        assert not result.steady and "not steady yet" in result.note

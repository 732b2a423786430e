"""The trend test of a run's measured window (blocklab.analysis.stationarity) on the issue's
recorded full-page-image decay, on flat noise over many seeds and on real pgbench -P 1
output of a cold PG 18 server."""

from __future__ import annotations

import math
import random
from pathlib import Path

from blocklab.analysis import stationarity as st
from blocklab.workloads.pgbench import parse_progress

DATA = Path(__file__).parents[1] / "data" / "pgbench"

# issue 21: full-page images per second at these seconds of the measured run (round 2)
FPI_4K = {1: 2108, 2: 1466, 3: 1168, 5: 853, 8: 572, 12: 219, 16: 94, 20: 49}
FPI_8K = {1: 555, 2: 342, 3: 252, 5: 133, 8: 22, 12: 3, 16: 2, 20: 0}


def _every_second(known: dict[int, float]) -> list[tuple[float, float | None]]:
    """The recorded seconds, the others interpolated geometrically (a decay)."""
    out: list[tuple[float, float | None]] = []
    secs = sorted(known)
    for a, b in zip(secs, secs[1:], strict=False):
        lo, hi = max(known[a], 0.5), max(known[b], 0.5)
        for s in range(a, b):
            out.append((float(s), known[a] if s == a else lo * (hi / lo) ** ((s - a) / (b - a))))
    out.append((float(secs[-1]), float(known[secs[-1]])))
    return out


def _flat(n: int, level: float, cv: float, phi: float, seed: int) -> list[tuple[float, float]]:
    rng, e, out = random.Random(seed), 0.0, []
    for i in range(n):
        e = phi * e + rng.gauss(0, cv * math.sqrt(1 - phi**2))
        out.append((float(i + 1), level * (1 + e)))
    return out


def test_the_issue_4k_image_storm_is_flagged() -> None:
    series = _every_second(FPI_4K)
    assert len(series) == 20 and series[0][1] == 2108 and series[-1][1] == 49
    tr = st.trend(series)
    assert tr is not None and tr.drifted
    assert tr.p_value < 0.001
    # the log-scale fit's first and last seconds: a fall of 98 %, bounded by 100 %
    assert round(tr.start) == 1915 and round(tr.end) == 45
    assert -99 < tr.change_pct < -97
    assert round(tr.mean) == 533


def test_the_8k_storm_reaching_zero_is_flagged_too() -> None:
    tr = st.trend(_every_second(FPI_8K))
    assert tr is not None and tr.drifted and tr.p_value < st.MAX_P
    assert tr.end == 0.0 and tr.change_pct == -100.0  # the fit reaches 0: never below -100 %


def test_flat_noise_is_rarely_flagged() -> None:
    # white noise at 10 % CV and AR(1) noise (phi 0.3, as in the recorded tps below),
    # 20 s windows, 1000 seeds each: the false-positive rate stays under 2 % and 4 %
    white = sum(bool(st.trend(_flat(20, 5000, 0.10, 0.0, s)).drifted) for s in range(1000))  # type: ignore[union-attr]
    ar = sum(bool(st.trend(_flat(20, 5000, 0.10, 0.3, s)).drifted) for s in range(1000))  # type: ignore[union-attr]
    assert white / 1000 < 0.02
    assert ar / 1000 < 0.04


def test_a_small_trend_is_not_a_drift_however_certain() -> None:
    series = [(float(i), 5000.0 * (1 + 0.001 * i)) for i in range(60)]  # +6 % over 60 s
    tr = st.trend(series)
    assert tr is not None and tr.p_value < st.MAX_P and tr.drifted
    series = [(float(i), 5000.0 * (1 + 0.0005 * i)) for i in range(60)]  # +3 %
    tr = st.trend(series)
    assert tr is not None and tr.p_value < st.MAX_P and not tr.drifted
    assert 2.5 < tr.change_pct < 3.5


def test_short_empty_or_zero_series_get_no_verdict() -> None:
    assert st.trend([(1.0, 5.0)] * 7) is None
    assert st.trend([(float(i), 0.0) for i in range(30)]) is None
    assert st.trend([(float(i), None) for i in range(30)]) is None


def _recorded_tps(name: str) -> list[tuple[float, float | None]]:
    return [(r.t_s, r.tps) for r in parse_progress((DATA / f"{name}.stderr").read_text())]


def test_recorded_cold_start_is_not_flagged_from_noise() -> None:
    tps = _recorded_tps("pg18-warmup-simple-update")
    # over the whole minute tps rises a third (the cache warms), but this machine's
    # 15-18 % swings, autocorrelated, leave that at p ~ 0.06 with nulls up to phi 0.62
    # (0.02 with the earlier whole-window trend test at p < 0.01): the test is conservative
    whole = st.trend(tps)
    assert whole is not None and whole.change_pct > 30
    assert st.MAX_P < whole.p_value < 0.1 and not whole.drifted
    window = st.trend(tps[9:29])  # 20 s after steady.detect's warm-up of 9 s
    assert window is not None and not window.drifted


def test_notes_name_the_metric_the_share_of_runs_and_the_advice() -> None:
    storm = {"wal_fpi_per_s": _every_second(FPI_4K), "tps": _flat(20, 3000, 0.03, 0.0, 1)}
    calm = {"wal_fpi_per_s": _flat(20, 40, 0.05, 0.0, 2), "tps": _flat(20, 3000, 0.03, 0.0, 3)}
    drifts = st.variant_drifts("bs=4k", [storm, storm, calm])
    assert [(d.series, d.n_drifted, d.n_tested) for d in drifts] == [("wal_fpi_per_s", 2, 3)]
    text = st.notes({"bs=4k": [storm, storm, calm], "bs=8k": [calm, calm]})
    assert len(text) == 1
    assert text[0].startswith(
        "full-page images/s fell 98 % inside the measured window (from about 1,915/s to 44.6/s)"
    )
    assert "in 2 of 3 runs of bs=4k: the window measures the decay after a checkpoint" in text[0]
    assert 'checkpoint = "cycles"' in text[0] and "longer warm-up" in text[0]
    rising = st.Drift("bs=8k", "tps", 3, 6, 12.4, 2900.0, 3259.6).sentence()
    assert rising.startswith(
        "tps rose 12 % inside the measured window (from about 2,900 tps to 3,260 tps) in 3 of 6"
    )
    assert 'warmup = "steady"' in rising
    wal = st.Drift("bs=4k", "wal_bytes_per_s", 1, 1, -40.0, 20e6, 12e6).sentence()
    assert "fell 40 % inside the measured window (from about 19.1 MB/s to 11.4 MB/s)" in wal


def test_the_change_is_bounded_below_and_a_rise_from_zero_is_said_in_words() -> None:
    assert st.change_pct(200.0, 0.0) == -100.0
    assert st.change_pct(200.0, 50.0) == -75.0
    assert st.change_pct(0.0, 0.0) == 0.0 and math.isinf(st.change_pct(0.0, 5.0))
    text = st.Drift("x", "wal_fpi_per_s", 2, 2, math.inf, 0.0, 30.0).sentence()
    assert text.startswith("full-page images/s rose from 0 inside the measured window")


def test_summary_lines_say_judged_flat_or_not_judged() -> None:
    calm = [{"wal_fpi_per_s": _flat(20, 40, 0.05, 0.0, s), "tps": _flat(20, 3000, 0.03, 0.0, s)}
            for s in range(4)]  # fmt: skip
    short = [{"tps": _flat(5, 3000, 0.03, 0.0, s)} for s in range(3)]
    assert st.summary_lines({"a": calm[:2], "b": calm[2:]}) == [
        "stationarity: judged flat: 4 of 4 windows (20-point windows)"
    ]
    assert st.summary_lines({"a": short}) == [
        "stationarity: 3 windows not judged (windows of 5 points; at least 8 needed)"
    ]
    assert st.summary_lines({"a": calm[:2] + short[:1], "b": [calm[3]]}) == [
        "stationarity: judged flat: 3 of 3 windows (20-point windows)",
        "stationarity: not judged (windows of 5 points; at least 8 needed)",
    ]
    assert st.summary_lines({}) == [] and st.notes({"a": calm}) == []


def test_one_flagged_window_in_32_is_not_a_finding() -> None:
    storm = {"wal_fpi_per_s": _every_second(FPI_4K)}
    calm = [{"wal_fpi_per_s": _flat(20, 40, 0.05, 0.0, s)} for s in range(32)]
    runs = {"a": [storm, *calm[:7]], "b": calm[8:16], "c": calm[16:24], "d": calm[24:]}
    assert st.summary_lines(runs) == [
        "stationarity: full-page images/s: 1 of 32 windows drift (noise alone flags at most "
        "5 %: 1.6 expected); no more than noise gives"
    ]
    assert st.notes(runs) == []
    # four of a's eight: a finding (1 - P(X <= 3), X ~ Binomial(8, 0.05) = 0.00037)
    runs["a"] = [storm] * 4 + calm[:4]
    lines = st.summary_lines(runs)
    assert lines[0].startswith("stationarity: full-page images/s: 4 of 32 windows drift")
    assert not lines[0].endswith("no more than noise gives") and len(lines) == 2
    assert lines[1].startswith("! stationarity: full-page images/s fell 98 % inside")
    assert "in 4 of 8 runs of a" in lines[1] and st.notes(runs) == [lines[1][16:]]


def test_the_noise_share_is_a_one_sided_binomial_test() -> None:
    # P(X >= 2), X ~ Binomial(4, 0.05) = 1 - 0.95^4 - 4 x 0.05 x 0.95^3
    two_of_four = st.Drift("a", "tps", 2, 4, -10.0)
    assert math.isclose(two_of_four.noise_p, 1 - 0.95**4 - 4 * 0.05 * 0.95**3)
    assert two_of_four.finding
    assert math.isclose(st.Drift("a", "tps", 1, 1, -10.0).noise_p, 0.05)
    assert not st.Drift("a", "tps", 1, 1, -10.0).finding  # one window alone: never a finding


def test_the_noise_share_equals_scipy_stats_binomtest() -> None:
    """The oracle: scipy.stats.binomtest's one-sided p-value (what noise_p used before it
    was computed from scipy.special, lighter to import), over every count up to 120 runs."""
    from scipy.stats import binomtest

    for n in (*range(1, 41), 59, 60, 97, 120):
        for k in range(n + 1):
            want = binomtest(k, n, st.MAX_P, "greater").pvalue
            got = st.Drift("a", "tps", k, n, -10.0).noise_p
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (k, n, got, want)


def test_runs_trends_batched_equals_each_series_tested_alone() -> None:
    """runs_trends computes the p-values of series on one time axis in one call: each
    Trend must be exactly what trend() gives the series alone (mixed lengths, gaps, a
    jittered axis, a zero series, drifts among flat runs)."""
    rng = random.Random(3)
    runs = []
    for _ in range(30):  # each lone trend is a permutation test: 120 runs took 40 s
        n = rng.choice([60, 60, 60, 30, 5, 200, 61])
        base, drift = rng.uniform(10, 5000), rng.choice([0.0, 0.0, 0.3])
        runs.append(
            {
                "tps": [
                    (float(t), base * (1 + drift * t / n) * rng.uniform(0.9, 1.1)) for t in range(n)
                ],
                "wal_bytes_per_s": [
                    (t + rng.choice([0.0, 0.001]), rng.choice([None, base * rng.uniform(0.5, 1.5)]))
                    for t in range(n)
                ],
                "wal_fpi_per_s": [(float(t), 0.0) for t in range(n)],
            }
        )
    alone = [
        {k: tr for k in st.SERIES if k in s and (tr := st.trend(s[k])) is not None} for s in runs
    ]
    assert st.runs_trends(runs) == alone
    assert sum(len(a) for a in alone) > 40  # most series were tested
    lengths = {len(s["tps"]) for s in runs}
    assert {5, 30, 60, 61, 200} <= lengths  # every length, the too-short one too
    assert 0 < sum(tr.drifted for a in alone for tr in a.values()) < 25  # and both verdicts

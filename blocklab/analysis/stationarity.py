"""Is a run's measured window stationary? A trend test on its per-second series (pure).

A run's number is an average over its window. When the workload's rates still move inside
that window (the full-page-image storm after a checkpoint decaying, a cold cache
warming), the average depends on which phase of the movement the window caught, and two
variants whose movements last differently are compared at different phases.

For one series: the least-squares slope of log(value + 1 % of the mean) on time, divided
by its Bartlett-kernel HAC standard error with the whole window as bandwidth (Kiefer,
Vogelsang and Bunzel's fixed-b statistic), so that per-second values that follow each
other (autocorrelated noise) do not pass for a trend; the p-value from that statistic's
distribution simulated without a trend (seeded, per number of points). The log makes a
decay by a constant factor per second (an image storm) a straight line; the 1 % offset
keeps a rate that reaches zero finite. A textbook Newey-West t-test with a short lag
rejects a flat AR(1) series 10-25 % of the time at p < 0.01 over 20 points; this one
about 1-4 % (tests/analysis/test_stationarity.py).

The size is the least-squares line of the values themselves (no log), its change from
the window's first second to its last as a share of the window's mean (`drift_pct`, as
in blocklab.execution.steady). A series drifted when both p < MAX_P and |drift| >=
MIN_DRIFT_PCT: a trend too small to matter is not reported, however certain.

The series judged (SERIES): throughput (tps, tpmc), WAL bytes/s and full-page images/s;
their stored names come from blocklab.probes.derived and the workload drivers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MAX_P = 0.01
MIN_DRIFT_PCT = 5.0
MIN_POINTS = 8  # fewer seconds than this: no verdict
LOG_OFFSET = 0.01  # the test runs on log(value + 1 % of the mean): see the docstring
MAX_TEST_POINTS = 120  # longer series are averaged down to this many points for the test

# stored series name -> its words
SERIES = {
    "tps": "tps",
    "tpmc": "tpmC",
    "wal_bytes_per_s": "WAL bytes/s",
    "wal_fpi_per_s": "full-page images/s",
}
# series whose fall inside the window is the signature of a checkpoint's image storm
CHECKPOINT_SIGNS = ("wal_bytes_per_s", "wal_fpi_per_s")

Points = Sequence[tuple[float, float | None]]


@dataclass(frozen=True)
class Trend:
    n: int  # points used
    mean: float
    slope_per_s: float
    drift_pct: float  # fitted change first -> last second, % of the mean
    p_value: float
    drifted: bool


def trend(points: Points) -> Trend | None:
    """The trend test of one series (None: fewer than MIN_POINTS values or a mean <= 0)."""
    pts = [(float(t), float(v)) for t, v in points if v is not None and math.isfinite(v)]
    if len(pts) < MIN_POINTS:
        return None
    t = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    mean = float(y.mean())
    tc = t - t.mean()
    if mean <= 0 or float(tc @ tc) == 0:
        return None
    slope = float(tc @ (y - mean)) / float(tc @ tc)
    drift = 100.0 * slope * float(t[-1] - t[0]) / mean
    p = p_value(y)
    return Trend(len(y), mean, slope, drift, p, p < MAX_P and abs(drift) >= MIN_DRIFT_PCT)


def p_value(y: np.ndarray) -> float:
    """The trend's p-value on log(value + LOG_OFFSET x mean), at most MAX_TEST_POINTS
    (consecutive values averaged), the points taken as evenly spaced."""
    logs = np.log(np.maximum(y, 0.0) + LOG_OFFSET * float(y.mean()))
    k = math.ceil(len(logs) / MAX_TEST_POINTS)
    if k > 1:
        logs = np.array([logs[i : i + k].mean() for i in range(0, len(logs), k)])
    null = _null_statistics(len(logs))
    stat = float(kvb_statistic(_centred(len(logs)), logs))
    at_least = len(null) - int(np.searchsorted(null, stat, side="left"))
    return (at_least + 1) / (len(null) + 1)


def _centred(n: int) -> np.ndarray:
    x = np.arange(n, dtype=float)
    return x - x.mean()


def kvb_statistic(tc: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|slope| / its Bartlett-kernel HAC standard error with the bandwidth the whole
    window (Kiefer, Vogelsang and Bunzel), up to a constant factor; y is one series
    (shape n) or one per row (shape k x n). The partial sums S_k of (t - mean t) x residual
    give the long-run variance: sum over k of S_k^2 (S_n is 0)."""
    yc = y - y.mean(axis=-1, keepdims=True)
    slope = (yc @ tc) / float(tc @ tc)
    resid = yc - slope[..., None] * tc if yc.ndim == 2 else yc - slope * tc
    sums = np.cumsum(tc * resid, axis=-1)
    spread = np.sqrt(np.sum(sums**2, axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spread > 0, np.abs(slope) / spread, np.where(slope != 0, np.inf, 0.0))


NULL_DRAWS = 10_000
NULL_SEED = 21


@lru_cache(maxsize=32)
def _null_statistics(n: int) -> np.ndarray:
    """The statistic's distribution without a trend over n evenly spaced points:
    independent normal noise, NULL_DRAWS series, seeded (a series' p-value is
    reproducible). The statistic is asymptotically pivotal under autocorrelated noise
    as well, which is what the whole-window bandwidth buys."""
    rng = np.random.default_rng(NULL_SEED)
    return np.sort(kvb_statistic(_centred(n), rng.standard_normal((NULL_DRAWS, n))))


def run_trends(series: Mapping[str, Points]) -> dict[str, Trend]:
    """The judged series of one run that could be tested, by stored name."""
    out = {}
    for name in SERIES:
        if name in series and (tr := trend(series[name])) is not None:
            out[name] = tr
    return out


# -- per variant: what the summary and the report say -------------------------------------


@dataclass(frozen=True)
class Drift:
    label: str  # the variant
    series: str  # stored name
    n_drifted: int
    n_tested: int
    median_drift_pct: float  # over the drifted runs

    def sentence(self) -> str:
        words = "fell" if self.median_drift_pct < 0 else "rose"
        return (
            f"{SERIES[self.series]} {words} {abs(self.median_drift_pct):.0f} % of its mean "
            f"inside the measured window in {self.n_drifted} of {self.n_tested} runs of "
            f"{self.label}: {self.advice()}"
        )

    def advice(self) -> str:
        if self.series in CHECKPOINT_SIGNS and self.median_drift_pct < 0:
            return (
                "the window measures the decay after a checkpoint; measure whole "
                'checkpoint cycles ([design] checkpoint = "cycles") or a longer warm-up'
            )
        return (
            'the window is not steady; a longer warm-up ([design] warmup = "steady") or longer runs'
        )


def variant_drifts(label: str, runs: Sequence[Mapping[str, Points]]) -> list[Drift]:
    """Per judged series, the share of `runs` (their series) whose window drifted; only
    series with at least one drifted run."""
    tested: dict[str, list[Trend]] = {}
    for series in runs:
        for name, tr in run_trends(series).items():
            tested.setdefault(name, []).append(tr)
    out = []
    for name, trends in tested.items():
        drifted = [tr.drift_pct for tr in trends if tr.drifted]
        if drifted:
            out.append(Drift(label, name, len(drifted), len(trends), statistics.median(drifted)))
    return out


def notes(runs_by_label: Mapping[str, Sequence[Mapping[str, Points]]]) -> list[str]:
    """The sentences for every variant's drifted series (empty: every window tested was
    stationary)."""
    return [
        d.sentence() for label, runs in runs_by_label.items() for d in variant_drifts(label, runs)
    ]

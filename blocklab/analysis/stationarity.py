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

The size is read from the same fit on the log scale: its fitted values at the window's
first and last second, back on the series' own scale (minus the offset, at least 0),
and the change from the first to the last as a share of the first (`change_pct`): a
storm that decays from 1,466 to 49 images/s "fell 97 %", never more than 100 %. A series
drifted when both p < MAX_P and |change| >= MIN_CHANGE_PCT: a trend too small to matter
is not reported, however certain.

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

from blocklab.units import fmt_bytes, sig3

MAX_P = 0.01
MIN_CHANGE_PCT = 5.0  # smaller fitted changes first -> last second are not reported
MIN_POINTS = 8  # fewer seconds than this: no verdict
LOG_OFFSET = 0.01  # the test runs on log(value + 1 % of the mean): see the docstring
MAX_TEST_POINTS = 120  # longer series are averaged down to this many points for the test

RULE = (
    f"a trend of the log values with p < {MAX_P:g} (fixed-b HAC test) and a fitted change "
    f"from the window's first second to its last of at least {MIN_CHANGE_PCT:g} %"
)

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
    start: float  # the fitted value at the window's first second (log-scale fit)
    end: float  # ... and at its last second
    change_pct: float  # end vs start, % of start (>= -100; inf: a rise from 0)
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
    logs = _logs(y)
    slope = float(tc @ (logs - logs.mean())) / float(tc @ tc)
    offset = LOG_OFFSET * mean

    def fitted(at: float) -> float:
        return max(0.0, math.exp(float(logs.mean()) + slope * (at - float(t.mean()))) - offset)

    start, end = fitted(float(t[0])), fitted(float(t[-1]))
    change = change_pct(start, end)
    p = p_value(y)
    return Trend(len(y), mean, start, end, change, p, p < MAX_P and abs(change) >= MIN_CHANGE_PCT)


def change_pct(start: float, end: float) -> float:
    """end vs start in % of start; a rise from 0 is infinite, 0 to 0 no change."""
    if start > 0:
        return 100.0 * (end - start) / start
    return math.inf if end > 0 else 0.0


def _logs(y: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(y, 0.0) + LOG_OFFSET * float(y.mean()))


def p_value(y: np.ndarray) -> float:
    """The trend's p-value on log(value + LOG_OFFSET x mean), at most MAX_TEST_POINTS
    (consecutive values averaged), the points taken as evenly spaced."""
    logs = _logs(y)
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


def amount(series: str, value: float) -> str:
    """A rate in its unit: '1,466/s', '11.7 MB/s', '3,020 tps'."""
    if series == "wal_bytes_per_s":
        return f"{fmt_bytes(value)}/s"
    if series in ("tps", "tpmc"):
        return f"{sig3(value)} {SERIES[series]}"
    return f"{sig3(value)}/s"


@dataclass(frozen=True)
class Drift:
    label: str  # the variant
    series: str  # stored name
    n_drifted: int
    n_tested: int
    median_change_pct: float  # over the drifted runs
    median_start: float = math.nan  # the fitted first-second value, median of the drifted runs
    median_end: float = math.nan  # ... and the last-second value

    def sentence(self) -> str:
        fell = self.median_change_pct < 0
        size = (
            f"{abs(self.median_change_pct):.0f} %"
            if math.isfinite(self.median_change_pct)
            else "from 0"
        )
        span = ""
        if math.isfinite(self.median_start) and math.isfinite(self.median_end):
            span = (
                f" (from about {amount(self.series, self.median_start)} "
                f"to {amount(self.series, self.median_end)})"
            )
        return (
            f"{SERIES[self.series]} {'fell' if fell else 'rose'} {size} inside the measured "
            f"window{span} in {self.n_drifted} of {self.n_tested} runs of {self.label}: "
            f"{self.advice()}"
        )

    def advice(self) -> str:
        if self.series in CHECKPOINT_SIGNS and self.median_change_pct < 0:
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
        drifted = [tr for tr in trends if tr.drifted]
        if drifted:
            out.append(
                Drift(
                    label,
                    name,
                    len(drifted),
                    len(trends),
                    statistics.median(tr.change_pct for tr in drifted),
                    statistics.median(tr.start for tr in drifted),
                    statistics.median(tr.end for tr in drifted),
                )
            )
    return out


def notes(runs_by_label: Mapping[str, Sequence[Mapping[str, Points]]]) -> list[str]:
    """The sentences for every variant's drifted series (empty: every window tested was
    stationary)."""
    return [
        d.sentence() for label, runs in runs_by_label.items() for d in variant_drifts(label, runs)
    ]

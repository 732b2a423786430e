"""Is a run's measured window stationary? A test on its per-second series (pure).

A run's number is an average over its window. When the workload's rates still move inside
that window (the full-page-image storm after a checkpoint decaying, a cold cache
warming), the average depends on which phase of the movement the window caught, and two
variants whose movements last differently are compared at different phases.

For one series, on log(value + 1 % of the mean, at least 1): the largest contrast between
the mean of the window's first k points and the mean of the rest, over every k, each
divided by its standard error sqrt(1/k + 1/(n - k)) x a noise scale read from the
point-to-point differences (their median absolute deviation, which a storm of a few
seconds or a level shift barely moves, where a whole-window error absorbs them). So a
storm that falls 83 % and levels off within the window's first fifth is seen, as is a
steady drift (its best split is near the middle). The log makes a decay by a constant
factor per second a straight line; the offset keeps a rate that reaches zero finite, and
at least 1 (log(1 + count) for a few images a second) keeps each 0 of a small counter from
being an outlier (flat Poisson counts of 1 a second: 6-8 % flagged with 1 % alone).

The p-value comes from that statistic's distribution simulated without any change, on the
series' own time axis (an irregular gap is an AR(1) step of phi to the gap's power), for
AR(1) noise with phi 0, 0.3 and 0.62 (seeded, cached per time axis): the largest of the
three tail shares. Per-second rates follow each other (autocorrelated noise); taking the
worst of the three keeps false alarms under MAX_P = 5 % for phi up to 0.6 over 8 to 60
points (3.5 to 5 % at phi 0.6, the 0.62 a margin for the simulation's own error; 1 % or
less at phi 0.3 over 20 points or more). With a fixed seed
(tests/analysis/test_stationarity_storms.py): a storm falling 83 % within the first fifth
under CV 10 % AR(1) noise with phi 0.3 is flagged in all of 200 windows of 20, 40 and 60
points; the whole-window Kiefer-Vogelsang-Bunzel trend test used before flagged it 0.2 to
3 % of the time. Fewer than MIN_POINTS = 8 points are not judged: at 8 that storm is seen
in about 80 % of windows, and fewer leave the worst-case null little to decide with.

The size is read from the least-squares line of the log values on time (the same time
axis): its fitted values at the window's first and last second, back on the series' own
scale (minus the offset, at least 0), and the change from the first to the last as a share
of the first (`change_pct`): a storm that decays from 1,466 to 49 images/s "fell 97 %",
never more than 100 %. A series drifted when both p < MAX_P and |change| >=
MIN_CHANGE_PCT: a change too small to matter is not reported, however certain.

Across many windows one flagged window is not a finding: noise alone flags up to MAX_P of
them. `summary_lines` says how many windows were judged and how many drifted against the
number noise gives, and names a variant's drift only when its share of drifted windows is
above MAX_P by a one-sided binomial test at FINDING_P; with no flag it says "judged flat:
N of N windows" or "not judged (windows of K points; at least 8 needed)".

The series judged (SERIES): throughput (tps, tpmc), WAL bytes/s and full-page images/s;
their stored names come from blocklab.probes.derived and the workload drivers.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from blocklab.units import fmt_bytes, sig3

MAX_P = 0.05  # the false-alarm rate for AR(1) noise with phi up to NULL_PHIS[-1]
MIN_CHANGE_PCT = 5.0  # smaller fitted changes first -> last second are not reported
MIN_POINTS = 8  # fewer seconds than this: no verdict (see the docstring)
LOG_OFFSET = 0.01  # the test runs on log(value + 1 % of the mean, at least 1): see _offset
MAX_TEST_POINTS = 120  # longer series are averaged down to this many points for the test
NULL_PHIS = (0.0, 0.3, 0.62)  # AR(1) noises simulated, the worst taken: a margin for 0.6
NULL_DRAWS = 20_000
NULL_SEED = 21
FINDING_P = 0.05  # a variant's share of drifted windows vs MAX_P: one-sided binomial test

# What a kept trend was judged by (blocklab.analysis.kept_trends): trends kept under another
# METHOD are judged again. Bump TEST_VERSION with any change to how a trend is computed
# (tests/analysis/test_kept_trends.py pins the source of the functions that compute it).
TEST_VERSION = 1
_JUDGED_WITH = (
    TEST_VERSION,
    MAX_P,
    MIN_CHANGE_PCT,
    MIN_POINTS,
    LOG_OFFSET,
    MAX_TEST_POINTS,
    NULL_PHIS,
    NULL_DRAWS,
    NULL_SEED,
    np.__version__,  # the nulls' random draws
)
METHOD = "shift-" + hashlib.sha256(repr(_JUDGED_WITH).encode()).hexdigest()[:16]

RULE = (
    f"a shift of the log values between the window's first part and the rest, or a trend, "
    f"with p < {MAX_P:g} for AR(1) noise up to phi {NULL_PHIS[-1]:g}, and a fitted change from "
    f"the window's first second to its last of at least {MIN_CHANGE_PCT:g} %"
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


def _finite(points: Points) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in points if v is not None and math.isfinite(v)]


def trend(points: Points) -> Trend | None:
    """The test of one series (None: fewer than MIN_POINTS values, a mean <= 0 or a
    single timestamp)."""
    fit = _fit(points)
    return None if fit is None else fit.trend(p_value(fit.t, fit.y))


@dataclass(frozen=True)
class _Fit:
    """A series' log-scale fit, before its p-value."""

    t: np.ndarray
    y: np.ndarray
    mean: float
    start: float
    end: float

    def trend(self, p: float) -> Trend:
        change = change_pct(self.start, self.end)
        drifted = p < MAX_P and abs(change) >= MIN_CHANGE_PCT
        return Trend(len(self.y), self.mean, self.start, self.end, change, p, drifted)


def _fit(points: Points) -> _Fit | None:
    pts = sorted(_finite(points))
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
    offset = float(_offset(y)[0])

    def fitted(at: float) -> float:
        return max(0.0, math.exp(float(logs.mean()) + slope * (at - float(t.mean()))) - offset)

    return _Fit(t, y, mean, fitted(float(t[0])), fitted(float(t[-1])))


def change_pct(start: float, end: float) -> float:
    """end vs start in % of start; a rise from 0 is infinite, 0 to 0 no change."""
    if start > 0:
        return 100.0 * (end - start) / start
    return math.inf if end > 0 else 0.0


def _offset(y: np.ndarray) -> np.ndarray:
    """What the log adds, per row of y: LOG_OFFSET x the mean, at least 1 (one image, one
    transaction, one byte a second), so that a counter of a few a second does not make
    each 0 an outlier (log(1 + count) for the smallest rates)."""
    return np.maximum(LOG_OFFSET * y.mean(axis=-1, keepdims=True), 1.0)


def _logs(y: np.ndarray) -> np.ndarray:
    """log(value + _offset), per row of y."""
    return np.log(np.maximum(y, 0.0) + _offset(y))


def p_value(t: np.ndarray, y: np.ndarray) -> float:
    """The p-value of one series y at times t (sorted): p_values of one row."""
    return float(p_values(t, np.asarray(y, dtype=float)[None, :])[0])


def p_values(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of y (k x n, values at the sorted times t), the p-value of shift_statistic on
    log(value + LOG_OFFSET x row mean), at most MAX_TEST_POINTS (consecutive points
    averaged, times as well): the largest tail share over the nulls simulated on the same
    time axis for each of NULL_PHIS."""
    logs, times = _logs(y), np.asarray(t, dtype=float)
    k = math.ceil(len(times) / MAX_TEST_POINTS)
    if k > 1:
        cuts = np.arange(0, len(times), k)
        logs = np.add.reduceat(logs, cuts, axis=-1) / np.diff([*cuts, len(times)])
        times = np.add.reduceat(times, cuts) / np.diff([*cuts, len(times)])
    stats = shift_statistic(logs)
    gaps = np.diff(times)
    unit = float(np.median(gaps)) or 1.0
    # gaps to a tenth of the median gap: a probe's millisecond jitter is a regular axis,
    # and one null serves every run of the same length
    nulls = _null_statistics(tuple(np.round(gaps / unit, 1).tolist()))
    draws = nulls.shape[1]
    at_least = draws - np.array([np.searchsorted(row, stats, side="left") for row in nulls])
    return (at_least.max(axis=0) + 1) / (draws + 1)


def diff_scale(x: np.ndarray) -> np.ndarray:
    """Per row of x, the noise's standard deviation read from the point-to-point differences:
    their median absolute deviation (x 1.4826 / sqrt 2), which a few large steps barely move;
    where more than half the differences are equal (a counter stuck at 0), their mean
    absolute deviation (x sqrt(pi / 2) / sqrt 2) instead."""
    d = np.diff(x, axis=-1)
    d = np.abs(d - np.median(d, axis=-1, keepdims=True))
    mad = 1.4826 * np.median(d, axis=-1)
    return np.where(mad > 0, mad, math.sqrt(math.pi / 2) * d.mean(axis=-1)) / math.sqrt(2)


def shift_statistic(x: np.ndarray) -> np.ndarray:
    """Per row of x (k x n), the largest |mean(first j) - mean(rest)| / sqrt(1/j + 1/(n-j))
    over j = 1 .. n-1, divided by diff_scale (infinite: a contrast and no noise)."""
    n = x.shape[-1]
    sums = np.cumsum(x, axis=-1)
    j = np.arange(1, n, dtype=float)
    first = sums[:, :-1] / j
    rest = (sums[:, -1:] - sums[:, :-1]) / (n - j)
    contrast = (np.abs(first - rest) / np.sqrt(1 / j + 1 / (n - j))).max(axis=-1)
    scale = diff_scale(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, contrast / scale, np.where(contrast > 1e-12, np.inf, 0.0))


@lru_cache(maxsize=64)
def _null_statistics(gaps: tuple[float, ...]) -> np.ndarray:
    """shift_statistic without any change, one sorted row per phi of NULL_PHIS: NULL_DRAWS
    stationary AR(1) series of unit variance on the time axis whose gaps (in median gaps)
    are `gaps`, each step phi ** gap; seeded (a series' p-value is reproducible)."""
    rng = np.random.default_rng(NULL_SEED)
    rows = []
    for phi in NULL_PHIS:
        noise = rng.standard_normal((NULL_DRAWS, len(gaps) + 1))
        series = np.empty_like(noise)
        series[:, 0] = noise[:, 0]
        for i, gap in enumerate(gaps, start=1):
            step = phi**gap if phi > 0 else 0.0
            series[:, i] = step * series[:, i - 1] + math.sqrt(1 - step**2) * noise[:, i]
        rows.append(np.sort(shift_statistic(series)))
    return np.array(rows)


def run_trends(series: Mapping[str, Points]) -> dict[str, Trend]:
    """The judged series of one run that could be tested, by stored name."""
    return runs_trends([series])[0]


def runs_trends(runs: Sequence[Mapping[str, Points]]) -> list[dict[str, Trend]]:
    """run_trends of each run, the p-values of the series on the same time axis computed
    together (one p_values call of k rows, not k calls: each row's p-value is its own)."""
    fits = [
        (i, name, fit)
        for i, series in enumerate(runs)
        for name in SERIES
        if name in series and (fit := _fit(series[name])) is not None
    ]
    by_axis: dict[tuple[float, ...], list[int]] = {}
    for k, (_, _, fit) in enumerate(fits):
        by_axis.setdefault(tuple(fit.t.tolist()), []).append(k)
    p: dict[int, float] = {}
    for ks in by_axis.values():
        t = fits[ks[0]][2].t
        rows = p_values(t, np.stack([fits[k][2].y for k in ks]))
        p.update(zip(ks, (float(x) for x in rows), strict=True))
    out: list[dict[str, Trend]] = [{} for _ in runs]
    for k, (i, name, fit) in enumerate(fits):
        out[i][name] = fit.trend(p[k])
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

    @property
    def noise_p(self) -> float:
        """How likely noise alone (each window flagged with probability MAX_P) flags at
        least n_drifted of n_tested windows: the one-sided binomial test's p-value, the
        binomial's upper tail P(X >= n_drifted), as scipy.stats.binomtest(..., "greater")
        gives it (tests/analysis/test_stationarity.py holds it to that), from
        scipy.special: scipy.stats takes 0.5 s to import, in every summary's process."""
        return min(float(special.bdtrc(self.n_drifted - 1, self.n_tested, MAX_P)), 1.0)

    @property
    def finding(self) -> bool:
        return self.noise_p < FINDING_P

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
    return _drifts(label, runs_trends(runs))


def _drifts(label: str, runs: Sequence[Mapping[str, Trend]]) -> list[Drift]:
    tested: dict[str, list[Trend]] = {}
    for trends_of_run in runs:
        for name, tr in trends_of_run.items():
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
    """The sentences for every variant's drifted series whose share of drifted windows is
    a finding (Drift.finding; empty: none is more than noise gives)."""
    return [
        d.sentence()
        for label, runs in runs_by_label.items()
        for d in variant_drifts(label, runs)
        if d.finding
    ]


FINDING_PREFIX = "! stationarity: "  # a summary line that is a drift finding


@dataclass(frozen=True)
class Window:
    """A run's measured window as the summary judges it: its length in points (the most
    values of its judged series) and the trends of those series that could be tested."""

    points: int
    trends: Mapping[str, Trend]


def windows(runs: Sequence[Mapping[str, Points]]) -> list[Window]:
    """The Window of each run's judged series (runs_trends: one p_values call an axis)."""
    return [Window(_points(s), t) for s, t in zip(runs, runs_trends(runs), strict=True)]


def summary_lines(runs_by_label: Mapping[str, Sequence[Mapping[str, Points]]]) -> list[str]:
    """window_lines of every variant's runs, from their series."""
    every = windows([s for runs in runs_by_label.values() for s in runs])
    by_label, at = {}, 0
    for label, runs in runs_by_label.items():
        by_label[label], at = every[at : at + len(runs)], at + len(runs)
    return window_lines(by_label)


def window_lines(windows_by_label: Mapping[str, Sequence[Window]]) -> list[str]:
    """What the summary says of the measured windows of every variant's runs (empty: no
    run): with no drift, one line, "judged flat: N of N windows" or "not judged"; per series
    with drifted windows, their share against the share noise gives, then (prefixed "! ")
    the sentence of each variant whose drift is a finding."""
    trends = {label: [w.trends for w in ws] for label, ws in windows_by_label.items()}
    runs = [w for ws in windows_by_label.values() for w in ws]
    judged = [bool(w.trends) for w in runs]
    if not runs:
        return []
    drifts = [d for label, trs in trends.items() for d in _drifts(label, trs)]
    lines = []
    if not drifts and any(judged):
        sizes = [w.points for w, j in zip(runs, judged, strict=True) if j]
        lines.append(
            f"stationarity: judged flat: {sum(judged)} of {sum(judged)} windows "
            f"({_span(sizes)}-point windows)"
        )
    for name in SERIES:
        if of_series := [d for d in drifts if d.series == name]:
            tested = sum(name in tr for trs in trends.values() for tr in trs)
            lines.extend(_series_lines(name, of_series, tested))
    if not all(judged):
        sizes = [w.points for w, j in zip(runs, judged, strict=True) if not j]
        lines.append(
            f"stationarity: {'' if any(judged) else f'{len(runs)} windows '}not judged "
            f"(windows of {_span(sizes)} points; at least {MIN_POINTS} needed)"
        )
    return lines


def _series_lines(name: str, drifts: list[Drift], tested: int) -> list[str]:
    drifted = sum(d.n_drifted for d in drifts)
    head = (
        f"stationarity: {SERIES[name]}: {drifted} of {tested} windows drift (noise alone "
        f"flags at most {100 * MAX_P:g} %: {MAX_P * tested:.1f} expected)"
    )
    found = [f"{FINDING_PREFIX}{d.sentence()}" for d in drifts if d.finding]
    return [head + ("" if found else "; no more than noise gives"), *found]


def _points(series: Mapping[str, Points]) -> int:
    """The most values of a run's judged series (its window's length in points)."""
    return max((len(_finite(pts)) for name, pts in series.items() if name in SERIES), default=0)


def _span(sizes: Sequence[int]) -> str:
    lo, hi = min(sizes), max(sizes)
    return f"{lo}" if lo == hi else f"{lo} to {hi}"

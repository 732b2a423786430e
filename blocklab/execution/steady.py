"""Pure steady-state detection for a warm-up: when has throughput stopped changing?
(`chunks_steady`, for the chunked warm-up of [design] warmup = "steady": and have the WAL
rates stopped falling?)

The input is a per-second tps series (pgbench -P 1, second 1 first). Throughput is
steady from second t when the window of `window_s` seconds starting at t is both quiet
and flat:

- quiet: its coefficient of variation (stdev / mean) is at most `max_cv`;
- flat: the least-squares line through it changes by at most `max_drift` of the mean
  over the window (a slow ramp can have a small CV and still be a ramp).

The first such t is where the measured run may start. The search is bounded: when no
window qualifies by `max_warmup_s`, the warm-up ends there anyway and the result says
that throughput was not steady (data, not an exception: the run record stores it).

No I/O here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW_S = 10
MAX_CV = 0.05
MAX_DRIFT = 0.05
MAX_WARMUP_S = 120


@dataclass(frozen=True)
class Window:
    start_s: int  # seconds of the series before the window
    cv: float
    drift: float  # the fitted line's change over the window, as a fraction of the mean


@dataclass(frozen=True)
class SteadyState:
    steady: bool  # a quiet, flat window began within max_warmup_s
    warmup_s: int  # seconds to discard before measuring
    window: Window | None  # the first steady window, or the last one examined
    note: str


def window_stats(tps: Sequence[float], start: int, width: int) -> Window:
    xs = [float(x) for x in tps[start : start + width]]
    mean = statistics.fmean(xs)
    if mean <= 0:
        return Window(start, float("inf"), float("inf"))
    slope = statistics.linear_regression(range(width), xs).slope
    return Window(start, statistics.stdev(xs) / mean, abs(slope) * (width - 1) / mean)


def detect(
    tps: Sequence[float],
    *,
    window_s: int = WINDOW_S,
    max_cv: float = MAX_CV,
    max_drift: float = MAX_DRIFT,
    max_warmup_s: int = MAX_WARMUP_S,
) -> SteadyState:
    """Where a steady state begins in `tps` (see the module docstring)."""
    if window_s < 3:
        raise ValueError(f"the window must span at least 3 seconds, got {window_s}")
    last = min(max_warmup_s, len(tps) - window_s)
    examined = None
    for start in range(0, last + 1):
        examined = window_stats(tps, start, window_s)
        if examined.cv <= max_cv and examined.drift <= max_drift:
            return SteadyState(True, start, examined, _steady_note(examined, window_s))
    if len(tps) - window_s < max_warmup_s:
        note = f"not steady yet after {len(tps)} s (max warm-up {max_warmup_s} s)"
        return SteadyState(False, len(tps), examined, note)
    note = (
        f"not steady within the max warm-up of {max_warmup_s} s: no {window_s} s window "
        f"had CV <= {max_cv:.0%} and drift <= {max_drift:.0%}; measuring from there anyway"
    )
    return SteadyState(False, max_warmup_s, examined, note)


def warmup_done(
    tps_so_far: Sequence[float], *, window_s: int = WINDOW_S, max_warmup_s: int = MAX_WARMUP_S
) -> bool:
    """During a warm-up: stop now? True once steady, or when the max warm-up is over."""
    if len(tps_so_far) >= max_warmup_s:
        return True
    return detect(tps_so_far, window_s=window_s, max_warmup_s=max_warmup_s).steady


def _steady_note(w: Window, window_s: int) -> str:
    return (
        f"steady from second {w.start_s}: the next {window_s} s had CV {w.cv:.1%} and "
        f"drift {w.drift:.1%}"
    )


# -- a chunked warm-up: tps steady and the WAL rates no longer falling ---------------------

FALLING_RATES = ("wal_fpi_per_s", "wal_bytes_per_s")  # judged besides tps, in this order
MAX_FALL = 0.05  # a rate falls when its fitted line over the window drops more than this
NEGLIGIBLE_SHARE = 0.05  # a rate under this share of its warm-up peak is no longer judged
WAL_COUNTERS_SQL = "SELECT wal_fpi || ' ' || wal_bytes FROM pg_stat_wal"


@dataclass(frozen=True)
class Chunk:
    """One warm-up chunk: its throughput and its WAL rates (None: not measured)."""

    tps: float
    wal_fpi_per_s: float | None = None
    wal_bytes_per_s: float | None = None


@dataclass(frozen=True)
class ChunkDecision:
    steady: bool
    reason: str  # what still moves, or why it is steady


def chunks_steady(chunks: Sequence[Chunk], window: int, max_cv: float) -> ChunkDecision:
    """Steady after these chunks? The last `window` chunks' tps is quiet and flat (detect),
    and neither WAL rate falls over them (its fitted line drops at most MAX_FALL of its
    mean), a rate being ignored once its last chunk is under NEGLIGIBLE_SHARE of its peak."""
    if len(chunks) < window:
        return ChunkDecision(False, f"fewer than {window} chunks")
    last = chunks[-window:]
    tps = detect([c.tps for c in last], window_s=window, max_cv=max_cv, max_warmup_s=0)
    if not tps.steady:
        return ChunkDecision(False, "tps still moves")
    for name in FALLING_RATES:
        values = [getattr(c, name) for c in chunks]
        fall = rate_fall(values, window)
        if fall is not None and fall > MAX_FALL:
            return ChunkDecision(False, f"{name} still falls ({fall:.0%} over {window} chunks)")
    return ChunkDecision(True, f"tps steady, {' and '.join(FALLING_RATES)} no longer falling")


def rate_fall(values: Sequence[float | None], window: int) -> float | None:
    """How much the last `window` values' fitted line falls, as a share of their mean (<= 0:
    not falling); None when the rate is not judged: a value missing, or the last one under
    NEGLIGIBLE_SHARE of the peak so far (the storm is over), or no rate at all."""
    if any(v is None for v in values[-window:]):
        return None
    got = [float(v) for v in values if v is not None]
    last = got[-window:]
    peak = max(got)
    mean = statistics.fmean(last)
    if peak <= 0 or last[-1] < NEGLIGIBLE_SHARE * peak or mean <= 0:
        return None
    slope = statistics.linear_regression(range(window), last).slope
    return -slope * (window - 1) / mean


def wal_counters(text: str) -> tuple[float, float] | None:
    """(wal_fpi, wal_bytes) from WAL_COUNTERS_SQL's output; None when unreadable."""
    parts = text.split()
    if len(parts) != 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None


def wal_rates(
    before: tuple[float, float] | None, after: tuple[float, float] | None, seconds: float
) -> tuple[float | None, float | None]:
    """(wal_fpi_per_s, wal_bytes_per_s) between two counter readings (None: a reading or
    the time missing, or the counters went back: a stats reset)."""
    if before is None or after is None or seconds <= 0:
        return None, None
    fpi, wal = (after[0] - before[0]) / seconds, (after[1] - before[1]) / seconds
    if fpi < 0 or wal < 0:
        return None, None
    return fpi, wal

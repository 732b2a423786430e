"""The chunked steady warm-up also waits for the WAL rates to stop falling
(blocklab.execution.steady.chunks_steady, blocklab.execution.controls.steady_warmup), on
synthetic chunk sequences: tps flat from the start while a post-checkpoint image storm
decays, as in issue 21."""

from __future__ import annotations

from collections.abc import Iterator

from blocklab.execution import controls, steady
from blocklab.execution.steady import Chunk, chunks_steady


def _storm(n: int, decay: float = 0.6) -> list[Chunk]:
    """tps flat at 3,000; images/s from 2,000 falling by `decay` per chunk; WAL bytes/s a
    flat base of 20 MB/s plus 8 kB per image."""
    out = []
    for i in range(n):
        fpi = 2000.0 * decay**i
        out.append(Chunk(3000.0 + (5 if i % 2 else -5), fpi, 20e6 + 8192 * fpi))
    return out


def test_flat_tps_alone_is_not_steady_while_images_still_fall() -> None:
    chunks = _storm(12)
    # with tps alone, 3 chunks would do
    assert chunks_steady([Chunk(c.tps) for c in chunks[:3]], 3, 0.05).steady
    first = next(i for i in range(1, 13) if chunks_steady(chunks[:i], 3, 0.05).steady)
    # 2,000 x 0.6^i: images/s under 5 % of the peak from the 7th chunk (93/s); WAL bytes/s
    # (20 MB + 8 kB x images) still falls 6 % over chunks 5-7, under 5 % over 6-8
    assert first == 8
    d = chunks_steady(chunks[:5], 3, 0.05)
    assert not d.steady and d.reason.startswith("wal_fpi_per_s still falls")
    d = chunks_steady(chunks[:7], 3, 0.05)
    assert not d.steady and d.reason == "wal_bytes_per_s still falls (6% over 3 chunks)"


def test_a_falling_wal_rate_holds_the_warmup_even_without_images() -> None:
    chunks = [Chunk(3000.0, None, b) for b in (40e6, 34e6, 29e6, 25e6, 24.5e6, 24.6e6, 24.4e6)]
    decisions = [chunks_steady(chunks[:i], 3, 0.05) for i in range(3, 8)]
    assert [d.steady for d in decisions] == [False, False, False, True, True]
    assert "wal_bytes_per_s still falls" in decisions[0].reason


def test_a_rising_or_flat_rate_does_not_hold_it_and_unmeasured_rates_are_not_judged() -> None:
    rising = [Chunk(3000.0, f, 1e6 * f) for f in (100.0, 150.0, 220.0)]
    assert chunks_steady(rising, 3, 0.05).steady
    noisy = [Chunk(3000.0, f, None) for f in (500.0, 480.0, 505.0)]
    assert chunks_steady(noisy, 3, 0.05).steady
    assert chunks_steady([Chunk(3000.0)] * 3, 3, 0.05).steady
    assert not chunks_steady([Chunk(3000.0)] * 2, 3, 0.05).steady
    swinging = [Chunk(t, 10.0, 1e6) for t in (2000.0, 3000.0, 2500.0)]
    assert chunks_steady(swinging, 3, 0.05).reason == "tps still moves"


def test_rate_fall_ignores_a_rate_under_5_pct_of_its_peak() -> None:
    # the last chunk at 4 % of the peak: the storm is over, however fast it still halves
    assert steady.rate_fall([2000.0, 400.0, 160.0, 80.0], 3) is None
    assert steady.rate_fall([2000.0, 400.0, 200.0, 110.0], 3) is not None  # 5.5 %: judged
    fall = steady.rate_fall([400.0, 200.0, 120.0], 3)
    assert fall is not None and abs(fall - 280 / (720 / 3)) < 1e-9  # slope -140 x 2 / mean
    assert steady.rate_fall([100.0, None, 90.0], 3) is None


def test_counters_and_rates_from_pg_stat_wal() -> None:
    assert steady.wal_counters("1200 98304000\n") == (1200.0, 98304000.0)
    assert steady.wal_counters("") is None and steady.wal_counters("a b") is None
    assert steady.wal_rates((1000.0, 5e6), (2000.0, 15e6), 5.0) == (200.0, 2e6)
    assert steady.wal_rates(None, (2000.0, 15e6), 5.0) == (None, None)
    assert steady.wal_rates((3000.0, 5e6), (2000.0, 15e6), 5.0) == (None, None)  # reset


def test_steady_warmup_records_the_rates_and_what_still_falls() -> None:
    storm: Iterator[Chunk] = iter(_storm(40, decay=0.9))
    ok, report = controls.steady_warmup(lambda _s: next(storm), 30)
    assert ok and not report["steady"] and report["warmup_s"] == 30
    assert report["chunks_wal_fpi_per_s"][:2] == [2000.0, 1800.0]
    assert len(report["chunks_wal_bytes_per_s"]) == 6
    assert "(wal_fpi_per_s still falls" in report["note"]
    fast: Iterator[Chunk] = iter(_storm(40))
    ok, report = controls.steady_warmup(lambda _s: next(fast), 120)
    assert ok and report["steady"] and report["warmup_s"] == 40  # 8 chunks, as above
    assert "WAL rates no longer fell" in report["note"]


def test_the_files_smallest_bound_is_the_fewest_seconds_a_steady_warmup_runs() -> None:
    from blocklab.experiment_file import design

    fewest_s = controls.STEADY_WINDOW_CHUNKS * controls.WARMUP_CHUNK_S
    assert design.MIN_WARMUP_MAX_S == fewest_s
    ran: list[int] = []

    def chunk(seconds: int) -> Chunk:
        ran.append(seconds)
        return Chunk(tps=100.0 + len(ran) * 50, wal_bytes_per_s=None, wal_fpi_per_s=None)

    _ok, report = controls.steady_warmup(chunk, design.MIN_WARMUP_MAX_S)
    assert sum(ran) == report["warmup_s"] == fewest_s  # never steady: the bound, no more

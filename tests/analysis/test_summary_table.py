"""The terminal summary: every metric in its unit, no number cut at 80, 120 or 200 columns,
and the gain printed as the centre of its own interval."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import small_experiment
from report_fixture import write_synthetic_results
from rich.console import Console

from blocklab import units
from blocklab.analysis import stats
from blocklab.analysis.metrics import metric_info
from blocklab.analysis.summary import ExperimentSummary, VariantSummary, summarize_experiment
from blocklab.analysis.summary_table import FULL, print_summary
from blocklab.store import ResultsDB, RunRecord

WIDTHS = (80, 120, 200)
METRICS = ("tps", "hot_update_ratio", "device_data_write_bytes_per_xact", "wal_bytes_per_xact")


def test_units_read_as_written() -> None:
    assert units.fmt_value(8765.0, "bytes") == "8.56 kB"  # 1 kB = 1024 bytes, as in PostgreSQL
    assert units.fmt_value(760.0, "bytes") == "760 B"
    assert units.fmt_value(1000.0, "bytes") == "0.977 kB"  # never four digits in a unit
    assert units.fmt_value(104_857_600.0, "bytes") == "100 MB"
    assert units.fmt_value(2.5e9, "bytes") == "2.33 GB"
    assert units.fmt_value(0.8123, "fraction") == "81.2 %"
    assert units.fmt_value(0.000123, "s") == "123 µs"
    assert units.fmt_value(3.774, "ms") == "3.77 ms"
    assert units.fmt_value(8560.3, "transactions/s") == "8,560"
    assert units.fmt_value(9.996, "count") == "10.0"
    assert units.fmt_difference(-0.021, "fraction") == "-2.1 pp"
    assert units.fmt_difference(1500.0, "bytes") == "+1.46 kB"
    assert [units.fmt_size(b) for b in (512, 1024, 4096, 65536)] == [
        "512 B",
        "1 kB",
        "4 kB",
        "64 kB",
    ]


def _printed(s: ExperimentSummary, width: int, *, everything: bool = False) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_summary(console, s, everything=everything)
    return console.export_text()


def _expected(v: VariantSummary, unit: str) -> dict[str, str]:
    """The cells a reader must find, formatted from the statistics here, not by the table."""
    st = v.summary
    assert st is not None and st.stdev is not None
    f = lambda x: units.fmt_value(x, unit)  # noqa: E731
    out = {
        "mean ± stdev": f"{f(st.mean)} ± {f(st.stdev)}",
        "95 % CI": f"{f(st.ci95_low)} – {f(st.ci95_high)}",
        "median": f(st.median),
    }
    c = v.comparison
    if c is not None and c.ratio is not None and c.ci95_low is not None and c.ci95_high:
        lo, hi = (c.ci95_low - 1) * 100, (c.ci95_high - 1) * 100
        out["vs reference"] = f"{(c.ratio - 1) * 100:+.1f} % ({lo:+.1f} to {hi:+.1f})"
    return out


def _cells_of(text: str, label: str) -> list[str]:
    """The texts of a variant's table cells, or of its block's lines."""
    lines = text.splitlines()
    rows = [[c.strip() for c in line.split("│")] for line in lines]
    cells = [c for row in rows if len(row) > 2 and row[1] == label for c in row]
    if cells:  # the row of each table (the spread's second table too)
        return cells
    start = next(i for i, line in enumerate(lines) if line.split(" (")[0] == label)
    block: list[str] = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or line.startswith("  !"):
            break
        block.append(line.split(":", 1)[1].strip())  # "  name:   value"
    return block


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_results(tmp_path_factory.mktemp("summary") / "results")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("metric", METRICS)
def test_no_number_is_cut_and_each_is_the_statistic(
    synthetic: Path, metric: str, width: int
) -> None:
    with ResultsDB(synthetic, create=False) as db:
        s = summarize_experiment(db, "synthetic-geometry", metric)
    text = _printed(s, width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    unit = metric_info(metric).unit
    for v in s.variants:
        cells = _cells_of(text, v.label)
        for name, expected in _expected(v, unit).items():
            assert expected in cells, f"{v.label} {name}: {expected!r} not in {cells}"


def test_the_widest_layout_that_fits(synthetic: Path) -> None:
    with ResultsDB(synthetic, create=False) as db:
        s = summarize_experiment(db, "synthetic-geometry", "tps")
    assert "┃ median" in _printed(s, 200) and _printed(s, 200).count("┏") == 1
    # 120 columns: the same columns in two tables (issue 35: min, median, max and
    # latency were silently left out here)
    assert _printed(s, 120).count("┏") == 2 and "┃ mean ± stdev" in _printed(s, 120)
    assert "┃ median" in _printed(s, 120).split("┃ mean ± stdev")[1]
    assert "┃" not in _printed(s, 80) and "\n  median:" in _printed(s, 80)


@pytest.mark.parametrize("width", (80, 100, 120, 160))
def test_every_column_at_any_width(synthetic: Path, width: int) -> None:
    """No column is dropped: each header (a table's, or a block's line name) is printed."""
    with ResultsDB(synthetic, create=False) as db:
        s = summarize_experiment(db, "synthetic-geometry", "tps")
    text = _printed(s, width)
    for header in FULL[1:]:  # a block is headed by the variant itself
        in_table = re.search(rf"┃ +{re.escape(header)} +┃", text)
        assert in_table or f"\n  {header}:" in text, (width, header)


def test_fractions_are_percentages_and_bytes_have_prefixes(synthetic: Path) -> None:
    with ResultsDB(synthetic, create=False) as db:
        hot = summarize_experiment(db, "synthetic-geometry", "hot_update_ratio")
        dev = summarize_experiment(db, "synthetic-geometry", "device_data_write_bytes_per_xact")
    text = _printed(hot, 200)
    assert "0.8 ± 0.0" not in text
    for v in hot.variants:
        assert v.summary is not None and v.summary.ci95_high is not None
        assert 0 <= v.summary.ci95_low <= v.summary.ci95_high <= 1  # type: ignore[operator]
        assert units.fmt_value(v.summary.mean, "fraction") in text
    assert all(
        units.fmt_value(v.summary.mean, "bytes") in _printed(dev, 200)
        for v in dev.variants
        if v.summary
    )


VALUES = {  # variant -> metric -> values of rounds 1..10
    "ref": {
        "tps": [100.0] * 9 + [1000.0],
        "bgwriter_write_bytes_per_xact": [0.0, 4096.0] * 5,
        "table_bytes": [104_857_600.0] * 10,
    },
    "other": {
        "tps": [95.0] * 9 + [1300.0],
        "bgwriter_write_bytes_per_xact": [1024.0, 8192.0, 2048.0, 6144.0, 0.0] * 2,
        "table_bytes": [2 * 104_857_600.0] * 10,
    },
}


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[ResultsDB]:
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "paired", "ref", [(vid, vid, "{}", {}) for vid in VALUES])
        for vid, metrics in VALUES.items():
            for rnd in range(1, 11):
                extra = {k: v[rnd - 1] for k, v in metrics.items() if k != "tps"}
                db.record_run(
                    RunRecord(
                        "paired",
                        vid,
                        rnd,
                        0,
                        "ok",
                        "t0",
                        "t1",
                        tps=metrics["tps"][rnd - 1],
                        latency_avg_ms=1.0,
                        metrics=extra,
                    )
                )
        yield db


def test_the_gain_printed_sits_inside_its_interval(recorded: ResultsDB) -> None:
    # mean/mean is +13.4 %; the geometric mean of the per-round ratios is -2.0 %.
    s = summarize_experiment(recorded, "paired", "tps")
    text = _printed(s, 200)
    assert "+13.4 %" not in text
    other = next(v for v in s.variants if v.label == "other")
    c = other.comparison
    assert c is not None and c.ci95_low is not None and c.ci95_high is not None
    gain = f"{(c.ratio or 0) * 100 - 100:+.1f} %"
    assert gain == "-2.0 %"
    shown = f"{gain} ({(c.ci95_low - 1) * 100:+.1f} to {(c.ci95_high - 1) * 100:+.1f})"
    assert shown in _cells_of(text, "other")
    assert (c.ci95_low - 1) * 100 < -2.0 < (c.ci95_high - 1) * 100


def test_a_zero_reference_is_a_difference_over_every_round(recorded: ResultsDB) -> None:
    s = summarize_experiment(recorded, "paired", "bgwriter_write_bytes_per_xact")
    other = next(v for v in s.variants if v.label == "other")
    c = other.comparison
    assert c is not None and c.n_pairs == 10 and c.scale == stats.DIFFERENCE
    text = _printed(s, 200)
    assert units.fmt_difference(c.difference, "bytes") in _cells_of(text, "other")[8]
    assert "no ratio: the reference is 0 in rounds [1, 3, 5, 7, 9]" in " ".join(text.split())


def test_identical_ratios_are_undetermined_and_sizes_fit_80_columns(recorded: ResultsDB) -> None:
    s = summarize_experiment(recorded, "paired", "table_bytes")
    text = _printed(s, 80)
    assert "…" not in text
    assert "100 MB" in text and "200 MB" in text
    assert re.search(r"vs reference \(95 % CI\): +\+100\.0 %\n +verdict: +undetermined", text)
    assert "zero variance" in text


def test_a_comparison_without_a_paired_round_prints_no_value() -> None:
    """A side metric with no paired round (a variant never measured it) has no estimate:
    its cell is the no-value mark, not a crash (seen on the TPC-H-like example)."""
    from blocklab.analysis import stats
    from blocklab.analysis.summary_table import gain_text
    from blocklab.units import NO_VALUE

    c = stats.Comparison(
        n_pairs=0,
        scale=stats.RATIO,
        estimate=None,
        ci95_low=None,
        ci95_high=None,
        p_value=None,
        verdict=stats.TOO_FEW,
        ci_half_width_pct=None,
    )
    assert gain_text(c, "s") == NO_VALUE


def test_request_sizes_and_fpi_are_compared_beside_tps(tmp_path: Path) -> None:
    """Issue 24: what io_method / io_combine_limit change shows in the summary's side
    comparisons, in its catalogue label and unit; a metric not stored shows no line."""
    sizes = {"ref": [8192.0, 8200.0, 8190.0, 8195.0], "combined": [131072.0, 130000.0] * 2}
    with ResultsDB(tmp_path / "results") as db:
        small_experiment(db, "aio", "ref", [(vid, vid, "{}", {}) for vid in sizes])
        for vid, values in sizes.items():
            for rnd, size in enumerate(values, start=1):
                extra = {
                    "device_data_read_bytes_per_request": size,
                    "wal_fpi_per_xact": 1.0,
                    "relation_write_bytes_per_xact": 0.0,  # nothing counted in either
                    "wal_fpi_bytes_per_xact": None,  # PostgreSQL 19+: stored without a value
                }
                db.record_run(
                    RunRecord("aio", vid, rnd, 0, "ok", "t0", "t1", tps=100.0 + rnd, metrics=extra)
                )
        s = summarize_experiment(db, "aio", "tps")
    assert set(s.side) == {
        "device_data_read_bytes_per_request",
        "wal_fpi_per_xact",
        "relation_write_bytes_per_xact",
    }
    ((label, c, zero),) = s.side["device_data_read_bytes_per_request"]
    assert not zero
    assert [z for *_, z in s.side["relation_write_bytes_per_xact"]] == [True]
    assert label == "combined" and c.ratio is not None and 15 < c.ratio < 17
    text = _printed(s, 120)
    assert "data device bytes per read request: combined +" in text
    assert "full-page images per transaction: combined" in text
    relation = metric_info("relation_write_bytes_per_xact").label
    assert f"{relation}: combined 0 in both" not in text  # folded: summary --all lists it
    assert "0 in both variants, not shown: 1 side comparison (summary --all lists them)" in text
    everything = _printed(s, 120, everything=True)
    assert f"{relation}: combined 0 in both (nothing counted)" in everything
    assert "wal_fpi_bytes_per_xact" not in s.side  # no value in any round: no line
    assert metric_info("wal_fpi_bytes_per_xact").label not in text

"""The run page's panels (blocklab.report.panels) and the index's headline
(blocklab.report.headline): pure tables and words, on made-up series and summaries."""

from __future__ import annotations

from blocklab.analysis import stats
from blocklab.analysis.metrics import metric_info
from blocklab.analysis.summary import ExperimentSummary, VariantSummary
from blocklab.report import panels
from blocklab.report.headline import headline_lines

MIB = 1024.0**2


def _pts(*values: float | None) -> list[tuple[float, float | None]]:
    return [(float(t), v) for t, v in enumerate(values, 1)]


def test_series_go_to_the_panels_an_engineer_expects() -> None:
    where = {
        k: (panels.place(k).chart.panel, panels.place(k).label)
        for k in (
            "tps",
            "wal_bytes_per_s",
            "wal_fpi_per_s",
            "device_data_write_bytes_per_s",
            "host_device_read_bytes_per_s",
            "device_wal_write_ios_per_s",
            "checkpointer_write_bytes_per_s",
            "n_tup_newpage_upd_per_s",
            "cpu_iowait_pct",
            "something_new_per_s",
        )
    }
    assert where == {
        "tps": ("throughput", "throughput"),
        "wal_bytes_per_s": ("wal", "WAL generated (pg_stat_wal)"),
        "wal_fpi_per_s": ("wal", "full-page images"),
        "device_data_write_bytes_per_s": ("io", "data device"),
        "host_device_read_bytes_per_s": ("io", "host device (shared)"),
        "device_wal_write_ios_per_s": ("io", "WAL device writes"),
        "checkpointer_write_bytes_per_s": ("buffers", "checkpointer"),
        "n_tup_newpage_upd_per_s": ("tuples", "updates onto a new page"),
        "cpu_iowait_pct": ("host", "I/O wait"),
        "something_new_per_s": ("other", "something new per s"),
    }
    assert panels.place("device_data_read_bytes_per_s").chart.id == "device-read"
    assert panels.place("something_new_per_s").chart.unit == "/s"
    assert panels.place("odd_bytes_per_s").chart.unit == panels.BYTES_PER_S
    # every chart of the table is in a panel of PANELS
    assert {c.panel for c in panels.CHARTS} <= {p for p, _ in panels.PANELS}


def test_byte_rates_are_scaled_to_binary_units() -> None:
    assert panels.byte_scale(3.5 * MIB, per_s=True) == ("MiB/s", MIB)
    assert panels.byte_scale(2 * 1024.0**3, per_s=True) == ("GiB/s", 1024.0**3)
    assert panels.byte_scale(100.0, per_s=True) == ("KiB/s", 1024.0)
    assert panels.byte_scale(0.0, per_s=False) == ("KiB", 1024.0)


def test_run_panels_fold_zero_series_and_scale_the_charts() -> None:
    series = {
        "tps": _pts(100.0, 110.0),
        "latency_ms": _pts(4.0, 5.0),
        "wal_bytes_per_s": _pts(2 * MIB, 3 * MIB),
        "wal_bytes_final_flush": [(2.02, 1.5 * MIB)],
        "wal_fpi_per_s": _pts(0.0, 0.0),
        "wal_records_per_s": _pts(0.0, None),
        "n_tup_upd_per_s": _pts(0.0, 0.0),
        "n_tup_hot_upd_per_s": _pts(0.0, 0.0),
        "blks_hit_per_s": _pts(None, None),
        "mystery": _pts(1.0, 2.0),
    }
    got = panels.run_panels(series, "tps")
    assert [p["id"] for p in got] == ["throughput", "wal", "buffers", "tuples", "other"]
    by_id = {p["id"]: p for p in got}
    wal = by_id["wal"]
    assert [c["id"] for c in wal["charts"]] == ["wal-bytes"]  # records and FPI are all zero
    chart = wal["charts"][0]
    assert (chart["title"], chart["unit"], chart["scale"]) == ("WAL volume", "MiB/s", MIB)
    assert chart["series"] == [{"key": "wal_bytes_per_s", "label": "WAL generated (pg_stat_wal)"}]
    assert chart["note"].endswith("(final flush): WAL generated (pg_stat_wal) 1.50 MiB")
    assert [z["key"] for z in wal["zero"]] == ["wal_records_per_s", "wal_fpi_per_s"]
    assert by_id["tuples"]["charts"] == []
    assert [z["label"] for z in by_id["tuples"]["zero"]] == ["tuples updated", "HOT updates"]
    assert by_id["buffers"]["empty"] == [{"key": "blks_hit_per_s", "label": "buffer hits"}]
    thr = by_id["throughput"]["charts"]
    assert [(c["id"], c["unit"], c["log_copy"]) for c in thr] == [
        ("tps", "tps", False),
        ("latency", "ms", True),
    ]
    assert by_id["other"]["charts"][0]["id"] == "other-mystery"
    assert not any("final_flush" in c["id"] for p in got for c in p["charts"])


def _comparison(ratio: float, lo: float, hi: float, verdict: str) -> stats.Comparison:
    return stats.Comparison(3, stats.RATIO, ratio, lo, hi, 0.01, verdict, 1.0)


def _variant(label: str, comp: stats.Comparison | None) -> VariantSummary:
    return VariantSummary(
        variant_id=label,
        label=label,
        dims={},
        is_reference=comp is None,
        reference_label="" if comp is None else "8k",
        n_failed=0,
        failure_reasons=[],
        values={},
        summary=None,
        comparison=comp,
        verdict="" if comp is None else comp.verdict,
        latency_avg_ms=None,
    )


def _summary(*variants: VariantSummary) -> ExperimentSummary:
    s = ExperimentSummary("x", "tps", metric_info("tps"), "8k", "done", "", 3)
    s.variants = list(variants)
    return s


def test_headline_puts_detected_differences_first_and_counts_the_rest() -> None:
    s = _summary(
        _variant("8k", None),
        _variant("4k", _comparison(1.02, 0.99, 1.05, stats.NO_DIFFERENCE)),
        _variant("16k", _comparison(0.90, 0.85, 0.95, stats.SLOWER)),
        _variant("32k", _comparison(1.30, 1.20, 1.40, stats.FASTER)),
    )
    a = headline_lines(s, limit=2)
    assert [h.text for h in a.lines] == [
        "32k vs 8k: +30.0 % (+20.0 to +40.0)",
        "16k vs 8k: -10.0 % (-15.0 to -5.0)",
    ]
    assert [(h.verdict, h.css) for h in a.lines] == [("faster", "v-faster"), ("slower", "v-slower")]
    assert a.more == "and 1 more (1 with no difference detected)"


def test_headline_without_a_difference_says_so() -> None:
    nothing = [
        _variant(f"v{i}", _comparison(1.0, 0.95, 1.05, stats.NO_DIFFERENCE)) for i in range(6)
    ]
    a = headline_lines(_summary(_variant("8k", None), *nothing), limit=4)
    assert a.lines == [] and a.more == "no difference detected (6 comparisons)"
    one = headline_lines(_summary(_variant("8k", None), nothing[0]))
    assert [h.verdict for h in one.lines] == ["no difference detected"]
    assert headline_lines(_summary(_variant("8k", None))).empty.startswith("no comparison")

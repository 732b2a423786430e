"""The JSON each page embeds (pure): experiments, comparisons, a run's series, the grid."""

from __future__ import annotations

import base64
import gzip
from collections.abc import Mapping
from typing import Any

from blocklab.analysis import carryover
from blocklab.analysis.aa import aa_sentence, warns
from blocklab.analysis.stats import Comparison
from blocklab.report import data, jsontext, manifest, panels, shape
from blocklab.report.data import ExperimentView, RunView, VariantView

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

# gzip's level for a run page's data, which a full build packs for every run: level 1
# took 0.61 of level 9's CPU and gave 7 % more bytes (4,020 against 3,751 a synthetic
# page; bench/bench_pack.py), about 3 MB more at 10,000 runs of a site of 85 MB
PACK_LEVEL = 1


def whole_seconds(t: float) -> float | int:
    """Whole seconds as integers: '12' instead of '12.0' in the embedded JSON."""
    return int(t) if float(t).is_integer() else t


def compact(points: list[tuple[float, float | None]]) -> list[tuple[float | int, float | None]]:
    return [(int(t) if float(t).is_integer() else t, v) for t, v in points]


def _r(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")


def stat_json(cell: shape.CellStats, unit: str = "") -> dict[str, Any]:
    s, c = cell.summary, cell.comparison
    return {
        "n": s.n,
        "mean": _r(s.mean),
        "stdev": _r(s.stdev),
        "lo": _r(s.ci95_low),
        "hi": _r(s.ci95_high),
        "noisy": s.noisy,
        "ratio": _r(c.ratio) if c else None,
        "rlo": _r(c.ci95_low) if c else None,
        "rhi": _r(c.ci95_high) if c else None,
        "p": _r(c.p_value) if c else None,
        "vs": shape.vs_reference(c, unit) if c else None,
        "verdict": cell.verdict,
    }


def experiment_json(exp: ExperimentView, page: str = "") -> dict[str, Any]:
    """Per-variant numbers for the heatmaps; hrefs relative to `page`'s directory."""
    units = {m.key: m.unit for m in exp.metrics}
    return {
        "name": exp.name,
        "page": page or "index.html",
        "dimValues": exp.dims,
        "dimLabels": shape.dim_labels(exp.dims),
        "axes": list(exp.axes),
        "metrics": [{"key": m.key, "label": m.label, "unit": m.unit} for m in exp.metrics],
        "design": exp.design,
        "equivalence_pct": exp.equivalence_pct,
        "aa": verdict_json(exp.aa, aa_sentence(exp.aa), warns(exp.aa)),
        "carryover": carryover_json(exp),
        "variants": [
            {
                "id": v.variant_id,
                "label": v.label or v.variant_id,
                "dims": v.dims,
                "ref": v.is_reference,
                "href": f"{page}#runs-{v.variant_id}",
                "stats": {k: stat_json(c, units[k]) for k, c in v.cells.items()},
            }
            for v in exp.variants
        ],
        "stationarity": list(exp.stationarity),
    }


def verdict_json(c: Comparison | None, text: str, flagged: bool) -> dict[str, Any] | None:
    """A ratio with its CI and its sentence (None without a comparison)."""
    if c is None:
        return None
    return {
        "ratio": _r(c.ratio),
        "lo": _r(c.ci95_low),
        "hi": _r(c.ci95_high),
        "rounds": c.n_pairs,
        "flagged": flagged,  # a warning: the CI excludes 1 (and, for an A/A, is not fitted out)
        "text": text,
    }


def carryover_json(exp: ExperimentView) -> dict[str, Any] | None:
    """The throughput's carry-over (after a switch / after a repeat); None when the design
    never runs a variant twice in a row."""
    c = exp.carryover
    if c is None or c.comparison is None:
        return None
    text = carryover.sentence(c, ("faster", "slower"))
    return verdict_json(c.comparison, text, c.warns)


def compare_items(exp: ExperimentView, index: int) -> list[dict[str, Any]]:
    """One item per experiment, or one per storage (free dimension values) when the
    experiment's default heatmap needs them fixed."""
    dims = [v.dims for v in exp.variants]
    axes = list(exp.axes)
    free = shape.free_dims(dims, axes)
    out = []
    for filt in shape.slices(dims, free) if free else [{}]:
        suffix = ", ".join(f"{k}={shape.dim_label(k, v)}" for k, v in filt.items())
        title = f"{exp.name} — {suffix}" if suffix else exp.name
        out.append({"title": title, "experiment": index, "axes": axes, "filters": filt})
    return out


# what the experiment page says in sentences, and the compare page does not show: an
# update has them only for the experiments whose summary it makes
PAGE_ONLY = ("aa", "carryover")


def compare_json(exps: list[ExperimentView]) -> dict[str, Any]:
    def entry(e: ExperimentView) -> dict[str, Any]:
        got = experiment_json(e, f"e/{e.slug}/index.html")
        return {k: v for k, v in got.items() if k not in PAGE_ONLY}

    return {
        "experiments": [entry(e) for e in exps],
        "items": [it for i, e in enumerate(exps) for it in compare_items(e, i)],
    }


# a run's details that its variant's runs mostly share (the build's manifest, 399
# settings): at 10,000 real runs they were 12 kB of every run page's 20 kB, packed
SHARED_DETAILS = ("provenance", "settings")


def details_script(bases: Mapping[str, dict[str, Any]]) -> str:
    """details.js beside the run pages: each variant's base details (variant id -> the
    SHARED_DETAILS of its first run), packed, which site.js merges with a run page's own
    differences (a <script src> loads from file://, where fetch() may not)."""
    packed = {vid: pack(base) for vid, base in sorted(bases.items())}
    return f"window.blocklabDetails = {jsontext.text(packed)};\n"


def differences(own: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """What site.js needs to make `own` again from `base`: "changed", `own`'s keys whose
    values are new or of another kind than `base`'s; "patched", the differences of those
    that are objects in both (a real run's probe facts differ from its variant's first
    run's in a few numbers of 40 keys: the whole object was 1.3 kB of a packed page);
    "removed", `base`'s keys that `own` lacks. Empty parts are left out."""
    changed: dict[str, Any] = {}
    patched = {}
    shared = 0  # `own`'s keys that `base` has: all of `base`'s when none is removed
    for k, v in own.items():
        b = base.get(k, _ABSENT)
        if b is _ABSENT:
            changed[k] = v
            continue
        shared += 1
        if b == v:
            continue
        if _is_mapping(v) and _is_mapping(b):
            patched[k] = differences(v, b)
        else:
            changed[k] = v
    out: dict[str, Any] = {"changed": changed}
    if patched:
        out["patched"] = patched
    if shared < len(base):
        out["removed"] = [k for k in base if k not in own]
    return out


_ABSENT = object()


def _is_mapping(v: Any) -> bool:
    """A Mapping; a dict (what JSON gives) found without the ABC's slower check."""
    return isinstance(v, dict) or isinstance(v, Mapping)


def run_json(
    detail: data.RunDetail,
    run: RunView,
    variant: VariantView,
    throughput_name: str = "tps",
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A run page's series, its panels (blocklab.report.panels), its checkpoints and its
    stored details. The series are columns: "t" the seconds they share, "series" each
    one's values at those seconds, "pairs" the others as [t, v]; every stored series is
    there (the page offers them as a CSV download), the panels say which are drawn;
    "throughput" names the throughput's series, "ma10" its moving average at its seconds
    (the page holds each value once). "details": the run's provenance, settings and
    metrics and its variant's definition, which the page shows as JSON."""
    seconds = {k: [p[0] for p in pts] for k, pts in detail.series.items()}  # each once
    key = next((n for n in data.THROUGHPUT_SERIES if detail.series.get(n)), None)
    t, cols, pairs = columns(detail.series, key, seconds)
    ma10 = shape.moving_average(data.throughput_series(detail.series), 10.0)
    return {
        "t": t,
        "series": cols,
        "pairs": pairs,
        "panels": panels.run_panels(detail.series, throughput_name),
        "ma10": [v for _, v in ma10],
        "throughput": key,
        "throughput_name": throughput_name,
        "checkpoints": detail.checkpoints,
        "tmin": min((min(ts) for ts in seconds.values() if ts), default=0.0),
        "tmax": max((max(ts) for ts in seconds.values() if ts), default=1.0),
        "details": _details(detail.details, run, variant, base),
    }


def _details(
    own: Mapping[str, Any], run: RunView, variant: VariantView, base: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The run's stored details (`own`: its SHARED_DETAILS, data.details_of); with its
    variant's `base` (details.js), them as their differences from it, and "base" the
    variant whose base site.js merges in."""
    out: dict[str, Any] = {"variant": variant.variant, "metrics": run.metrics}
    if base is None:
        return out | dict(own)
    out["base"] = variant.variant_id
    out["differs"] = {k: differences(own[k], base[k]) for k in SHARED_DETAILS}
    return out


def pack(value: Any) -> str:
    """`value` as JSON, gzip-compressed (the same bytes for the same value), in base64: a
    run page's data, which site.js unpacks (DecompressionStream, from file:// too). At
    10,000 runs the run pages were most of the site's weight, mostly their series.
    Level 1: a full build compresses every run page (PACK_LEVEL)."""
    packed = gzip.compress(jsontext.dumps(value), compresslevel=PACK_LEVEL, mtime=0)
    return base64.b64encode(packed).decode()


def columns(
    series: dict[str, list[tuple[float, float | None]]],
    first: str | None = None,
    seconds: Mapping[str, list[float]] | None = None,
) -> tuple[list[float | int], dict[str, list[float | None]], dict[str, list[Any]]]:
    """(the seconds of series `first` (else of the first one), the values of every series
    sampled at exactly those seconds, the others as compact [t, v] pairs). `seconds`:
    each series' seconds, when the caller has them."""
    if not series:
        return [], {}, {}
    if seconds is None:
        seconds = {k: [p[0] for p in pts] for k, pts in series.items()}
    t = seconds[first] if first in series else next(iter(seconds.values()))
    cols: dict[str, list[float | None]] = {}
    pairs: dict[str, list[Any]] = {}
    for k, pts in series.items():
        if seconds[k] == t:
            cols[k] = [p[1] for p in pts]
        else:
            pairs[k] = compact(pts)
    # whole_seconds inline: a call a second was a third of this function's time
    return [int(x) if float(x).is_integer() else x for x in t], cols, pairs


def grid_json(exp: ExperimentView, entries: list[manifest.RunEntry]) -> dict[str, Any]:
    """Per (y, x) cell of the default axes: its ok runs (ids; their lines go in shards)."""
    x, y = exp.axes
    dims = exp.dims
    colors = {
        (v.label or v.variant_id): PALETTE[i % len(PALETTE)] for i, v in enumerate(exp.variants)
    }
    drawn = {e.id: e for e in entries if e.tps_max is not None}
    grouped = exp.runs_by_variant()
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for v in exp.variants:
        key = (str(v.dims.get(x, "")) if x else "", str(v.dims.get(y, "")) if y else "")
        cell = cells.setdefault(
            key,
            {
                "x": key[0],
                "y": key[1],
                "labels": [],
                "href": f"index.html#runs-{v.variant_id}",
                "run_ids": [],
            },
        )
        cell["labels"].append(v.label or v.variant_id)
        for r in grouped[v.variant_id]:
            if r.status == "ok" and r.id in drawn:
                cell["run_ids"].append((r.id, v.label or v.variant_id))
    for c in cells.values():
        labels = c.pop("labels")
        c["title"] = "; ".join(labels) if len(labels) <= 3 else f"{len(labels)} variants"
    ok = [drawn[r] for c in cells.values() for r, _ in c["run_ids"]]
    tmins = [e.t_min for e in ok if e.t_min is not None]
    tmaxs = [e.t_max for e in ok if e.t_max is not None]
    return {
        "x": x,
        "y": y,
        "xs": [str(v) for v in dims.get(x, [])] if x else [],
        "ys": [str(v) for v in dims.get(y, [])] if y else [],
        "xl": [shape.dim_label(x, v) for v in dims.get(x, [])] if x else [],
        "yl": [shape.dim_label(y, v) for v in dims.get(y, [])] if y else [],
        "cells": list(cells.values()),
        "colors": colors,
        "ymax": max((e.tps_max or 0.0 for e in ok), default=1.0) * 1.05,
        "throughput_name": exp.throughput_name,
        "tmin": min(tmins, default=0.0),
        "tmax": max(tmaxs, default=1.0),
    }

"""How far code layout alone moves a workload: the spread between builds of one geometry.

A build at another page size is also another binary (blocklab.postgres.link_order). The
layout variants of one geometry differ in nothing but where the code landed, so the spread
of their means is the build-level noise that Kalibera and Jones ("Rigorous Benchmarking in
Reasonable Time", ISMM 2013) ask to measure before a difference between two builds is
believed. Pure: per-round values in, a two-way analysis of variance out.

The model, on the log scale (a ratio between builds is a difference of logs):

    y[r, b] = mu + round[r] + build[b] + e[r, b],   build ~ N(0, sigma_build^2),
                                                     e ~ N(0, sigma_run^2)

Rounds are blocks (the machine's drift between rounds falls on every build of a round
alike); only rounds where every build gave a value are used. With R rounds and K builds:
MS_build = R * sum_b (mean_b - mean)^2 / (K - 1), MS_error from the residuals with
(R - 1)(K - 1) degrees of freedom; sigma_build^2 = max(0, (MS_build - MS_error) / R) (the
ANOVA estimator), and F = MS_build / MS_error tests sigma_build = 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special  # F's tail (fdtrc), as scipy.stats.f.sf computes it, lighter to import


@dataclass(frozen=True)
class LayoutSpread:
    builds: int
    rounds: int  # complete rounds used
    build_offsets_pct: dict[str, float]  # each build's mean against the builds' mean, in %
    sigma_build_pct: float  # between builds (layout alone), as a CV in %
    sigma_run_pct: float  # within a build, per run, as a CV in %
    f_stat: float
    p_value: float  # F test of "layout moves nothing"

    @property
    def range_pct(self) -> float:
        """How far a random layout moves the workload, 95 % of builds: +-1.96 sigma_build."""
        return 100.0 * math.expm1(1.96 * self.sigma_build_pct / 100.0)


def spread(values: Mapping[str, Mapping[int, float]]) -> LayoutSpread | None:
    """build label -> round -> value (tps or any positive metric). None with fewer than 2
    builds or 2 complete rounds."""
    labels = sorted(values)
    rounds = sorted(set.intersection(*(set(values[b]) for b in labels))) if labels else []
    if len(labels) < 2 or len(rounds) < 2:
        return None
    y = np.log(np.array([[values[b][r] for b in labels] for r in rounds], dtype=float))
    n_r, n_b = y.shape
    grand = y.mean()
    build_means = y.mean(axis=0)
    resid = y - y.mean(axis=1, keepdims=True) - build_means + grand
    ms_build = n_r * float(((build_means - grand) ** 2).sum()) / (n_b - 1)
    df_error = (n_r - 1) * (n_b - 1)
    ms_error = float((resid**2).sum()) / df_error
    f_stat = ms_build / ms_error if ms_error > 0 else math.inf
    return LayoutSpread(
        builds=n_b,
        rounds=n_r,
        build_offsets_pct={
            b: 100.0 * math.expm1(float(m - grand))
            for b, m in zip(labels, build_means, strict=True)
        },
        sigma_build_pct=100.0 * math.sqrt(max(0.0, (ms_build - ms_error) / n_r)),
        sigma_run_pct=100.0 * math.sqrt(ms_error),
        f_stat=f_stat,
        p_value=float(special.fdtrc(n_b - 1, df_error, f_stat)) if math.isfinite(f_stat) else 0.0,
    )


def sentence(s: LayoutSpread) -> str:
    """One line for a reader: how far layout alone moves this workload."""
    if s.p_value >= 0.05:
        told = f"not told apart from run noise (F = {s.f_stat:.2f}, p = {s.p_value:.2f})"
    else:
        told = f"larger than run noise (F = {s.f_stat:.2f}, p = {s.p_value:.3f})"
    return (
        f"layout alone: {s.builds} builds of one geometry over {s.rounds} rounds; between "
        f"builds sigma {s.sigma_build_pct:.2f} % (a random layout moves it by up to "
        f"±{s.range_pct:.1f} %), within a build {s.sigma_run_pct:.2f} % per run; {told}"
    )


@dataclass(frozen=True)
class Armed:
    """What the layout control needs of a variant's summary (blocklab.analysis.summary)."""

    label: str
    dims: Mapping[str, object]
    reference_label: str
    is_reference: bool
    values: Mapping[int, float]


def control_group(variants: Sequence[Armed]) -> dict[str, Mapping[int, float]]:
    """label -> per-round values of the builds that differ from their reference in nothing
    but the layout (the reference among them); empty when no variant is a layout arm. With
    several references, the first reference that has layout arms."""
    by_label = {v.label: v for v in variants}

    def same_but_layout(a: Armed, b: Armed) -> bool:
        strip = lambda d: {k: x for k, x in d.items() if k != "layout_seed"}  # noqa: E731
        return strip(a.dims) == strip(b.dims)

    for v in variants:
        ref = by_label.get(v.reference_label)
        if v.is_reference or ref is None or v.dims.get("layout_seed") is None:
            continue
        if same_but_layout(v, ref):
            arms = [w for w in variants if w.reference_label == ref.label and not w.is_reference]
            group = [ref, *(w for w in arms if w.dims.get("layout_seed") is not None
                            and same_but_layout(w, ref))]  # fmt: skip
            return {w.label: w.values for w in group}
    return {}


# The matrix keys that make another binary: a comparison along one of them is also a
# comparison of code layouts (every object recompiled, functions at other addresses).
BUILD_DIMS = ("postgres", "block_size_kb", "wal_block_size_kb", "segsize_gb")
UNCONTROLLED = (
    "layout: not controlled: each build compared is another binary (see [design] layout_control)"
)


def builds_differ(variants: Sequence[Armed]) -> bool:
    """Whether a compared variant is another build than its reference (BUILD_DIMS)."""
    by_label = {v.label: v for v in variants}
    for v in variants:
        ref = by_label.get(v.reference_label)
        if v.is_reference or ref is None:
            continue
        if any(v.dims.get(k) != ref.dims.get(k) for k in BUILD_DIMS):
            return True
    return False


def judged(gain_pct: float, ci: tuple[float, float], s: LayoutSpread) -> str:
    """A page-size comparison judged against layout alone: the interval widened by the
    between-build variance of a difference of two builds (2 sigma_build^2, Kalibera and
    Jones's two levels), and whether the difference is larger than layout alone gives."""
    lo, hi = (math.log1p(x / 100.0) for x in ci)
    half = (hi - lo) / 2
    centre = math.log1p(gain_pct / 100.0)
    wide = math.sqrt(half**2 + 2 * (1.96 * s.sigma_build_pct / 100.0) ** 2)
    low, high = (100.0 * math.expm1(centre + k * wide) for k in (-1, 1))
    told = (
        "larger than code layout alone produces"
        if low > 0 or high < 0
        else "code layout alone could produce it"
    )
    return f"with layout's spread ({s.builds} builds): {low:+.1f} to {high:+.1f} %, {told}"

"""A probe's cost from slices of one workload: the interleaved design applied to the probes.

One pgbench run is cut into slices of a few seconds; in each the probe under test is on
or off. Slices come in blocks of four, off-on-on-off (ABBA) or on-off-off-on (BAAB), the
choice following the Thue-Morse sequence over a probe's blocks, and the probes take
turns block by block (`schedule`). Within a block the on and off slices have the same
mean position in time, so a drift of the machine that is linear over a block (tps
falling as a table grows, another agent's job ramping up) cancels exactly; ABBA and
BAAB blocks alternate in pairs (Thue-Morse), so the curvature of a quadratic drift, which
biases an ABBA block one way and a BAAB block the other, cancels too.

The figure (`probe_ratios`): per block, the log of the geometric mean of its two on
slices' tps minus that of its two off slices; over a probe's blocks, their mean, back to
a ratio (on / off, i.e. the ratio of geometric means) with a Student t interval from the
blocks' spread (blocklab.analysis.stats.compare_paired, blocks as the pairs). The blocks
are the independent units; the slices inside one are not taken as such.

Pure: no I/O; tests/analysis/test_slices.py checks it against scipy on fixed data and,
by simulation with a fixed seed, its coverage under drift and AR(1) noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from blocklab.analysis.stats import Comparison, compare_paired

ABBA = (False, True, True, False)  # off, on, on, off
BAAB = (True, False, False, True)


@dataclass(frozen=True)
class Slice:
    block: int  # numbered across probes, in run order
    probe: str
    on: bool


def thue_morse(n: int) -> int:
    """The n-th term of the Thue-Morse sequence (0, 1, 1, 0, 1, 0, 0, 1, ...)."""
    return bin(n).count("1") % 2


def schedule(probes: Sequence[str], blocks_per_probe: int) -> list[Slice]:
    """The slices in run order: block b tests probes[b % len(probes)], its four slices
    ABBA or BAAB by the Thue-Morse term of that probe's block count so far."""
    if not probes or blocks_per_probe < 1:
        raise ValueError("schedule: at least one probe and one block per probe")
    out = []
    for b in range(len(probes) * blocks_per_probe):
        probe, k = probes[b % len(probes)], b // len(probes)
        out += [Slice(b, probe, on) for on in (BAAB if thue_morse(k) else ABBA)]
    return out


def probe_ratios(slices: Sequence[Slice], tps: Sequence[float | None]) -> dict[str, Comparison]:
    """probe -> tps on / tps off with its 95 % CI (module docstring). A block with a
    slice without tps (pgbench printed none) is left out whole."""
    if len(slices) != len(tps):
        raise ValueError(f"probe_ratios: {len(slices)} slices but {len(tps)} tps values")
    blocks: dict[int, list[tuple[Slice, float | None]]] = {}
    for s, t in zip(slices, tps, strict=True):
        blocks.setdefault(s.block, []).append((s, t))
    off: dict[str, dict[int, float]] = {}
    on: dict[str, dict[int, float]] = {}
    for b, members in blocks.items():
        values = [t for _s, t in members]
        if any(t is None or t <= 0 for t in values):
            continue
        probe = members[0][0].probe
        off.setdefault(probe, {})[b] = _geomean([t for s, t in members if not s.on and t])
        on.setdefault(probe, {})[b] = _geomean([t for s, t in members if s.on and t])
    return {p: compare_paired(off[p], on[p]) for p in sorted(off)}


def slice_tps(
    per_second: Mapping[int, float], n_slices: int, slice_s: int, lead_in_s: int
) -> list[float | None]:
    """Each slice's tps (the mean of its seconds' tps: its transactions over its time)
    from pgbench's `-P 1` lines, second k (1-based, covering k-1..k s after the start)
    -> tps. The first `lead_in_s` seconds belong to no slice; a slice missing a second
    has None."""
    out: list[float | None] = []
    for i in range(n_slices):
        seconds = range(lead_in_s + i * slice_s + 1, lead_in_s + (i + 1) * slice_s + 1)
        values = [per_second.get(k) for k in seconds]
        out.append(None if None in values else sum(v for v in values if v) / slice_s)
    return out


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))

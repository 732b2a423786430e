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

The second figure (`probe_cpu_shares`), from the same slices: CPU accounting. Each slice
has the CPU seconds of the probes' own processes (blocklab's process, whose threads the
probes are, and the server backend that answers the sampler) and of the whole measured
system (the server's process tree and blocklab's, pgbench included). Per block: the
probes' mean CPU seconds in its on slices minus that in its off slices (what the probe
under test adds; the rest of blocklab's own work, the same in both, cancels), over the
block's mean total CPU seconds per slice, in %; over a probe's blocks, their mean with a
Student t interval. On a CPU-bound run the share of the CPU a probe takes is, to first
order, the share of tps it costs; unlike tps, the per-block share hardly varies with the
machine's noise, so the interval is tight.

Pure: no I/O; tests/analysis/test_slices.py checks it against scipy on fixed data and,
by simulation with a fixed seed, its coverage under drift and AR(1) noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from blocklab.analysis.stats import Comparison, compare_paired, t_half

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


@dataclass(frozen=True)
class CpuShare:
    """A probe's share of the measured system's CPU (module docstring), in %."""

    n_blocks: int
    share_pct: float | None  # None without a block
    ci95_low_pct: float | None  # None with fewer than 2 blocks
    ci95_high_pct: float | None
    added_cpu_s_per_slice: float | None  # mean over blocks: on minus off, CPU s per slice

    @property
    def half_width_pct(self) -> float | None:
        if self.ci95_low_pct is None or self.ci95_high_pct is None:
            return None
        return (self.ci95_high_pct - self.ci95_low_pct) / 2


def probe_cpu_shares(
    slices: Sequence[Slice],
    probe_cpu_s: Sequence[float | None],
    total_cpu_s: Sequence[float | None],
) -> dict[str, CpuShare]:
    """probe -> its CPU share with a 95 % t interval over its blocks (module docstring).
    A block with a slice without both figures, or with no total CPU, is left out whole."""
    if not len(slices) == len(probe_cpu_s) == len(total_cpu_s):
        raise ValueError("probe_cpu_shares: one probe and one total CPU figure per slice")
    blocks: dict[int, list[tuple[Slice, float | None, float | None]]] = {}
    for s, p, t in zip(slices, probe_cpu_s, total_cpu_s, strict=True):
        blocks.setdefault(s.block, []).append((s, p, t))
    shares: dict[str, list[float]] = {}
    added: dict[str, list[float]] = {}
    for members in blocks.values():
        shares.setdefault(members[0][0].probe, [])
        if any(p is None or t is None for _s, p, t in members):
            continue
        total = fmean([t for _s, _p, t in members if t is not None])
        if total <= 0:
            continue
        on = fmean([p for s, p, _t in members if s.on and p is not None])
        off = fmean([p for s, p, _t in members if not s.on and p is not None])
        shares[members[0][0].probe].append((on - off) / total * 100)
        added.setdefault(members[0][0].probe, []).append(on - off)
    return {p: _share(shares[p], added.get(p, [])) for p in sorted(shares)}


def _share(pct: list[float], added_s: list[float]) -> CpuShare:
    n = len(pct)
    if n == 0:
        return CpuShare(0, None, None, None, None)
    if n < 2:
        return CpuShare(1, pct[0], None, None, added_s[0])
    centre, half = t_half(pct)
    return CpuShare(n, centre, centre - half, centre + half, fmean(added_s))


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


def slice_growth(at_bound: Mapping[int, float], n_slices: int) -> list[float | None]:
    """Each slice's growth of a cumulative figure read at the slices' bounds (bound k
    opens slice k; bound n_slices closes the last); None where a bound was not read."""
    out: list[float | None] = []
    for i in range(n_slices):
        begin, end = at_bound.get(i), at_bound.get(i + 1)
        out.append(None if begin is None or end is None else end - begin)
    return out


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))

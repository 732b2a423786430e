"""Disturbed runs: the summary's line on other processes' use of the CPUs (pure).

Each run's probes store `disturbance_cpu_share`, the share of the machine's CPU capacity
that processes other than the server, the driver and blocklab took over the measured
window (blocklab.probes.disturbance says how it is measured and what it leaves out). A
run is disturbed at DISTURBED_CPU_SHARE or more. Like pyperf's and hyperfine's warnings,
the summary says what share of each variant's runs were disturbed and advises a quiet
machine; when every measured run was quiet it says so, with the largest share seen, so
that a checked experiment reads differently from an unchecked one (runs recorded without
the metric, before it existed, say nothing; the interleaved design measures it over each
variant's own slices: blocklab.execution.interleaved.slices_disturbance). Where the
run's storage is on loop devices, a second line gives the largest share of the bytes on
the disk under them that were other processes' (`disturbance_device_share`): information
beside the CPU verdict, not a verdict of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

CPU_SHARE = "disturbance_cpu_share"  # blocklab.probes.disturbance.CPU_SHARE
DEVICE_SHARE = "disturbance_device_share"  # blocklab.probes.disturbance.DEVICE_SHARE
# Other processes at 5 % of the capacity take a tenth of a core on a 2-core machine:
# when the workload keeps every CPU busy they take about as much throughput, the size of
# the effects blocklab is asked to resolve (a few per cent), and well above a machine's
# own background (systemd, journald: under 1 %) and the accounting's rounding (ticks of
# 10 ms per process: a fraction of a per cent of a minute-long window).
DISTURBED_CPU_SHARE = 0.05
ADVICE = "rerun on a quiet machine"


def disturbed(share: float | None) -> bool:
    """True when other processes took DISTURBED_CPU_SHARE of the CPUs or more."""
    return share is not None and share >= DISTURBED_CPU_SHARE


def lines(
    shares_of: Mapping[str, Sequence[float | None]],
    device_shares_of: Mapping[str, Sequence[float | None]] | None = None,
) -> list[str]:
    """variant label -> `disturbance_cpu_share` of each of its ok runs (None: not
    measured) -> the summary's lines: none when no run was measured. With
    `device_shares_of` (`disturbance_device_share`, measured under loop devices only), a
    line on the largest share of the disk's bytes that were other processes'."""
    return _cpu_lines(shares_of) + _device_lines(device_shares_of or {})


def _device_lines(shares_of: Mapping[str, Sequence[float | None]]) -> list[str]:
    """Information, not a verdict: a run that does little I/O of its own shows a large
    share for a few bytes of the host's logging."""
    top = {k: max(x) for k, v in shares_of.items() if (x := [s for s in v if s is not None])}
    if not top:
        return []
    label = max(top, key=lambda k: top[k])
    return [
        f"other processes' I/O on the disk under the loop devices: at most "
        f"{top[label] * 100:.1f} % of its bytes ({label})"
    ]


def _cpu_lines(shares_of: Mapping[str, Sequence[float | None]]) -> list[str]:
    measured = {k: [s for s in v if s is not None] for k, v in shares_of.items()}
    n_measured = sum(len(v) for v in measured.values())
    if n_measured == 0:
        return []
    n_runs = sum(len(v) for v in shares_of.values())
    unmeasured = f"; {n_runs - n_measured} of {n_runs} runs not measured" * (n_runs > n_measured)
    parts = [_variant_part(label, v) for label, v in measured.items() if any(map(disturbed, v))]
    if not parts:
        top = f"{max(s for v in measured.values() for s in v) * 100:.1f}"
        limit = _pct(DISTURBED_CPU_SHARE)
        return [
            f"no run disturbed (other processes < {limit} % of the CPUs, at most {top} %)"
            + unmeasured
        ]
    return [f"disturbed runs: {', '.join(parts)}: {ADVICE}{unmeasured}"]


def _variant_part(label: str, shares: Sequence[float]) -> str:
    hit = [s for s in shares if disturbed(s)]
    low, high = _pct(min(hit)), _pct(max(hit))
    span = low if low == high else f"{low}-{high}"
    return f"{label} {len(hit)} of {len(shares)} (other processes used {span} % of the CPUs)"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}"

"""Instrumentation: begin() before the workload, end() after it (filled in below)."""

from __future__ import annotations

from blocklab.probes import ProbeContext, ProbeResult


class Instrumentation:
    def __init__(self, ctx: ProbeContext):
        self.ctx = ctx

    def begin(self) -> None:
        raise NotImplementedError("probes: work in progress")

    def end(self, transactions: int, duration_s: float) -> ProbeResult:
        raise NotImplementedError("probes: work in progress")

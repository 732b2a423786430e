"""A run's record: a NaN or infinite number makes a failed run with a reason (pure)."""

from __future__ import annotations

from blocklab.execution.run_record import non_finite_reason
from blocklab.store import RunRecord


def test_a_non_finite_value_makes_a_failed_run_with_a_reason() -> None:
    rec = RunRecord(
        experiment="e", variant_id="v", round=1, position=0, status="ok",
        started_at="", ended_at="", tps=float("nan"), latency_avg_ms=2.0,
        metrics={"wal_bytes_per_xact": float("inf"), "restore_s": 1.0, "missing": None},
    )  # fmt: skip
    reason = non_finite_reason(rec)
    assert reason.startswith("not a finite number: tps = nan, wal_bytes_per_xact = inf")
    rec.tps, rec.metrics = 100.0, {"restore_s": 1.0}
    assert non_finite_reason(rec) == ""

"""The one clock format blocklab stores: UTC ISO 8601 with milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """Now, e.g. '2026-01-31T12:00:00.123+00:00' (runs, experiments, device profiles)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")

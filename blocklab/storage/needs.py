"""What a storage's volumes must hold: bytes and how they were estimated.

blocklab.workloads.sizing makes these from a variant; blocklab.storage checks a storage's
room against them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    """Bytes a volume must hold, and how they were estimated (for error messages)."""

    bytes: int
    how: str


@dataclass(frozen=True)
class StorageNeeds:
    data: Need
    wal: Need | None  # None when pg_wal stays in the data directory

"""What a resident process (`report --watch`, `serve --watch`) keeps from one update of a
site to the next: the runs it read ahead and each run's digest. A stored run's row and
metrics never change, so an update reads and hashes only the runs it has not seen: at
10,000 runs, reading them all took 0.24 to 0.37 s an update and hashing them 0.2 s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from blocklab.store.base import RunsKept


@dataclass
class Resident:
    runs: RunsKept = field(default_factory=dict)  # ResultsStore.read_ahead's `kept`
    # (run id, started_at, ended_at) -> reduction_cache.run_digest of the run's view
    digests: dict[tuple[Any, ...], str] = field(default_factory=dict)

"""The bench scripts' pure helpers (bench/*.py) are imported as the scripts import each
other: from the bench directory."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

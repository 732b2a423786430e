"""scipy's modules the analysis imports where it first uses them (equivalence's
integral, precision's root finding: about 0.2 s to import, more on a busy machine, too
slow for every command's start), imported ahead by a process that forks children to use
them again and again: a resident watcher's summary is made in a process forked at each
update (report.parallel.begun), and what a child imports dies with it. At 10,000 runs,
scipy.stats (then imported by stationarity's drift test, which now uses scipy.special)
was 0.5 s of every watched update's 0.85 s summary."""

from __future__ import annotations

import importlib

# each function-level `from scipy... import` of blocklab.analysis names its module here
# (tests/analysis/test_lazy_imports.py finds them all in the code)
MODULES = ("scipy.integrate", "scipy.optimize")


def import_ahead() -> None:
    """Import MODULES now, in this process (once: Python keeps them)."""
    for name in MODULES:
        importlib.import_module(name)

"""`blocklab report --watch` (and `serve --watch`): one process that keeps a site up to
date with its results store. It updates the site, then polls the store's change marker
(ResultsStore.change_marker: a few small queries) and updates the site again whenever the
marker differs. A resident process pays Python's and the libraries' start-up once (0.7 to
1.2 s a `blocklab report` on the 2-core machine, docs/FLEET.md), not once an update, and an
update rewrites only what changed, as `blocklab report` does. It also keeps what does not
change from one update to the next (report.resident: the runs read, their digests and
stationarity windows), so an update reads only the runs it has not seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blocklab.report import data
from blocklab.report.resident import Resident
from blocklab.report.site import SiteResult, build_site


def watch(
    spec: str | Path,
    out: Path,
    *,
    every_s: float,
    told: Callable[[SiteResult], None],
    full: bool = False,
    started: Callable[[], None] | None = None,
    updates: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Update the site `out` of the store `spec` now (whole with `full`), call `started`
    once it is there, then poll the store every `every_s` seconds and update the site when
    its change marker differs; `told` gets each update's result. Runs until interrupted
    (KeyboardInterrupt goes through) or `updates` updates were made; returns how many.

    The marker is read before the update it starts, so a write committed while a site is
    updated is seen by the next poll: at worst an update finds nothing changed."""
    made = 0
    marker = None
    resident = Resident()  # the runs read and hashed, kept from one update to the next
    while updates is None or made < updates:
        now = _marker(spec)
        if now != marker:
            told(build_site(spec, out, full=full and made == 0, resident=resident))
            marker, made = now, made + 1
            if made == 1 and started is not None:
                started()
            continue  # polled again at once: a write during the update is not delayed
        sleep(every_s)
    return made


def _marker(spec: str | Path) -> tuple[Any, ...]:
    """The store's change marker, on a connection of its own closed at once: an SQLite
    connection held open in this process across the updates (each opens the database
    again, read-only first, store.sqlite.check_existing) went on seeing the store as it
    was before the second update, and then the update's own read-only open found the
    file "malformed" (SQLite 3.40.1; tests/report/test_watch.py adds three runs). An
    open and the queries take a few milliseconds."""
    db = data.open_results(spec)
    try:
        return db.change_marker()
    finally:
        db.close()

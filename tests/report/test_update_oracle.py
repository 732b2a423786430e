"""An updated site against the oracle, the site made whole: after each of a seeded random
sequence of changes to the store (one more run, in a new round or the last one; the
results made again in the same place, with other variants and rounds or measured again
with the same ones; a second experiment, then its runs), the site an update makes, with
or without what a resident watcher keeps, has the same files and bytes as one made whole
from the same store. SYNTHETIC data.

A store made again gets a new experiment row and new run times, as a real one does (the
fixture's clock is fixed: every run is moved to its store's year): a run is named by its
id, start and end (report.resident)."""

from __future__ import annotations

import itertools
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from report_fixture import (
    add_synthetic_run,
    differing_files,
    scale_series,
    write_synthetic_results,
)

from blocklab.report import build_site
from blocklab.report.resident import Resident
from blocklab.store import ResultsDB

NAME, OTHER = "synthetic-geometry", "other"
STEPS = 7
CHANGES = ("run", "run", "same round", "made again", "measured again", "other experiment")


class Store:
    def __init__(self, results: Path, rng: random.Random) -> None:
        self.results, self.rng, self.made = results, rng, itertools.count()
        self.design: dict[str, Any] = {}
        self.year = ""

    def make_again(self, *, same_design: bool = False) -> None:
        """The results made again; `same_design`: the same experiment measured again (the
        same variants, rounds and run ids; other times and throughput)."""
        shutil.rmtree(self.results, ignore_errors=True)
        rng = self.rng
        if not same_design:
            self.design = {
                "rounds": rng.randint(2, 4),
                "seconds": rng.choice([8, 10]),
                "block_sizes_kb": rng.choice([(4, 8), (4, 8, 16), (8, 16)]),
                "failed_run": rng.random() < 0.5,
                "seed": rng.randint(0, 3),
            }
        write_synthetic_results(self.results, **self.design)
        self.year = f"{2030 + next(self.made)}-"
        with ResultsDB(self.results, create=False) as db:
            db.conn.execute("UPDATE experiments SET created_at = ?", (f"{self.year}01-01",))
            scale_series(db, rng.uniform(0.5, 2.0))
            db.conn.commit()
        self.date_runs()

    def date_runs(self) -> None:
        """The fixture's runs (its clock starts in 2025) moved to this store's year: no
        run of a store made again has the id, start and end of one before it."""
        with ResultsDB(self.results, create=False) as db:
            db.conn.execute(
                "UPDATE runs SET started_at = replace(started_at, '2025-', ?),"
                " ended_at = replace(ended_at, '2025-', ?)",
                (self.year, self.year),
            )
            db.conn.commit()

    def change(self, what: str) -> None:
        rng = self.rng
        if what in ("made again", "measured again"):
            self.make_again(same_design=what == "measured again")
        elif what == "other experiment":
            with ResultsDB(self.results, create=False) as db:
                there = any(r["name"] == OTHER for r in db.experiments())
            if there:
                add_synthetic_run(self.results, OTHER, seconds=8, seed=rng.randint(0, 99))
            else:
                write_synthetic_results(self.results, name=OTHER, rounds=2, seconds=8)
        else:
            same = what == "same round"
            seconds = 10 if same else rng.choice([8, 10])
            add_synthetic_run(
                self.results, NAME, seconds=seconds, seed=rng.randint(0, 99), same_round=same
            )
        self.date_runs()


@pytest.mark.parametrize("resident", [False, True], ids=["command", "watched"])
@pytest.mark.parametrize("seed", [1, 2])
def test_an_update_after_any_change_equals_the_site_made_whole(
    tmp_path: Path, seed: int, resident: bool
) -> None:
    rng = random.Random(seed)
    store = Store(tmp_path / "results", rng)
    store.make_again()
    out = tmp_path / "site"
    build_site(store.results, out)
    kept = Resident() if resident else None
    done = []
    for step in range(STEPS):
        what = rng.choice(CHANGES)
        store.change(what)
        done.append(what)
        assert build_site(store.results, out, resident=kept).incremental
        whole = build_site(store.results, tmp_path / f"whole-{step}", full=True).out
        assert differing_files(out, whole) == [], done
        shutil.rmtree(whole)

"""The experiment loop: paired rounds, resume, adaptive rounds.

Each round runs every variant once, in a fresh order drawn from the experiment's seed
(blocklab.plan.round_order). Every run is stored in one transaction as soon as it ends,
so an experiment interrupted at any moment resumes with the same command: stored runs
are kept, a run without a stored row is discarded (its raw directory removed) and run
again, none is duplicated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from blocklab import plan
from blocklab.model import Variant
from blocklab.paths import safe_remove_tree
from blocklab.spec import Experiment
from blocklab.store import ResultsStore, RunRecord
from blocklab.summary import summarize_experiment
from blocklab.timestamps import now_iso

# Keys of the experiment's JSON that may change between invocations without making it
# a different experiment (more rounds, another stopping rule).
RESUMABLE_KEYS = ("rounds", "until_ci_pct", "max_rounds", "time_budget_s", "description")


class LabLike(Protocol):
    def run(
        self, variant: Variant, *, experiment: str, round_no: int, position: int, raw_dir: Path
    ) -> RunRecord: ...


class Progress(Protocol):
    """Events of an experiment; the CLI renders them (a bar, or one line per run)."""

    def begin(self, total_runs: int, done_runs: int) -> None: ...
    def run_started(self, label: str, round_no: int, position: int) -> None: ...
    def run_finished(self, record: RunRecord, elapsed_s: float) -> None: ...
    def note(self, message: str) -> None: ...
    def grow(self, extra_runs: int) -> None: ...


@dataclass(frozen=True)
class StoppingRule:
    rounds: int
    until_ci_pct: float | None = None
    max_rounds: int | None = None
    time_budget_s: float | None = None


@dataclass(frozen=True)
class Outcome:
    rounds_done: int
    runs_done: int
    runs_failed: int
    end_reason: str


def identity_json(exp: Experiment) -> dict[str, Any]:
    data = exp.to_json()
    return {k: v for k, v in data.items() if k not in RESUMABLE_KEYS}


def raw_dir_for(
    results: Path, experiment: str, round_no: int, variant: Variant, host: str = ""
) -> Path:
    """A run's raw directory; a fleet host's runs live in a directory of the host's."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", variant.label).strip("_")[:60]
    base = results / "runs" / _safe(experiment)
    if host:
        base = base / f"host-{_safe(host)}"
    return base / f"r{round_no:03d}-{slug}-{variant.variant_id}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def register(db: ResultsStore, exp: Experiment, host: dict[str, Any]) -> list[Variant]:
    variants = exp.variants()
    db.upsert_experiment(
        exp.name,
        description=exp.description,
        spec=identity_json(exp),
        seed=exp.seed,
        reference=exp.reference_id(),
        created_at=now_iso(),
        host=host,
        variants=[(v.variant_id, v.label, v.canonical_json(), exp.dims(v)) for v in variants],
        references={v.variant_id: exp.reference_for(v) for v in variants},
    )
    return variants


class Loop:
    """Runs rounds of one experiment against a lab and a results database."""

    def __init__(
        self,
        exp: Experiment,
        variants: Sequence[Variant],
        *,
        db: ResultsStore,
        lab: LabLike,
        progress: Progress,
        clock: Callable[[], float] = time.monotonic,
        host: str = "",
    ):
        self.exp = exp
        self.host = host  # the fleet host whose runs these are ("" on one machine)
        self.variants = {v.variant_id: v for v in variants}
        self.db = db
        self.lab = lab
        self.progress = progress
        self.clock = clock
        self.started = clock()
        self.ok = 0
        self.failed = 0

    def run(self, rule: StoppingRule) -> Outcome:
        done = self.db.done_keys(self.exp.name, self.host)
        total = len(self.variants) * rule.rounds
        already = sum(1 for (_, r) in done if r <= rule.rounds)
        self.progress.begin(total, already)
        round_no = 0
        for round_no in range(1, rule.rounds + 1):
            if self._over_budget(rule):
                return self._finish(round_no - 1, "time budget reached")
            self.run_round(round_no, done)
        if rule.until_ci_pct is None:
            return self._finish(rule.rounds, f"planned rounds done ({rule.rounds})")
        return self._adaptive(rule, round_no, done)

    def _adaptive(self, rule: StoppingRule, round_no: int, done: set[tuple[str, int]]) -> Outcome:
        assert rule.until_ci_pct is not None
        max_rounds = rule.max_rounds or max(rule.rounds * 4, 20)
        while True:
            width = summarize_experiment(self.db, self.exp.name).max_ci_half_width_pct()
            if width is not None and width <= rule.until_ci_pct:
                return self._finish(
                    round_no,
                    f"every CI half-width <= {rule.until_ci_pct:g} % (widest {width:.2f} %)",
                )
            if round_no >= max_rounds:
                return self._finish(
                    round_no,
                    f"max rounds reached ({max_rounds}); widest CI "
                    f"half-width {_fmt_pct(width)} > {rule.until_ci_pct:g} %",
                )
            if self._over_budget(rule):
                return self._finish(
                    round_no,
                    f"time budget reached; widest CI half-width "
                    f"{_fmt_pct(width)} > {rule.until_ci_pct:g} %",
                )
            round_no += 1
            self.progress.grow(len(self.variants))
            self.run_round(round_no, done)

    def run_round(self, round_no: int, done: set[tuple[str, int]]) -> None:
        order = plan.round_order(list(self.variants), self.exp.seed, round_no)
        self.db.record_round(self.exp.name, round_no, self.exp.seed, order)
        for position, vid in enumerate(order):
            if (vid, round_no) in done:
                continue
            self.run_one(self.variants[vid], round_no, position)
            done.add((vid, round_no))

    def run_one(self, variant: Variant, round_no: int, position: int) -> RunRecord:
        raw_dir = raw_dir_for(self.db.directory, self.exp.name, round_no, variant, self.host)
        # a partial run of an interrupted invocation: discard it
        safe_remove_tree(raw_dir, [self.db.directory])
        raw_dir.mkdir(parents=True)
        self.progress.run_started(variant.label, round_no, position)
        t0 = self.clock()
        record = self.lab.run(
            variant, experiment=self.exp.name, round_no=round_no, position=position, raw_dir=raw_dir
        )
        record.raw_dir = self.db.raw_ref(raw_dir)
        record.host = self.host
        self.db.record_run(record)
        if record.status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        self.progress.run_finished(record, self.clock() - t0)
        return record

    def _over_budget(self, rule: StoppingRule) -> bool:
        return rule.time_budget_s is not None and self.clock() - self.started >= rule.time_budget_s

    def _finish(self, rounds: int, reason: str) -> Outcome:
        self.db.set_experiment_state(self.exp.name, "done", reason)
        return Outcome(rounds, self.ok, self.failed, reason)


def _fmt_pct(width: float | None) -> str:
    return "unknown (too few paired rounds)" if width is None else f"{width:.2f} %"

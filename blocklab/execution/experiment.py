"""The experiment loop: rounds in the experiment's design, resume, adaptive rounds.

Each round runs the slots of the experiment's design (blocklab.execution.orders.round_slots):
every variant once (paired, short-runs), twice as a palindrome A B B A (abba), or once
plus each reference a second time (aa-control), in orders balanced over the rounds (a
Williams design labelled by the experiment's seed; adaptive rounds stay balanced over
every completed period). A variant's n-th run in a round is stored with copy_index n.
The interleaved design runs a round as one piece (blocklab.execution.interleaved: both
servers up, slices in turns) and stores one record per variant (copy 0); a round whose
records are all stored is skipped, a partial one (interrupted between its two stores) is
run again whole and only its missing record is stored (the other run's output is removed).
Every run is stored in one transaction as soon as it ends,
so an experiment interrupted at any moment resumes with the same command: stored runs
are kept, a run without a stored row is discarded (its raw directory removed) and run
again, none is duplicated.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from blocklab import faults
from blocklab.analysis import kept_trends, mixed_inputs, precision, setting, stopping
from blocklab.analysis.summary import ExperimentSummary, summarize_experiment
from blocklab.errors import UserError
from blocklab.execution import orders
from blocklab.execution.run_record import failed_without_running
from blocklab.execution.run_state import RunLabel
from blocklab.execution.runner import SERVER_START_FAILED
from blocklab.experiment_file import Experiment
from blocklab.experiment_file.design import INTERLEAVED, RunDesign
from blocklab.model import Variant
from blocklab.paths import safe_remove_tree
from blocklab.store import ResultsStore, RunRecord, results_space
from blocklab.timestamps import now_iso

RunKey = tuple[str, int, int]  # (variant_id, round, copy_index)

# Keys of the experiment's JSON that may change between invocations without making it
# a different experiment (more rounds, another stopping rule).
RESUMABLE_KEYS = ("rounds", "until_ci_pct", "max_rounds", "time_budget_s", "description")


class LabLike(Protocol):
    def run(
        self, variant: Variant, *, experiment: str, round_no: int, position: int, raw_dir: Path
    ) -> RunRecord: ...

    def run_interleaved(
        self,
        variants: Sequence[Variant],
        design: RunDesign,
        raw_dirs: Mapping[str, Path],
        *,
        label: RunLabel,
        seed: int,
    ) -> dict[str, RunRecord]: ...


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
    results: Path,
    experiment: str,
    round_no: int,
    variant: Variant,
    copy_index: int = 0,
    host: str = "",
) -> Path:
    """A run's raw directory; a fleet host's runs live in a directory of the host's."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", variant.label).strip("_")[:60]
    copy = f"-c{copy_index}" if copy_index else ""
    base = results / "runs" / _safe(experiment)
    if host:
        base = base / f"host-{_safe(host)}"
    return base / f"r{round_no:03d}-{slug}-{variant.variant_id}{copy}"


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
        # the runs this loop stores name it (analysis.sessions: do its rounds agree with
        # another session's of the same experiment?)
        self.session = f"{now_iso()} pid {os.getpid()}"
        self.ok = 0
        self.failed = 0
        # variant_id -> why its server could not start (it is not tried again)
        self.unstartable: dict[str, str] = {}

    @property
    def design(self) -> str:
        return self.exp.run_design.kind

    def slots(self, round_no: int) -> list[orders.Slot]:
        return orders.round_slots(
            self.design,
            list(self.variants),
            reference=self.exp.reference_id(),
            seed=self.exp.seed,
            round_no=round_no,
            references=self.references(),
        )

    def references(self) -> list[str]:
        """The references of this loop's variants (aa-control runs each one twice)."""
        return sorted({self.exp.reference_for(vid) for vid in self.variants})

    def runs_per_round(self) -> int:
        return orders.runs_per_round(self.design, len(self.variants), len(self.references()))

    def check_builds(self, rule: StoppingRule, build_key: Callable[[Variant], str]) -> None:
        """UserError (exit 2) before anything is built or run, when `rule` leaves runs to
        do and a variant's stored successful runs were measured on another build than
        `build_key` (blocklab.postgres.build.build_key) says this session makes: a patch
        edited in place, a newer source package, another compiler or CFLAGS. Resuming
        would pool two servers in one variant (blocklab.analysis.mixed_inputs)."""
        if self._runs_left(rule):
            self._same_builds(build_key)

    def check_round_builds(self, round_no: int, build_key: Callable[[Variant], str]) -> None:
        """check_builds for one round (a fleet agent's job): refused when a run of the
        round is left to do on this host and its stored runs name another build."""
        done = self.db.run_keys(self.exp.name, self.host)
        if any((s.variant_id, round_no, s.copy) not in done for s in self.slots(round_no)):
            self._same_builds(build_key)

    def _same_builds(self, build_key: Callable[[Variant], str]) -> None:
        """UserError when a variant's stored successful runs (this host's) name another
        build than `build_key` gives it now (check_builds)."""
        stored = setting.ok_provenances(
            [r for r in self.db.runs(self.exp.name) if r["host"] == self.host]
        )
        found = mixed_inputs.keys_by_variant(stored)["builds"]
        lines = []
        for v in self.variants.values():
            now = build_key(v) if v.variant_id in found else ""
            if other := sorted(set(found.get(v.variant_id, ())) - {now}):
                lines.append(f"{v.label}: stored runs on {', '.join(other)}; now {now}")
        if lines:
            raise UserError(
                f"experiment '{self.exp.name}' was measured on other builds than this "
                f"session would make (a patch's contents, the source package, the compiler "
                f"or its environment changed); resuming would pool two servers in one "
                f"variant:\n  " + "\n  ".join(lines) + "\nRun it under a new name "
                "([experiment] name) or into another --results."
            )

    def _runs_left(self, rule: StoppingRule) -> bool:
        """Whether `rule` leaves a run to do (adaptive rounds: always)."""
        if rule.until_ci_pct is not None:
            return True
        done = self.db.run_keys(self.exp.name, self.host)
        return any(
            (s.variant_id, r, s.copy) not in done
            for r in range(1, rule.rounds + 1)
            for s in self.slots(r)
        )

    def run(self, rule: StoppingRule) -> Outcome:
        done = self.db.run_keys(self.exp.name, self.host)
        self._remember_unstartable()
        total = self.runs_per_round() * rule.rounds
        already = sum(1 for (_, r, _c) in done if r <= rule.rounds)
        self.progress.begin(total, already)
        round_no = 0
        for round_no in range(1, rule.rounds + 1):
            if self._over_budget(rule):
                return self._finish(round_no - 1, "time budget reached")
            self.run_round(round_no, done)
        if rule.until_ci_pct is None:
            return self._finish(rule.rounds, f"planned rounds done ({rule.rounds})")
        return self._adaptive(rule, round_no, done)

    def _adaptive(self, rule: StoppingRule, round_no: int, done: set[RunKey]) -> Outcome:
        """Rounds until blocklab.analysis.stopping.decide stops (Stein's two-stage rule:
        the rounds planned from the first stage's noise), the budget runs out, or the
        target is out of the budget's reach."""
        assert rule.until_ci_pct is not None
        max_rounds = rule.max_rounds or max(rule.rounds * 4, 20)
        first = stopping.first_stage(rule.rounds)
        while True:
            summary = summarize_experiment(self.db, self.exp.name, host=self.host)
            width = summary.max_ci_half_width_pct()
            decision = stopping.decide(
                summary.log_ratios(),
                width,
                rule.until_ci_pct,
                first=first,
                max_rounds=max_rounds,
            )
            if decision.stop or round_no >= max_rounds:
                return self._finish(round_no, decision.reason)
            reach = self._reachability(summary, rule, max_rounds, round_no)
            if reach is not None and not reach.reachable and round_no >= first:
                return self._finish(
                    round_no,
                    f"stopped early: the budget cannot reach a CI half-width of "
                    f"{rule.until_ci_pct:g} % ({reach.note})",
                )
            if self._over_budget(rule):
                return self._finish(
                    round_no,
                    f"time budget reached; widest CI half-width {_fmt_pct(width)} "
                    f"(target {rule.until_ci_pct:g} %)",
                )
            round_no += 1
            self.progress.grow(self.runs_per_round())
            self.run_round(round_no, done)

    def _reachability(
        self, summary: ExperimentSummary, rule: StoppingRule, max_rounds: int, round_no: int
    ) -> precision.Reachability | None:
        """blocklab.analysis.precision.can_reach on the per-round log ratios seen so far."""
        assert rule.until_ci_pct is not None
        ratios = summary.log_ratios()
        if not ratios:
            return None
        elapsed = self.clock() - self.started
        left = None if rule.time_budget_s is None else max(0.0, rule.time_budget_s - elapsed)
        per_round = elapsed / round_no if round_no else None
        return precision.can_reach(
            ratios,
            rule.until_ci_pct,
            max_rounds=max_rounds,
            seconds_left=left,
            seconds_per_round=per_round,
        )

    def run_round(self, round_no: int, done: set[RunKey]) -> None:
        slots = self.slots(round_no)
        order = list(dict.fromkeys(s.variant_id for s in slots))
        self.db.record_round(self.exp.name, round_no, self.exp.seed, order)
        if self.design == INTERLEAVED:
            self.run_interleaved(round_no, slots, done)
            return
        for position, slot in enumerate(slots):
            key = (slot.variant_id, round_no, slot.copy)
            if key in done:
                continue
            self.run_one(self.variants[slot.variant_id], round_no, position, slot.copy)
            done.add(key)

    def run_one(
        self, variant: Variant, round_no: int, position: int, copy_index: int = 0
    ) -> RunRecord:
        raw_dir = raw_dir_for(
            self.db.directory, self.exp.name, round_no, variant, copy_index, self.host
        )
        # a partial run of an interrupted invocation: discard it
        safe_remove_tree(raw_dir, [self.db.directory])
        results_space.check(self.db.directory)
        raw_dir.mkdir(parents=True)
        self.progress.run_started(variant.label, round_no, position)
        t0 = self.clock()
        label = RunLabel(self.exp.name, round_no, position)
        if variant.variant_id in self.unstartable:
            record = not_run(variant, label, raw_dir, self.unstartable[variant.variant_id])
        else:
            record = self.lab.run(
                variant,
                experiment=self.exp.name,
                round_no=round_no,
                position=position,
                raw_dir=raw_dir,
            )
        if record.status != "ok":  # a run that failed because the results disk filled
            results_space.check(self.db.directory)  # is not stored: it runs again
        if SERVER_START_FAILED in record.reason:
            self.unstartable.setdefault(variant.variant_id, f"round {round_no}")
        self._store(record, raw_dir, copy_index)
        self.progress.run_finished(record, self.clock() - t0)
        return record

    def run_interleaved(
        self, round_no: int, slots: Sequence[orders.Slot], done: set[RunKey]
    ) -> None:
        """The round as one piece; only the records not yet stored are stored."""
        keys = {s.variant_id: (s.variant_id, round_no, 0) for s in slots}
        if all(k in done for k in keys.values()):
            return
        variants = [self.variants[s.variant_id] for s in slots]
        raw_dirs = {}
        for v in variants:
            raw_dir = raw_dir_for(self.db.directory, self.exp.name, round_no, v, 0, self.host)
            if keys[v.variant_id] in done:  # stored before: this run's output is not kept
                raw_dir = raw_dir.with_name(raw_dir.name + "-rerun")
            safe_remove_tree(raw_dir, [self.db.directory])
            raw_dir.mkdir(parents=True)
            raw_dirs[v.variant_id] = raw_dir
        results_space.check(self.db.directory)
        self.progress.run_started(" / ".join(v.label for v in variants), round_no, 0)
        t0 = self.clock()
        label = RunLabel(self.exp.name, round_no, 0)
        records = self.lab.run_interleaved(
            variants, self.exp.run_design, raw_dirs, label=label, seed=self.exp.seed
        )
        share_s = (self.clock() - t0) / len(variants)  # both ran in the same minutes
        for v in variants:
            vid = v.variant_id
            if keys[vid] in done:
                safe_remove_tree(raw_dirs[vid], [self.db.directory])
                continue
            self._store(records[vid], raw_dirs[vid], 0)
            done.add(keys[vid])
            self.progress.run_started(v.label, round_no, records[vid].position)
            self.progress.run_finished(records[vid], share_s)

    def _store(self, record: RunRecord, raw_dir: Path, copy_index: int) -> None:
        record.raw_dir = self.db.raw_ref(raw_dir)
        record.copy_index = copy_index
        record.host = self.host
        record.provenance = {**record.provenance, "session": self.session}
        ok = record.status == "ok"
        # judged once, kept with the run: no summary or report judges it again, and none
        # reads the run without its trends
        trends = kept_trends.judged(record.series) if ok else None
        with results_space.guard(self.db.directory):
            self.db.record_run(record, trends)
        faults.step("stored")
        if ok:
            self.ok += 1
        else:
            self.failed += 1

    def _remember_unstartable(self) -> None:
        """A variant whose server did not start in a stored run is not tried again (also
        after a resume)."""
        for row in sorted(self.db.runs(self.exp.name), key=lambda r: r["round"]):
            reason = row["reason"] or ""
            if SERVER_START_FAILED in reason and not reason.startswith(NOT_RUN_PREFIX):
                self.unstartable.setdefault(row["variant_id"], f"round {row['round']}")

    def _over_budget(self, rule: StoppingRule) -> bool:
        return rule.time_budget_s is not None and self.clock() - self.started >= rule.time_budget_s

    def _finish(self, rounds: int, reason: str) -> Outcome:
        self.db.set_experiment_state(self.exp.name, "done", reason)
        return Outcome(rounds, self.ok, self.failed, reason)


NOT_RUN_PREFIX = "not run: "


def not_run(variant: Variant, label: RunLabel, raw_dir: Path, first: str) -> RunRecord:
    """The failed record of a variant not tried again: its server did not start before."""
    reason = (
        f"{NOT_RUN_PREFIX}{SERVER_START_FAILED} in {first} (that run's reason says why); "
        "not tried again"
    )
    return failed_without_running(variant, label, raw_dir, reason)


def _fmt_pct(width: float | None) -> str:
    return "unknown (too few paired rounds)" if width is None else f"{width:.2f} %"

"""The report's data layer: reads everything through blocklab.store (ResultsStore).

`load_experiment` gathers one experiment's variants, runs and per-run metrics and
computes the statistics (blocklab.analysis.stats, via report.shape). Per-second series and
checkpoints are read per run (`load_run_detail`) so only run pages carry them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocklab.analysis import stationarity
from blocklab.analysis.carryover import CarryOver
from blocklab.analysis.experiment_spec import design_of, equivalence_of
from blocklab.analysis.metrics import MetricInfo, drivers_of, throughput_info
from blocklab.analysis.round_table import rows_of
from blocklab.analysis.rounds import RoundValues, RunValue, per_round_values
from blocklab.analysis.stats import EQUIVALENCE_PCT, Comparison
from blocklab.analysis.summary import ExperimentSummary
from blocklab.economics import device_store
from blocklab.errors import UserError
from blocklab.report import shape
from blocklab.store import RESULTS_DB_NAME, ResultsStore, run_facts
from blocklab.store.base import run_key
from blocklab.store.factory import is_postgres, open_store

CellMaker = Callable[..., "shape.CellStats | None"]  # shape.cell_stats, or one that keeps them
# (a variant's runs, its id, the metrics, the design, is it a reference) -> each metric's
# per-round values: reduce_variant, or one that keeps them (report.reduction_cache)
Reducer = Callable[["list[RunView]", str, list[str], str, bool], "dict[str, RoundValues]"]


@dataclass
class RunView:
    id: int
    variant_id: str
    round: int
    position: int
    status: str
    reason: str
    started_at: str
    ended_at: str
    tps: float | None
    latency_avg_ms: float | None
    raw_dir: str
    command: str
    exit_code: int | None
    # not the run's settings and provenance (35 kB of JSON a real run): its page reads
    # them (RunDetail.details); every update at 10,000 runs read them all, and pickled
    # them for the run pages' digests (site.run_digest)
    metrics: dict[str, float | None]
    copy_index: int = 0  # the variant's n-th run in its round (abba, aa-control)

    def value(self, metric: str) -> float | None:
        if metric == "tps":
            return self.tps
        if metric == "latency_avg_ms":
            return self.latency_avg_ms
        return self.metrics.get(metric)


@dataclass
class VariantView:
    variant_id: str
    label: str
    position: int
    dims: dict[str, Any]
    variant: dict[str, Any]
    is_reference: bool
    reference_id: str | None = None  # the variant this one is compared with (grouped refs)
    cells: dict[str, shape.CellStats] = field(default_factory=dict)  # metric -> stats


@dataclass
class ExperimentView:
    name: str
    slug: str
    description: str
    created_at: str
    host: dict[str, Any]
    state: str
    end_reason: str
    reference: str | None
    variants: list[VariantView]
    runs: list[RunView]
    metrics: list[MetricInfo]
    throughput_name: str = "tps"  # the drivers' throughput: "tps", "tpmC"
    fleet_host: str = ""  # the fleet host whose runs these are ("" on one machine)
    stored_name: str = ""  # the experiment's name in the results store
    design: str = "paired"  # the experiment's design (blocklab.experiment_file.design)
    # the checks, the summary's (take_checks): the A/A of the throughput, its carry-over
    # (after a switch / after a repeat), the sentences on measured windows whose rates
    # drifted (blocklab.analysis.stationarity)
    aa: Comparison | None = None
    carryover: CarryOver | None = None
    stationarity: list[str] = field(default_factory=list)
    equivalence_pct: float = EQUIVALENCE_PCT  # X of "equal within ±X %"
    # (variant id, metric) -> its per-round values, reduced once for the cells and kept
    # for rounds.csv (variant_round_rows), which at 10,000 runs reduced every one a
    # second time
    reduced: dict[tuple[str, str], RoundValues] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.stored_name = self.stored_name or self.name

    @property
    def dims(self) -> dict[str, list[Any]]:
        return shape.dimension_values([v.dims for v in self.variants])

    @property
    def axes(self) -> tuple[str | None, str | None]:
        return shape.default_axes(list(self.dims))

    @property
    def n_ok(self) -> int:
        return sum(r.status == "ok" for r in self.runs)

    @property
    def n_failed(self) -> int:
        return sum(r.status != "ok" for r in self.runs)

    @property
    def failed_runs(self) -> list[RunView]:
        return [r for r in self.runs if r.status != "ok"]

    def variant(self, variant_id: str) -> VariantView:
        return next(v for v in self.variants if v.variant_id == variant_id)

    def runs_of(self, variant_id: str) -> list[RunView]:
        return [r for r in self.runs if r.variant_id == variant_id]

    def runs_by_variant(self) -> dict[str, list[RunView]]:
        """Every variant's runs_of, in one pass over the runs (not one a variant)."""
        out: dict[str, list[RunView]] = {v.variant_id: [] for v in self.variants}
        for r in self.runs:
            out.setdefault(r.variant_id, []).append(r)
        return out


@dataclass
class RunDetail:
    series: dict[str, list[tuple[float, float | None]]]
    checkpoints: list[dict[str, Any]]
    # the run's stored "provenance" and "settings" (details_of)
    details: dict[str, Any] = field(default_factory=dict)


def details_of(texts: tuple[str, str] | None) -> dict[str, Any]:
    """A run's "provenance" and "settings" of its stored texts (ResultsStore.run_texts:
    settings_json, provenance_json)."""
    settings, provenance = texts or ("", "")
    return {"provenance": run_facts.parsed(provenance), "settings": run_facts.parsed(settings)}


def slug(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "experiment"
    return s[:80]


def unique_slugs(exps: list[ExperimentView]) -> None:
    """Give each view a slug no other has, letter case aside (a site's file names)."""
    seen: set[str] = set()
    for e in exps:
        base, n = e.slug, 1
        while e.slug.lower() in seen:
            n += 1
            e.slug = f"{base}-{n}"
        seen.add(e.slug.lower())


def open_results(spec: str | Path) -> ResultsStore:
    """The results store `spec` names (a directory or a PostgreSQL URI), or a UserError
    naming --results."""
    if is_postgres(str(spec)):
        return _with_results(open_store(str(spec), create=False))
    results = Path(spec)
    if not results.is_dir():
        raise UserError(
            f"--results: {results} does not exist or is not a directory "
            "(give the results directory an experiment wrote to)"
        )
    if not (results / RESULTS_DB_NAME).is_file():
        raise UserError(
            f"--results: {results} holds no results database ({RESULTS_DB_NAME}); "
            "run an experiment first or point --results at a results directory"
        )
    return _with_results(open_store(str(results), create=False))


def _with_results(db: ResultsStore) -> ResultsStore:
    if not db.experiments() and not device_store.profiles(db):
        db.close()
        raise UserError(f"--results: {db.location} holds no experiment; run one first")
    return db


def _run_view(row: Any, metrics: dict[str, float | None]) -> RunView:
    return RunView(
        id=int(row["id"]),
        variant_id=row["variant_id"],
        round=int(row["round"]),
        position=int(row["position"]),
        status=row["status"],
        reason=row["reason"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        tps=row["tps"],
        latency_avg_ms=row["latency_avg_ms"],
        raw_dir=row["raw_dir"],
        command=row["command"],
        exit_code=row["exit_code"],
        metrics=metrics,
        copy_index=int(row["copy_index"] or 0),
    )


class RunViews:
    """Each run's view, by the run's id, start and end (its row and metrics never change
    once stored): taken from `known` (those a resident process made in the update before,
    report.resident) or made now; `used` holds this build's, for the next. At 10,000 runs
    making them all took 0.1 s of an update."""

    def __init__(self, known: Mapping[tuple[Any, ...], RunView] | None = None):
        self.known = known or {}
        self.used: dict[tuple[Any, ...], RunView] = {}

    def view(self, db: ResultsStore, row: Any) -> RunView:
        key = run_key(row)
        got = self.known.get(key)
        if got is None:
            got = _run_view(row, db.metrics(int(row["id"])))
        self.used[key] = got
        return got


def load_experiments(
    db: ResultsStore,
    *,
    cell_stats: CellMaker = shape.cell_stats,
    reduce: Reducer | None = None,
    views: RunViews | None = None,
) -> list[ExperimentView]:
    """Every stored experiment; a fleet's experiment once per host (a round pairs only
    with the same round on the same host), named `experiment @ host`, without its checks
    (take_checks). `cell_stats` makes each cell (shape.cell_stats; the site's answers from kept ones
    where it can), `reduce` each variant's per-round values (reduce_variant, or the site's
    kept ones), `views` each run's view (made here, or kept ones: RunViews)."""
    views = views or RunViews()
    return [
        load_experiment(
            db,
            name,
            host=host,
            cell_stats=cell_stats,
            reduce=reduce,
            views=views,
        )
        for name, host in experiment_keys(db)
    ]


def experiment_keys(db: ResultsStore) -> list[tuple[str, str | None]]:
    """(stored name, fleet host or None) of each view load_experiments makes, in its order."""
    keys: list[tuple[str, str | None]] = []
    for row in db.experiments():
        hosts = sorted({str(r["host"]) for r in db.runs(row["name"])}) or [""]
        fleet = len(hosts) > 1 or hosts != [""]
        keys += [(row["name"], h if fleet else None) for h in hosts]
    return keys


def take_checks(exp: ExperimentView, summary: ExperimentSummary) -> None:
    """The experiment's checks as its summary made them, which fit the sessions its runs
    name and judged every run's series once: the drift sentences (drift_notes), the A/A
    and the carry-over. A view has no checks of its own."""
    exp.stationarity = drift_notes(summary.stationarity)
    exp.aa, exp.carryover = summary.aa, summary.carryover


def drift_notes(summary_stationarity: list[str]) -> list[str]:
    """The drift sentences of the summary's stationarity lines (those it marks "! "): what
    stationarity.notes gives from the same runs' series, without judging them again."""
    prefix = stationarity.FINDING_PREFIX
    return [line.removeprefix(prefix) for line in summary_stationarity if line.startswith(prefix)]


def load_experiment(
    db: ResultsStore,
    name: str,
    *,
    host: str | None = None,
    cell_stats: CellMaker = shape.cell_stats,
    reduce: Reducer | None = None,
    views: RunViews | None = None,
) -> ExperimentView:
    """One experiment's view; with `host`, of that fleet host's runs only; its checks
    (`aa`, `carryover`, `stationarity`) left for take_checks."""
    exp = db.experiment(name)
    ref = exp["reference"]
    rows = [r for r in db.runs(name) if host is None or r["host"] == host]
    views = views or RunViews()
    runs = [views.view(db, r) for r in rows]
    variants = [_variant_view(v, ref) for v in db.variants(name)]
    present = {"tps", "latency_avg_ms"}
    for r in runs:
        present.update(k for k, val in r.metrics.items() if val is not None)
    names = drivers_of(json.dumps(v.variant) for v in variants)
    throughput = throughput_info(names)
    metrics = [throughput if m.key == "tps" else m for m in shape.order_metrics(present)]
    design, equivalence_pct = design_of(exp), equivalence_of(exp)
    reduced = _fill_cells(
        variants, runs, metrics, design, equivalence_pct, cell_stats, reduce or reduce_variant
    )
    shown = name if host is None else f"{name} @ {host}"
    return ExperimentView(
        name=shown,
        slug=slug(shown),
        description=exp["description"],
        created_at=exp["created_at"],
        host=json.loads(exp["host_json"] or "{}"),
        state=exp["state"],
        end_reason=exp["end_reason"],
        reference=ref,
        variants=variants,
        runs=runs,
        metrics=metrics,
        throughput_name=throughput_name(names),
        fleet_host=host or "",
        stored_name=name,
        design=design,
        equivalence_pct=equivalence_pct,
        reduced=reduced,
    )


def _variant_view(v: Any, ref: str | None) -> VariantView:
    """A stored variant's view; `ref` the experiment's reference (for a variant whose
    own reference is not stored)."""
    return VariantView(
        variant_id=v["variant_id"],
        label=v["label"],
        position=int(v["position"]),
        dims=json.loads(v["dims_json"] or "{}"),
        variant=json.loads(v["variant_json"] or "{}"),
        is_reference=v["variant_id"] == (v["reference_id"] or ref),
        reference_id=v["reference_id"] or ref,
    )


THROUGHPUT_SERIES = ("tps", "tpmc")  # a run's per-second throughput, by driver


def throughput_series(series: dict[str, Any]) -> list[tuple[float, float | None]]:
    """The per-second throughput of a run, whichever driver's it is."""
    for name in THROUGHPUT_SERIES:
        if series.get(name):
            return list(series[name])
    return []


def throughput_name(driver_names: list[str]) -> str:
    """The drivers' throughput metric ("tps" when they differ: the column's name)."""
    from blocklab.workloads import drivers

    metrics = {drivers.get(n).throughput_metric for n in driver_names}
    return metrics.pop() if len(metrics) == 1 else "tps"


def round_values(
    runs: list[RunView], variant_id: str, metric: str, design: str, *, is_reference: bool
) -> RoundValues:
    """round -> value of a variant under `design`, and the rounds left out with why: the
    one reduction of blocklab.analysis.rounds, as in the summary and rounds.csv."""
    mine = [
        RunValue(
            r.round,
            r.copy_index,
            _value(r, metric),
            "" if r.status == "ok" else (r.reason or "no reason given"),
        )
        for r in runs
        if r.variant_id == variant_id
    ]
    return per_round_values(design, mine, is_reference=is_reference)


def _failure(run: RunView) -> str:
    return "" if run.status == "ok" else (run.reason or "no reason given")


def _value(run: RunView, metric: str) -> float | None:
    v = run.value(metric) if run.status == "ok" else None
    return None if v is None else float(v)


def reduce_variant(
    runs: list[RunView], variant_id: str, metrics: list[str], design: str, is_reference: bool
) -> dict[str, RoundValues]:
    """Each metric's per-round values of one variant's runs (round_values)."""
    return {
        m: round_values(runs, variant_id, m, design, is_reference=is_reference) for m in metrics
    }


def _fill_cells(
    variants: list[VariantView],
    runs: list[RunView],
    metrics: list[MetricInfo],
    design: str,
    equivalence_pct: float = EQUIVALENCE_PCT,
    cell_stats: CellMaker = shape.cell_stats,
    reduce: Reducer = reduce_variant,
) -> dict[tuple[str, str], RoundValues]:
    """Each variant's statistics, paired by round with its own reference's; "equal"
    within the experiment's ±X % (its [experiment] equivalence), as the summary says.
    Returns the per-round values it reduced (`reduce`: each variant's once, every
    metric), by (variant id, metric)."""
    known = {v.variant_id for v in variants}
    refs = {v.reference_id for v in variants} | {v.variant_id for v in variants if v.is_reference}
    of: dict[str, list[RunView]] = {}  # each variant's runs: one pass, not one per cell
    for r in runs:
        of.setdefault(r.variant_id, []).append(r)
    keys = [m.key for m in metrics]
    reduced: dict[tuple[str, str], RoundValues] = {}  # a reference's once, not once a variant
    for v in variants:
        vid = v.variant_id
        for key, got in reduce(of.get(vid, []), vid, keys, design, vid in refs).items():
            reduced[vid, key] = got
    for m in metrics:
        for v in variants:
            mine = reduced[v.variant_id, m.key]
            has_ref = v.reference_id in known and not v.is_reference
            against = reduced[v.reference_id, m.key] if has_ref and v.reference_id else None
            cell = cell_stats(
                mine.values,
                against.values if against else None,
                m,
                is_reference=v.is_reference,
                equivalence_pct=equivalence_pct,
            )
            if cell is not None:
                v.cells[m.key] = cell
    return reduced


def variant_round_rows(
    exp: ExperimentView, v: VariantView, metrics: list[str]
) -> Iterator[dict[str, Any]]:
    """One variant's rows of rounds.csv (blocklab.analysis.round_table.round_rows: a row
    per metric and round), `metrics` in round_table.metric_order: the values the cells
    reduced, a metric they did not reduced here."""
    vid = v.variant_id
    mine: list[RunView] | None = None
    is_ref = vid in {u.reference_id for u in exp.variants}
    for metric in metrics:
        got = exp.reduced.get((vid, metric))
        if got is None:
            if mine is None:
                mine = [r for r in exp.runs if r.variant_id == vid]
            got = round_values(mine, vid, metric, exp.design, is_reference=is_ref)
        yield from rows_of(exp.stored_name, vid, v.label, metric, got)


def load_run_detail(db: ResultsStore, run_id: int) -> RunDetail:
    return run_detail(db, run_id, db.series(run_id), texts=db.run_texts([run_id]).get(run_id))


def run_detail(
    db: ResultsStore,
    run_id: int,
    series: dict[str, list[tuple[float, float | None]]],
    checkpoints: Sequence[Any] | None = None,
    texts: tuple[str, str] | None = None,
) -> RunDetail:
    """A run's series (read by the caller, in bulk), its checkpoints (`checkpoints`: its
    rows, read by the caller in bulk: ResultsStore.checkpoints_of_runs) and its details
    (`texts`: its stored settings and provenance, ResultsStore.run_texts)."""
    cps = [
        {
            "start_s": c["start_s"],
            "end_s": c["end_s"],
            "trigger": c["trigger"],
            "kind": shape.checkpoint_kind(c["trigger"]),
            "incomplete": bool(c["incomplete"]),
            "bytes_written": c["bytes_written"],
        }
        for c in (db.checkpoints(run_id) if checkpoints is None else checkpoints)
    ]
    return RunDetail(series=series, checkpoints=cps, details=details_of(texts))


def raw_source(results: Path, raw_dir: str) -> Path | None:
    """A run's raw directory (relative to the results dir, or absolute), if it exists."""
    if not raw_dir:
        return None
    p = Path(raw_dir)
    p = p if p.is_absolute() else results / p
    return p if p.is_dir() else None

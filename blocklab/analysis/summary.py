"""The summary of an experiment: per-variant statistics and paired comparisons with the
reference, computed from stored runs. Reads through the ResultsStore; the arithmetic is in
blocklab.analysis.stats (pure).

The analysis matches the experiment's design (blocklab.analysis.designs): a variant run twice in a
round (abba, or the reference of aa-control) counts once per round, as the geometric mean
of its copies, so the palindrome's drift cancels; with aa-control the reference's copy 1
against copy 0 is the A/A comparison (pooled over the groups of a grouped reference), the
machine's noise floor inside the experiment.
Beside tps the summary compares SIDE_METRICS, which depend less on the host's noise
(server CPU time and bytes per transaction), each with its CI."""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab.analysis import (
    carryover,
    disturbance,
    kept_trends,
    mixed_inputs,
    precision,
    sessions,
    stationarity,
    stats,
)
from blocklab.analysis import interleaved_checks as checks
from blocklab.analysis import layout as layout_stats
from blocklab.analysis.aa import aa_comparison
from blocklab.analysis.carryover import CarryOver
from blocklab.analysis.experiment_spec import (
    checkpoint_of,
    design_of,
    equivalence_of,
    measures_whole_cycles,
)
from blocklab.analysis.metrics import (
    RUN_COLUMN_METRICS,
    MetricInfo,
    compare,
    drivers_of,
    metric_info,
    summarize,
    throughput_info,
    verdict_text,
)
from blocklab.analysis.rounds import RoundValues, per_round_values
from blocklab.analysis.sessions import Sessions
from blocklab.analysis.setting import ok_provenances, setting_line
from blocklab.analysis.stored_values import round_copies, run_values
from blocklab.analysis.summary_memo import SummaryMemo, reduction_key
from blocklab.errors import UserError
from blocklab.experiment_file import design as designs
from blocklab.store import ResultsStore, Row


@dataclass
class VariantSummary:
    variant_id: str
    label: str
    dims: dict[str, Any]
    is_reference: bool
    reference_label: str
    n_failed: int
    failure_reasons: list[str]
    values: dict[int, float]  # round -> metric value, ok runs only
    summary: stats.Summary | None
    comparison: stats.Comparison | None
    verdict: str  # in the metric's words: faster/slower, better/worse, higher/lower
    latency_avg_ms: stats.Summary | None
    reference_id: str | None = None
    dropped: dict[int, str] = field(default_factory=dict)  # round -> why it has no value


@dataclass
class ExperimentSummary:
    name: str
    metric: str
    info: MetricInfo  # the metric's label and unit (tps: the driver's throughput)
    reference_id: str | None
    state: str
    end_reason: str
    rounds_done: int
    variants: list[VariantSummary] = field(default_factory=list)
    design: str = designs.PAIRED
    aa: stats.Comparison | None = None  # aa-control: reference copy 1 / copy 0
    aa_label: str = ""
    carryover: CarryOver | None = None  # runs after a switch / after a repeat
    # metric -> [(variant label, comparison with its reference)], for tps summaries
    # metric -> (variant label, comparison, 0 in both) for the side metrics
    side: dict[str, list[tuple[str, stats.Comparison, bool]]] = field(default_factory=dict)
    # the side metrics fixed by each variant's build (fixed_by_build): not findings
    side_fixed: list[str] = field(default_factory=list)
    setting: str = ""  # host, PostgreSQL version, workload, scale, clients (one line)
    # lines on the measured windows, judged flat or drifted (stationarity.summary_lines)
    stationarity: list[str] = field(default_factory=list)
    # other processes' use of the CPUs during the runs (blocklab.analysis.disturbance)
    disturbance: list[str] = field(default_factory=list)
    equivalence_pct: float = stats.EQUIVALENCE_PCT  # X of "equal within ±X %"
    checkpoint: str = "free"  # [design] checkpoint: "free", "aligned" or "cycles"
    # [design] layout_control: the spread of the reference's layout variants, and their labels
    layout: layout_stats.LayoutSpread | None = None
    layout_arms: list[str] = field(default_factory=list)
    # the variants whose runs came from more than one build or dataset (mixed_inputs)
    mixed: list[mixed_inputs.Mixed] = field(default_factory=list)
    sessions: Sessions = field(default_factory=Sessions)  # (analysis.sessions)

    def log_ratios(self) -> list[list[float]]:
        """Per comparison, the per-round log ratios other / reference (the samples the
        t interval is computed on): the noise blocklab.analysis.precision works with."""
        by_id = {v.variant_id: v for v in self.variants}
        out = []
        for v in self.variants:
            ref = by_id.get(v.reference_id or "")
            if not v.is_reference and ref is not None:
                out.append(precision.log_ratios(ref.values, v.values))
        return [xs for xs in out if xs]

    def max_ci_half_width_pct(self) -> float | None:
        """The widest comparison CI half-width, in percent; None if any cannot be computed."""
        widths = [
            v.comparison.ci_half_width_pct
            for v in self.variants
            if not v.is_reference and v.comparison is not None
        ]
        others = [v for v in self.variants if not v.is_reference]
        if not others or len(widths) < len(others) or any(w is None for w in widths):
            return None
        return max(w for w in widths if w is not None)


LATENCY = metric_info("latency_avg_ms")
MIN_ROUNDS_FIXED = 2  # rounds a value must repeat in to be called fixed by the build
# interleaved records keep no 1 Hz series (a window holds the other server's slices)
INTERLEAVED_NOT_JUDGED = (
    "stationarity: not judged (interleaved slices keep no per-second series: a window "
    "holds the other server's slices)"
)


SIDE_METRICS = (
    "server_cpu_s_per_xact",
    "wal_bytes_per_xact",
    "relation_write_bytes_per_xact",
    # what io_method, io_combine_limit, wal_compression and checksums change (issue 24)
    "wal_fpi_per_xact",
    "wal_fpi_bytes_per_xact",  # PostgreSQL 19+
    "io_read_bytes_per_read_relation",  # PostgreSQL 18+
    "device_data_read_bytes_per_request",
)


def run_hosts(runs: Sequence[Row]) -> list[str]:
    """The fleet hosts that ran `runs`, sorted ("" for runs of one machine)."""
    return sorted({str(r["host"]) for r in runs})


def summarize_by_host(
    db: ResultsStore, name: str, metric: str = "tps"
) -> list[tuple[str, ExperimentSummary]]:
    """One summary per host that ran the experiment (rounds pair within a host only)."""
    hosts = run_hosts(db.runs(name)) or [""]
    return [(h, summarize_experiment(db, name, metric, host=h)) for h in hosts]


def summarize_experiment(
    db: ResultsStore,
    name: str,
    metric: str = "tps",
    *,
    side: bool = True,
    host: str | None = None,
    fresh_trends: bool = False,
    checks: bool = True,
    memo: SummaryMemo | None = None,
) -> ExperimentSummary:
    """The summary of `host`'s runs (None: every run, which must come from one host: a
    round is paired only with the same round on the same host). The runs' stationarity
    trends are those kept in the store (blocklab.analysis.kept_trends), judged here for
    runs without them; `fresh_trends`: judged again for every run. `memo`: the windows,
    reductions and comparisons a resident process keeps (analysis.summary_memo).
    `checks=False`: the variants' rows alone, without their latency, setting line, A/A
    comparison, carry-over and layout control (a side metric's summary: at 10,000 runs
    they were a sixth of the report's update)."""
    exp = db.experiment(name)
    ref_id = exp["reference"]
    all_runs = _runs_on_host(db.runs(name), name, host)
    rounds_done = len({r["round"] for r in all_runs})
    design = design_of(exp)
    variants = db.variants(name)
    info = _info_of(metric, variants)
    result = ExperimentSummary(
        name, metric, info, ref_id, exp["state"], exp["end_reason"], rounds_done, design=design
    )
    result.equivalence_pct, result.checkpoint = equivalence_of(exp), checkpoint_of(exp)
    labels = {v["variant_id"]: v["label"] for v in variants}
    session_of = _what_ran(result, exp, variants, all_runs, host or "", labels) if checks else {}
    runs_of = _runs_by_variant(labels, all_runs)
    refs = {v["reference_id"] or ref_id for v in variants} - {None}
    reduced, slots = _reduced(db, design, runs_of, refs, metric, memo)
    values_of = {vid: rv.values for vid, rv in reduced.items()}
    aa_refs = sorted(refs & set(runs_of))
    if design == designs.AA_CONTROL and aa_refs and checks:
        ref_runs = [run_values(db, runs_of[r], metric) for r in aa_refs]
        result.aa = aa_comparison(*ref_runs, higher_is_better=info.higher_is_better is not False)
        result.aa_label = ", ".join(labels.get(r, r) for r in aa_refs)
    for v in variants:
        runs = runs_of[v["variant_id"]]
        eq = result.equivalence_pct
        vs = _variant_summary(db, v, ref_id, runs, values_of, labels, info, eq, slots, checks, memo)
        vs.dropped = reduced[v["variant_id"]].dropped
        if checks:
            vs.latency_avg_ms = _latency_summary(db, runs)
        result.variants.append(vs)
    if not checks:
        return result
    result.layout, result.layout_arms = layout_control(result.variants)
    result.sessions = sessions.find(result.variants, session_of, slots)
    if design == designs.INTERLEAVED and metric == "tps" and aa_refs:
        _interleaved(db, result, runs_of, aa_refs, labels, session_of)
    else:  # the interleaved design's carry-over is its slices' (_interleaved)
        result.carryover = carry_over(db, all_runs, metric, session_of)
    if side and metric == "tps":
        _add_side(db, result, exp, runs_of, labels, host, fresh_trends, memo)
    return result


def _what_ran(
    result: ExperimentSummary,
    exp: Row,
    variants: Sequence[Row],
    runs: Sequence[Row],
    host: str,
    labels: dict[str, str],
) -> dict[str, dict[int, str]]:
    """The setting line, and the variants whose runs came from more than one build or
    dataset (mixed_inputs), from the runs' provenance parsed once; returns each variant's
    rounds by the session that ran them (analysis.sessions)."""
    provenances = ok_provenances(runs)
    result.setting = setting_line(exp, variants, runs, host, [prov for _, prov in provenances])
    result.mixed = mixed_inputs.find(labels, provenances)
    ok = [r["round"] for r in runs if r["status"] == "ok"]
    named = zip(ok, provenances, strict=True)
    return sessions.rounds_by_session((vid, r, p.get("session") or None) for r, (vid, p) in named)


def _add_side(
    db: ResultsStore,
    result: ExperimentSummary,
    exp: Row,
    runs_of: dict[str, list[Row]],
    labels: dict[str, str],
    host: str | None,
    fresh_trends: bool,
    memo: SummaryMemo | None,
) -> None:
    """The throughput summary's side metrics, disturbance and stationarity lines."""
    result.side, result.side_fixed = _side_metrics(db, result.name, host, memo)
    result.disturbance = disturbance.lines(
        _ok_metric(db, runs_of, labels, disturbance.CPU_SHARE),
        _ok_metric(db, runs_of, labels, disturbance.DEVICE_SHARE),
    )
    if result.design == designs.INTERLEAVED:
        result.stationarity = [INTERLEAVED_NOT_JUDGED]
    elif not measures_whole_cycles(exp):
        ok_ids = _ok_ids(runs_of, labels)
        known = None if memo is None else memo.windows
        windows = kept_trends.windows_of(db, ok_ids, fresh=fresh_trends, known=known)
        result.stationarity = stationarity.window_lines(windows)


def layout_control(
    variants: Sequence[VariantSummary],
) -> tuple[layout_stats.LayoutSpread | None, list[str]]:
    """The layout control's spread and the labels of its arms (none: None, [])."""
    group = layout_stats.control_group(
        [
            layout_stats.Armed(v.label, v.dims, v.reference_label, v.is_reference, v.values)
            for v in variants
        ]
    )
    return (layout_stats.spread(group), list(group)[1:]) if group else (None, [])


def carry_over(
    db: ResultsStore, runs: Sequence[Row], metric: str, session_of: Mapping[str, Mapping[int, str]]
) -> CarryOver:
    """The carry-over estimate (blocklab.analysis.carryover) of `runs` on `metric`, a
    level per variant and session (`session_of`: variant -> round -> session)."""
    values = run_values(db, runs, metric)
    return carryover.estimate(
        (
            carryover.PositionRun(v.round, int(r["position"]), r["variant_id"], v.value)
            for r, v in zip(runs, values, strict=True)
        ),
        sessions.of_rounds(session_of),
    )


def _reduced(
    db: ResultsStore,
    design: str,
    runs_of: Mapping[str, Sequence[Row]],
    refs: set[str],
    metric: str,
    memo: SummaryMemo | None = None,
) -> tuple[dict[str, RoundValues], dict[str, dict[int, float]]]:
    """Each variant's `metric` reduced per round (blocklab.analysis.rounds; taken from
    `memo` where it holds them), and the storage slots its comparison fits (_slot_signs);
    each run's metrics read once."""
    metrics_of = functools.cache(db.metrics)

    def reduce(vid: str, runs: Sequence[Row]) -> RoundValues:
        def make() -> RoundValues:
            values = run_values(db, runs, metric, metrics_of)
            return per_round_values(design, values, is_reference=vid in refs)

        if memo is None:
            return make()
        return memo.reduced(reduction_key(design, vid, vid in refs, metric, runs), make)

    reduced = {vid: reduce(vid, runs) for vid, runs in runs_of.items()}
    return reduced, _slot_signs(db, design, runs_of, refs, metrics_of)


def _slot_signs(
    db: ResultsStore,
    design: str,
    runs_of: Mapping[str, Sequence[Row]],
    refs: set[str],
    metrics_of: Callable[[int], Mapping[str, float | None]],
) -> dict[str, dict[int, float]]:
    """interleaved with one variant beside its reference: that variant's storage slot per
    round as -1/+1 (checks.slot_signs), fitted beside its effect in every metric's
    comparison, so a bias between the two slots neither shifts the estimate (6 rounds hold
    each variant 4 times on one slot, 2 on the other) nor widens its interval. Empty for
    other designs and for records without slots."""
    others = [vid for vid in runs_of if vid not in refs]
    if design != designs.INTERLEAVED or len(others) != 1 or len(runs_of) != 2:
        return {}
    runs = run_values(db, runs_of[others[0]], checks.STORAGE_SLOT, metrics_of)
    slots = per_round_values(design, runs, is_reference=False).values
    return {others[0]: checks.slot_signs(slots)} if slots else {}


def _interleaved(
    db: ResultsStore,
    result: ExperimentSummary,
    runs_of: Mapping[str, Sequence[Row]],
    refs: Sequence[str],
    labels: Mapping[str, str],
    session_of: Mapping[str, Mapping[int, str]],
) -> None:
    """The interleaved design's A/A comparison, named by the references and what it
    compares (checks.design_aa: the storage slots, each session's variant effect fitted
    beside them, or the reference's Thue-Morse halves), and its carry-over (slices after
    a switch / after a repeat), into `result`; from the records' metrics reduced per
    round as every metric is (blocklab.analysis.rounds)."""

    def per_round(vid: str, metric: str) -> dict[int, float]:
        runs = run_values(db, runs_of[vid], metric)
        return per_round_values(designs.INTERLEAVED, runs, is_reference=vid in refs).values

    up = result.info.higher_is_better is not False
    result.aa, what = checks.design_aa(
        per_round, refs[0], list(runs_of), higher_is_better=up, session_of=session_of
    )
    result.aa_label = ", ".join(labels.get(r, r) for r in refs) + f" {what}"
    kinds = [
        (per_round(vid, checks.TPS_AFTER_SWITCH), per_round(vid, checks.TPS_AFTER_REPEAT))
        for vid in runs_of
    ]
    result.carryover = checks.carry_over(kinds)


def _ok_metric(
    db: ResultsStore, runs_of: dict[str, list[Row]], labels: dict[str, str], metric: str
) -> dict[str, list[float | None]]:
    """variant label -> `metric` of each of its successful runs (None: not stored)."""
    return {
        labels.get(vid, vid): [db.metrics(r["id"]).get(metric) for r in runs if r["status"] == "ok"]
        for vid, runs in runs_of.items()
    }


def _ok_ids(runs_of: dict[str, list[Row]], labels: dict[str, str]) -> dict[str, list[int]]:
    """variant label -> the ids of its successful runs."""
    return {
        labels.get(vid, vid): [int(r["id"]) for r in runs if r["status"] == "ok"]
        for vid, runs in runs_of.items()
    }


def _runs_on_host(runs: Sequence[Row], name: str, host: str | None) -> Sequence[Row]:
    """`host`'s runs among `runs`; None: all of them, which must come from one host."""
    if host is not None:
        return [r for r in runs if r["host"] == host]
    if len(hosts := run_hosts(runs)) > 1:
        raise UserError(
            f"experiment '{name}' ran on hosts {', '.join(hosts)}: its rounds pair within "
            "a host only; summarise one host at a time"
        )
    return runs


def _info_of(metric: str, variants: Sequence[Row]) -> MetricInfo:
    """The metric's label and unit; tps in the words of the variants' drivers."""
    info = metric_info(metric)
    if metric == "tps":
        info = throughput_info(drivers_of(v["variant_json"] for v in variants))
    return info


def _runs_by_variant(labels: dict[str, str], runs: Sequence[Row]) -> dict[str, list[Row]]:
    """variant_id -> its runs among `runs` (an empty list for a variant without runs)."""
    runs_of: dict[str, list[Row]] = {vid: [] for vid in labels}
    for r in runs:
        runs_of.setdefault(r["variant_id"], []).append(r)
    return runs_of


def _variant_summary(
    db: ResultsStore,
    v: Row,
    ref_id: str | None,
    runs: Sequence[Row],
    values_of: dict[str, dict[int, float]],
    labels: dict[str, str],
    info: MetricInfo,
    equivalence_pct: float = stats.EQUIVALENCE_PCT,
    slots: Mapping[str, Mapping[int, float]] | None = None,
    summarized: bool = True,
    memo: SummaryMemo | None = None,
) -> VariantSummary:
    """Variant `v`'s summary from its `runs`, compared with its reference's values (the
    experiment's reference `ref_id` unless it names its own); `summarized`: with its
    values' own summary (a side metric's row uses only the comparison); `memo`: where the
    comparison may be kept (analysis.summary_memo)."""
    vid = v["variant_id"]
    my_ref = v["reference_id"] or ref_id
    failed = [r for r in runs if r["status"] != "ok"]
    values = values_of[vid]
    is_ref = my_ref is None or vid == my_ref
    comparison = None
    if my_ref is not None and not is_ref:
        nuisance, ref_values = (slots or {}).get(vid), values_of.get(my_ref, {})

        def make() -> stats.Comparison | None:
            return compare(ref_values, values, info, equivalence_pct, nuisance)

        rest = (info, equivalence_pct, tuple(sorted((nuisance or {}).items())))
        comparison = make() if memo is None else memo.compared(ref_values, values, rest, make)
    return VariantSummary(
        variant_id=vid,
        label=v["label"],
        dims=json.loads(v["dims_json"]),
        is_reference=is_ref,
        reference_label=labels.get(my_ref or "", ""),
        n_failed=len(failed),
        failure_reasons=grouped_reasons([(r["round"], r["reason"]) for r in failed]),
        values=values,
        summary=summarize(list(values.values()), info) if values and summarized else None,
        comparison=comparison,
        verdict=verdict_text(comparison, info) if comparison else "",
        latency_avg_ms=None,  # the caller's (_latency_summary), where it is wanted
        reference_id=my_ref,
    )


def _latency_summary(db: ResultsStore, runs: Sequence[Row]) -> stats.Summary | None:
    """The average latencies of `runs`' successful copies, summarised (None without any)."""
    lat_copies = round_copies(db, runs, "latency_avg_ms")
    latencies = [x for cs in lat_copies.values() for x in cs.values()]
    return summarize(latencies, metric_info("latency_avg_ms")) if latencies else None


def _side_metrics(
    db: ResultsStore, name: str, host: str | None, memo: SummaryMemo | None = None
) -> tuple[dict[str, list[tuple[str, stats.Comparison, bool]]], list[str]]:
    """The side metrics' comparisons, and the labels of those fixed by the builds."""
    stored = set(db.metric_names(name))
    out, fixed = {}, []
    for m in ("latency_avg_ms", *SIDE_METRICS):  # latency: a run column, compared too
        if m not in stored and m not in RUN_COLUMN_METRICS:
            continue
        s = summarize_experiment(db, name, m, side=False, host=host, checks=False, memo=memo)
        by_id = {v.variant_id: v for v in s.variants}
        pairs = [(v, by_id.get(v.reference_id or "")) for v in s.variants]
        pairs = [(v, r) for v, r in pairs if v.comparison is not None and v.comparison.n_pairs]
        if pairs and all(r is not None and fixed_by_build([v.values, r.values]) for v, r in pairs):
            fixed.append(s.info.label)
            continue
        rows = [(v.label, v.comparison, _zero_in_both(v, r)) for v, r in pairs]
        if rows:
            out[m] = [(label, c, zero) for label, c, zero in rows if c is not None]
    return out, fixed


def fixed_by_build(values: Sequence[Mapping[int, float]]) -> bool:
    """Each variant's metric took one value in every round (at least 2) and the variants
    differ: a constant of each build or geometry (pg_stat_io's bytes per write request of
    a relation is its page size), not a measured change; not counted as a finding."""
    per_variant = [set(v.values()) for v in values]
    if any(len(v) < MIN_ROUNDS_FIXED for v in values) or any(len(s) != 1 for s in per_variant):
        return False
    return len(set().union(*per_variant)) > 1


def _zero_in_both(v: VariantSummary, ref: VariantSummary | None) -> bool:
    """Every round of the variant and of its reference is 0 (a counter that counted
    nothing in both): said so, not printed as "+0.0 %"."""
    return (
        ref is not None
        and bool(v.values)
        and bool(ref.values)
        and not any(v.values.values())
        and not any(ref.values.values())
    )


def restore_note(db: ResultsStore, experiment: str, dataset_init_s: Sequence[float]) -> str:
    """Restoring the snapshot against making the dataset again ("" without both)."""
    restores = [
        v for r in db.runs(experiment) if (v := db.metrics(r["id"]).get("restore_s")) is not None
    ]
    if not restores or not dataset_init_s:
        return ""
    return (
        "Every run started from the dataset's snapshot: restore "
        f"{statistics.median(restores):.2f} s per run (median of {len(restores)}), against "
        f"{statistics.median(dataset_init_s):.1f} s to initialise a dataset."
    )


def grouped_reasons(failed: list[tuple[int, str]]) -> list[str]:
    """One line per distinct reason with the rounds it holds for (pure): a variant whose
    server never starts is reported once, not once per round."""
    rounds: dict[str, list[int]] = {}
    for round_no, reason in sorted(failed):
        rounds.setdefault(reason or "", []).append(round_no)
    out = []
    for reason, nums in rounds.items():
        which = f"round {nums[0]}" if len(nums) == 1 else f"rounds {', '.join(map(str, nums))}"
        out.append(f"{which}: {reason}")
    return out

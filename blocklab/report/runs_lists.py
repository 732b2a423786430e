"""The experiment page and its runs lists: the runs inline up to RUNS_PER_PAGE runs, else
each variant's runs on pages of their own (runs-<variant>-<n>.html), so that a new run
rewrites its variant's last list page and no other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from blocklab.analysis import stationarity
from blocklab.report import io_contexts, manifest
from blocklab.report.data import ExperimentView, RunView, VariantView
from blocklab.report.pagedata import experiment_json
from blocklab.report.writer import Writer

RUNS_PER_PAGE = 500  # runs listed a page: on the experiment page, else on runs-<v>-<n>.html
MAX_FAILED_LISTED = 200  # failed runs listed on the experiment page (all are in runs.csv)


def write_runs_lists(
    w: Writer,
    exp: ExperimentView,
    labels: dict[str, str],
    digests: Mapping[int, str],
    *,
    has_queries: bool = False,
    extras: dict[str, Any] | None = None,
) -> None:
    """The experiment page, with its runs inline up to RUNS_PER_PAGE runs, else each
    variant's runs on pages of their own, RUNS_PER_PAGE a page (runs_pages): a new run
    changes its variant's last page, not every page after it. A list page whose runs'
    `digests` (their pages' inputs) and place are those it was made from is kept, not
    made again."""
    base = f"e/{exp.slug}"
    grouped = exp.runs_by_variant()
    by_variant = {v.variant_id: grouped[v.variant_id] for v in exp.variants}
    paged = len(exp.runs) > RUNS_PER_PAGE
    lists = runs_pages(exp.variants, by_variant, RUNS_PER_PAGE) if paged else []
    ref_ids = dict.fromkeys(v.variant_id for v in exp.variants if v.is_reference)
    w.page(
        f"{base}/index.html",
        "experiment.html",
        page="experiment",
        exp=exp,
        labels=labels,
        reference_label=", ".join(labels[r] for r in ref_ids) or "none",
        failed_count={v: sum(r.status != "ok" for r in rs) for v, rs in by_variant.items()},
        run_counts={v: len(rs) for v, rs in by_variant.items()},
        failed_runs=exp.failed_runs[:MAX_FAILED_LISTED],
        groups=[] if paged else [(v, by_variant[v.variant_id], False) for v in exp.variants],
        paged=paged,
        runs_per_page=RUNS_PER_PAGE,
        first_pages={p.variant.variant_id: p for p in lists if p.number == 1},
        has_queries=has_queries,
        stationarity_rule=stationarity.RULE,
        data=experiment_json(exp) | (extras or {}),
        io=io_contexts.io_table(exp.variants),
    )
    for page in lists:
        rel = f"{base}/{page.name(page.number)}"
        if _kept(w, rel, exp, page, digests):
            continue
        w.page(
            rel,
            "runs.html",
            page="runs",
            charts=False,
            exp=exp,
            groups=[(page.variant, page.runs, page.number > 1)],
            at=page,
        )


def _kept(
    w: Writer, rel: str, exp: ExperimentView, page: RunsPage, digests: Mapping[int, str]
) -> bool:
    """Record what list page `rel` is made from; True when the site's is made from the
    same (the manifest says so) and is kept."""
    v = page.variant
    made_of = manifest.digest(
        [
            [exp.name, exp.slug, exp.throughput_name, v.variant_id, v.label, v.dims],
            [page.index, page.number, page.pages],
            [digests[r.id] for r in page.runs],
        ]
    )
    w.new.cells[rel] = made_of
    return w.old.cells.get(rel) == made_of and w.keep(rel)


@dataclass(frozen=True)
class RunsPage:
    """Page `number` of `pages` of one variant's runs: runs-<index>-<number>.html, its
    index the variant's place in the experiment (1 on)."""

    variant: VariantView
    index: int
    number: int
    pages: int
    runs: list[RunView]

    def name(self, number: int) -> str:
        return f"runs-{self.index}-{number}.html"


def runs_pages(
    variants: list[VariantView], runs_of: dict[str, list[RunView]], size: int
) -> list[RunsPage]:
    """Each variant's runs, in their order, on pages of at most `size` runs; a variant
    without runs has no page."""
    out = []
    for index, v in enumerate(variants, 1):
        runs = runs_of[v.variant_id]
        pages = -(-len(runs) // size)
        for k in range(pages):
            out.append(RunsPage(v, index, k + 1, pages, runs[k * size : (k + 1) * size]))
    return out

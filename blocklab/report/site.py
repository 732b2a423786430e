"""Static report site: HTML pages (jinja2), the bundled chart library, CSV files, raw files.

The site works from disk (file://) with no network: plotly.min.js is copied from the
plotly Python package, every page embeds its own data as JSON, every link is relative.
Series go on run pages only; the index and experiment pages carry per-variant numbers.

Layout:
  index.html  compare.html  assets/{plotly.min.js,site.css,site.js}
  e/<experiment>/index.html  grid.html  runs.csv  rounds.csv
  e/<experiment>/runs/<id>.html  <id>-raw/<raw files>
A run's per-second series are in its page once, gzip-compressed (pagedata.pack): the page
draws them and offers them as a CSV made from them (no file of their own, and no copy in
an experiment-wide file: at 10,000 runs those copies were 51 MB of a 196 MB site).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab import __version__, faults, proc
from blocklab.analysis.round_table import metric_order
from blocklab.analysis.summary import ExperimentSummary
from blocklab.economics import device_store
from blocklab.errors import UserError
from blocklab.report import csv_parts, data, devices, explain, manifest, parallel
from blocklab.report.cell_cache import CellCache
from blocklab.report.data import ExperimentView, RunView, VariantView
from blocklab.report.grid import write_grid
from blocklab.report.headline import Answer, headline_lines
from blocklab.report.kept_experiments import KeptExperiments, experiment_digest
from blocklab.report.pagedata import (
    compare_json,
    details_script,
    pack,
    run_json,
)
from blocklab.report.queries import write_queries
from blocklab.report.rawfiles import copy_raw
from blocklab.report.reduction_cache import ReductionCache, rounds_csv
from blocklab.report.resident import Resident
from blocklab.report.runs_lists import write_runs_lists
from blocklab.report.summaries import Summaries
from blocklab.report.writer import MARKER, Writer, WriterState
from blocklab.store import ResultsStore


@dataclass(frozen=True)
class SiteResult:
    out: Path
    experiments: int
    runs: int
    pages: int
    html_bytes: int
    total_bytes: int
    largest_page: str
    largest_page_bytes: int
    elapsed_s: float
    written: int = 0  # HTML pages written
    kept: int = 0  # HTML pages left as they were (incremental update)
    incremental: bool = False


# ---------------------------------------------------------------- entry point


def build_site(
    spec: str | Path, out: Path, *, full: bool = False, resident: Resident | None = None
) -> SiteResult:
    """Generate the site for every experiment in the results store `spec` (a directory or
    a PostgreSQL URI) into `out`.

    When `out` holds a site of the same blocklab version and templates (its manifest says
    so), only the pages whose inputs changed are rewritten, in place; otherwise (or with
    `full`) the site is generated whole into a new directory that then replaces `out`.
    `resident`: what a process that updates the site again and again keeps between
    updates (report.resident; `report --watch`)."""
    started = time.monotonic()
    out = out.absolute()
    db = data.open_results(spec)
    results = db.directory.absolute()  # where the runs' raw files are
    # what the process holds now, and the views once made (_generate), live as long as
    # the build: kept out of the cyclic collector's full passes, which at 10,000 runs
    # walked them three times an update (0.25 to 0.3 s; 0.015 s frozen)
    gc.freeze()
    try:
        names = [row["name"] for row in db.experiments()]
        runs_kept = None if resident is None else resident.runs_of(names)
        for name in names:
            db.read_ahead(name, runs_kept)  # the runs and metrics read once, not once a use
        gc.freeze()  # and what was read ahead, before the summaries' process is forked
        _check_out(out, results)
        version = manifest.site_version()
        old = None if full or not (out / MARKER).exists() else manifest.load(out)
        if old is not None and old.version == version:
            w = Writer(out, old)
            n_exp, n_runs = _generate(db, results, w, fresh=full, update=True, resident=resident)
            w.finish()
            _remove_stale(out, w.files)
        else:
            w = _build_whole(db, results, out, version, fresh=full, resident=resident)
            n_exp, n_runs = w.n_exp, w.n_runs
    finally:
        db.close()
        gc.unfreeze()
    largest = max(w.new.pages.items(), key=lambda kv: kv[1], default=("", 0))
    return SiteResult(
        out,
        n_exp,
        n_runs,
        pages=len(w.new.pages),
        html_bytes=sum(w.new.pages.values()),
        total_bytes=w.total_bytes(),
        largest_page=largest[0],
        largest_page_bytes=largest[1],
        elapsed_s=round(time.monotonic() - started, 3),
        written=w.written,
        kept=w.kept,
        incremental=old is not None and old.version == version,
    )


def _build_whole(
    db: ResultsStore,
    results: Path,
    out: Path,
    version: str,
    *,
    fresh: bool,
    resident: Resident | None,
) -> Writer:
    _remove_leftovers(out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        w = Writer(tmp, manifest.Manifest(version))
        w.n_exp, w.n_runs = _generate(db, results, w, fresh=fresh, update=False, resident=resident)
        (tmp / MARKER).write_text(f"generated by blocklab {__version__}\n")
        w.finish()
        faults.step("report")
        _swap(tmp, out)
        w.out = out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return w


def _check_out(out: Path, results: Path) -> None:
    if out == results or out in results.parents:
        raise UserError(f"--out: {out} would replace the results directory; give a new directory")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} is a file; give a directory")
    made_in = next(p for p in (out, *out.parents) if p.exists())
    if made_in == out and out.is_dir():
        made_in = out.parent  # a whole site is made beside it, then renamed over it
    if not os.access(made_in, os.W_OK):
        raise UserError(
            f"--out: {out} cannot be written ({made_in} is read-only to blocklab); give "
            "--out a directory that can (the results can stay where they are)"
        )
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise UserError(
            f"--out: {out} is not empty and holds no blocklab site; give a new or empty "
            "directory (blocklab replaces only sites it generated)"
        )


def _remove_leftovers(out: Path) -> None:
    """The temporary and old sites of a report process that was killed (its PID is gone)."""
    if not out.parent.is_dir():
        return
    for kind in ("tmp", "old"):
        for p in out.parent.glob(f".{out.name}.{kind}-*"):
            pid = p.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not proc.pid_alive(int(pid)) and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)


def _swap(new: Path, out: Path) -> None:
    """Replace `out` by `new` with two renames, so a server never sees half a site."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _remove_stale(out: Path, keep: set[str]) -> None:
    """Delete what an incremental update did not produce or keep (runs gone, old files).
    Raw directories are kept whole (`keep` names them with a trailing slash)."""
    emptied = []
    for dirpath, dirnames, filenames in os.walk(out):
        rel_dir = os.path.relpath(dirpath, out)
        rel = "" if rel_dir == "." else f"{rel_dir}/"
        dirnames[:] = [d for d in dirnames if f"{rel}{d}/" not in keep]
        for name in filenames:
            if f"{rel}{name}" not in keep:
                os.unlink(os.path.join(dirpath, name))
                emptied.append(dirpath)
    for d in sorted(set(emptied), key=len, reverse=True):
        if d != str(out) and not os.listdir(d):
            os.rmdir(d)


def page_weight(out: Path) -> tuple[int, int, int, str, int]:
    """(pages, HTML bytes, total bytes, largest page, its bytes) of a generated site."""
    pages = html = total = biggest = 0
    name = ""
    for p in out.rglob("*"):
        if not p.is_file():
            continue
        size = p.stat().st_size
        total += size
        if p.suffix == ".html":
            pages, html = pages + 1, html + size
            if size > biggest:
                biggest, name = size, str(p.relative_to(out))
    return pages, html, total, name, biggest


def _generate(
    db: ResultsStore,
    results: Path,
    w: Writer,
    *,
    fresh: bool,
    update: bool,
    resident: Resident | None = None,
) -> tuple[int, int]:
    """Every page and file of the site; `fresh` (--full): every run's stationarity judged
    again from its series (blocklab.analysis.kept_trends), the kept trends replaced.
    `update`: few run pages to write, so the summaries are made in a process of their
    own meanwhile (a whole site's run pages keep every core busy without it).
    `resident`: what was kept from the update before (report.resident)."""
    copy_assets(w)
    keys, kept = data.experiment_keys(db), KeptExperiments(w.old.kept_experiments)
    digests = {key: experiment_digest(db, *key) for key in keys}
    todo = [key for key in keys if not kept.may_keep(digests[key])]  # summaries to make
    summaries = Summaries(db, todo, fresh, resident)
    with parallel.begun(summaries.make, fork=update) as summaries.done:
        # the cells and reductions the site's manifest keeps, the views the resident keeps
        known, kept_views = (None, None) if resident is None else (resident.digests, resident.views)
        cells, reductions = CellCache(w.old.stats), ReductionCache(w.old.reductions, known)
        views, reduce = data.RunViews(kept_views), reductions.reduce
        exps = data.load_experiments(  # their checks are the summary's (write_experiment)
            db, cell_stats=cells.cell_stats, reduce=reduce, views=views
        )
        w.new.stats, w.new.reductions = cells.used, reductions.used
        if resident is not None:  # the runs of this update only
            resident.digests, resident.views = reductions.of_key, views.used
        gc.freeze()  # the views (build_site)
        data.unique_slugs(exps)
        answers: dict[str, Answer] = {}
        for exp in exps:
            key = (exp.stored_name, exp.fleet_host or None)
            answer = kept.keep(w, exp, digests[key])  # unchanged: its files kept whole
            if answer is None:
                made = functools.partial(summaries.of, key)
                started = run_pages_started(w, db, results, exp, reductions.run_digest)
                with started as pages:  # in workers, meanwhile:
                    if not update:
                        summaries.done()  # made here now, while the workers write the run pages
                    answer = headline_lines(write_experiment(w, db, exp, made, pages))
                kept.record(w, exp, digests[key], answer)
            answers[exp.slug] = answer
        summaries.keep()
    w.page(
        "index.html",
        "index.html",
        page="index",
        charts=False,
        experiments=exps,
        answers=answers,
        results=db.location,
        latest=max((r.ended_at or "" for e in exps for r in e.runs), default=""),
        device_profiles=device_store.profiles(db),
    )
    w.page("compare.html", "compare.html", page="compare", data=compare_json(exps))
    write_devices(w, db)
    return len(exps), sum(len(e.runs) for e in exps)


def write_devices(w: Writer, db: ResultsStore) -> None:
    """devices.html when device profiles are stored (blocklab.report.devices)."""
    profiles = devices.devices_json(db)
    if profiles:
        w.page(
            "devices.html",
            "devices.html",
            page="devices",
            profiles=profiles,
            data={"profiles": profiles},
            ram_price=devices.REPORT_RAM_PRICE_PER_GB,
            device_price=devices.REPORT_DEVICE_PRICE,
        )


def copy_assets(w: Writer) -> None:
    """The chart library from the plotly package, and the site's own CSS and JS."""
    import plotly

    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not bundled.is_file():
        raise UserError(
            f"plotly.min.js is missing from the plotly package ({bundled}); reinstall plotly"
        )
    dest = w.file("assets/plotly.min.js")
    if not dest.is_file() or dest.stat().st_size != bundled.stat().st_size:
        shutil.copyfile(bundled, dest)
    static = resources.files("blocklab.report").joinpath("static")
    for name in ("site.css", "site.js"):
        w.put(f"assets/{name}", static.joinpath(name).read_text())


# ---------------------------------------------------------------- one experiment


Tps = dict[int, list[tuple[float, float | None]]]
# run pages whose stored data is read at once: a real run's settings and provenance are
# 35 kB, its series about as much
PAGES_READ = 200


def run_digest(run_part: str, of_variant: str) -> str:
    """What a run's page and files are made of (runs are immutable once recorded):
    `run_part` the digest of the run's view (reduction_cache.run_digest, made once a
    build), `of_variant` of its experiment's and variant's part (variant_digest, made
    once a variant)."""
    return hashlib.sha256(f"{of_variant}:{run_part}".encode()).hexdigest()[:24]


def variant_digest(exp: ExperimentView, variant: VariantView, first_run: int | None) -> str:
    """What a variant's run pages share: its definition, and which run's details are the
    base of theirs (`first_run`: runs are immutable, so its id names them)."""
    return manifest.digest(
        [exp.name, exp.slug, variant.label, variant.dims, variant.variant, first_run]
    )


def _first_runs(exp: ExperimentView) -> dict[str, RunView]:
    """Each variant's run of the least id."""
    firsts: dict[str, RunView] = {}
    for r in exp.runs:
        if r.variant_id not in firsts or r.id < firsts[r.variant_id].id:
            firsts[r.variant_id] = r
    return firsts


@dataclass(frozen=True)
class RunPages:
    """An experiment's run pages: each run's digest, whether its page is kept, the old
    manifest's entries, and the results of the pages being written (tps, writer state)."""

    digests: list[str]
    kept: list[bool]
    old: dict[int, manifest.RunEntry]
    results: Callable[[], list[tuple[Tps, WriterState]]]


@contextlib.contextmanager
def run_pages_started(
    w: Writer,
    db: ResultsStore,
    results: Path,
    exp: ExperimentView,
    run_part: Callable[[RunView], str],
) -> Iterator[RunPages]:
    """The run pages whose inputs changed, begun in worker processes (parallel.started)
    while this one writes the experiment's other pages; a run whose inputs are unchanged
    keeps its page. `run_part`: the digest of a run's view (ReductionCache.run_digest)."""
    base = f"e/{exp.slug}"
    firsts = _first_runs(exp)  # each variant's first run: its pages' base details
    texts = db.run_texts([r.id for r in firsts.values()])
    bases = {vid: data.details_of(texts.get(r.id)) for vid, r in firsts.items()}
    w.put(f"{base}/runs/details.js", details_script(bases))
    first_ids = {vid: r.id for vid, r in firsts.items()}
    of_variant = {
        v.variant_id: variant_digest(exp, v, first_ids.get(v.variant_id)) for v in exp.variants
    }
    old = w.old.runs_of(exp.slug)
    digests = [run_digest(run_part(r), of_variant[r.variant_id]) for r in exp.runs]
    present = w.files_in(f"{base}/runs") if old else set()
    kept = [
        (p := old.get(r.id)) is not None and p.digest == d and _keep_run(w, base, r, present)
        for r, d in zip(exp.runs, digests, strict=True)
    ]
    todo = [r for r, k in zip(exp.runs, kept, strict=True) if not k]

    def work(k: int, lo: int, hi: int) -> tuple[Tps, WriterState]:
        alone = lo == 0 and hi == len(todo)  # here, in this process
        if not alone:
            w.reset()  # a worker process reports only what it wrote
        store = db if alone else db.reopen()  # a process's own connection
        try:
            got = _write_runs(w, store, results, exp, todo[lo:hi], bases)
        finally:
            if not alone:
                store.close()
        return got, ({}, set(), 0, 0) if alone else w.state()

    with parallel.started(work, len(todo)) as got:
        yield RunPages(digests, kept, old, got)


def _run_pages_done(
    w: Writer, exp: ExperimentView, pages: RunPages
) -> tuple[Tps, list[manifest.RunEntry]]:
    """The written run pages' tps series, and every run's manifest entry."""
    tps: Tps = {}
    for got, state in pages.results():
        tps.update(got)
        w.merge(state)
    entries = [
        pages.old[r.id] if k else _entry(r.id, d, tps[r.id])
        for r, d, k in zip(exp.runs, pages.digests, pages.kept, strict=True)
    ]
    w.new.experiments[exp.slug] = entries
    return tps, entries


def write_experiment(
    w: Writer,
    db: ResultsStore,
    exp: ExperimentView,
    made: Callable[[], ExperimentSummary],
    pages: RunPages,
) -> ExperimentSummary:
    """The experiment's pages and files, the run pages' (`pages`) waited for when their
    throughput is needed, and its summary (`made`: the throughput summary of `blocklab
    summary`, the page's answer, which may still be in the making) when it is: last, so
    that what needs no summary is made meanwhile. Returns the summary."""
    base = f"e/{exp.slug}"
    labels = {v.variant_id: v.label or v.variant_id for v in exp.variants}
    has_queries = write_queries(w, db, exp.name, exp.slug)
    write_rounds_csv(w, db, exp)
    tps, entries = _run_pages_done(w, exp, pages)
    write_grid(w, db, exp, entries, tps)  # needs no summary: made while it may be in the making
    write_runs_csv(w, db, exp)
    extras, plot_data = explain.experiment_extras(db, exp, made, tps)  # made() waited for last
    summary = made()
    data.take_checks(exp, summary)
    w.put(f"{base}/plots.js", explain.plots_script(plot_data))
    digests = dict(zip((r.id for r in exp.runs), pages.digests, strict=True))
    write_runs_lists(w, exp, labels, digests, has_queries=has_queries, extras=extras)
    return summary


def _write_runs(
    w: Writer,
    db: ResultsStore,
    results: Path,
    exp: ExperimentView,
    runs: list[RunView],
    bases: Mapping[str, dict[str, Any]],
) -> Tps:
    """The pages and files of `runs` (`bases`: each variant's base details, details.js);
    returns their tps series for the grid."""
    tps: Tps = {}
    for at in range(0, len(runs), PAGES_READ):
        block = runs[at : at + PAGES_READ]
        ids = [r.id for r in block]
        checkpoints, texts = db.checkpoints_of_runs(ids), db.run_texts(ids)
        for run, (_, series) in zip(block, db.series_of_runs(ids), strict=True):
            tps[run.id] = data.throughput_series(series)
            detail = data.run_detail(db, run.id, series, checkpoints[run.id], texts.get(run.id))
            write_run(w, results, exp, run, detail, bases.get(run.variant_id))
    return tps


def write_runs_csv(w: Writer, db: ResultsStore, exp: ExperimentView) -> None:
    """runs.csv (of the view's fleet host's runs); the parts of the rounds whose runs did
    not change copied from the file the site has (csv_parts.runs_csv)."""
    rel = f"e/{exp.slug}/runs.csv"
    old, old_text = _old_parts(w, rel)
    host = exp.fleet_host or None
    text, w.new.parts[rel] = csv_parts.runs_csv(db, exp.stored_name, host, old, old_text)
    w.put(rel, text)


def write_rounds_csv(w: Writer, db: ResultsStore, exp: ExperimentView) -> None:
    """rounds.csv, from the reductions the view's cells made (data.variant_round_rows);
    the parts of the variants whose runs did not change copied from the file the site has
    (reduction_cache.rounds_csv)."""
    rel = f"e/{exp.slug}/rounds.csv"
    old, old_text = _old_parts(w, rel)
    metrics = metric_order(db.metric_names(exp.stored_name))
    text, w.new.parts[rel] = rounds_csv(exp, metrics, old, old_text)
    w.put(rel, text)


def _old_parts(w: Writer, rel: str) -> tuple[Any, str | None]:
    """What the site's manifest recorded of a file made by parts, and the file's text
    (None when either is missing)."""
    old = w.old.parts.get(rel)
    if old:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return old, (w.out / rel).read_text()
    return old, None


def _keep_run(w: Writer, base: str, run: RunView, present: set[str]) -> bool:
    """Keep a run's page when it is in the site (`present`: the runs directory's files)."""
    rel = f"{base}/runs/{run.id}"
    if f"{run.id}.html" not in present or not w.keep(f"{rel}.html", present=True):
        return False
    w.files.add(f"{rel}-raw/")
    return True


def _entry(run_id: int, d: str, tps: list[tuple[float, float | None]]) -> manifest.RunEntry:
    values = [v for _, v in tps if v is not None]
    times = [t for t, _ in tps]
    return manifest.RunEntry(
        run_id,
        d,
        max(values) if values else None,
        min(times) if times else None,
        max(times) if times else None,
    )


def write_run(
    w: Writer,
    results: Path,
    exp: ExperimentView,
    run: RunView,
    detail: data.RunDetail,
    base: Mapping[str, Any] | None = None,
) -> None:
    """A run's page: what the page shows as text in its HTML, its series, panels,
    checkpoints and stored details packed (pagedata.pack) for site.js to draw."""
    rel_dir = f"e/{exp.slug}/runs"
    w.files.add(f"{rel_dir}/{run.id}-raw/")
    raw_files = copy_raw(results, run.raw_dir, w.out / rel_dir / f"{run.id}-raw", f"{run.id}-raw")
    variant = exp.variant(run.variant_id)
    w.page(
        f"{rel_dir}/{run.id}.html",
        "run.html",
        page="run",
        exp=exp,
        run=run,
        variant=variant,
        raw_files=raw_files,
        has_series=any(detail.series.values()),
        packed=pack(run_json(detail, run, variant, exp.throughput_name, base)),
    )

"""An experiment's grid page: grid.html holds the layout (a cell per (y, x) of the default
axes), each cell's tps lines are in grid/cell-<n>.js, a script the page loads (works from
file://), rewritten only when the cell's runs change: their ids, labels and digests (by
ids alone, a store made again in the same place kept the old store's lines).

A changed cell's shard is made from the lines its old shard holds, for the runs whose
digest the site's manifest records unchanged (a stored run's series never change), and
the series of the others: at 10,000 runs (a cell of 500 runs) reading them all again and
making their lines took 0.1 s of a watched update's 1.05."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from blocklab.report import data, jsontext, manifest
from blocklab.report.data import ExperimentView
from blocklab.report.pagedata import grid_json, whole_seconds
from blocklab.report.writer import Writer
from blocklab.store import ResultsStore

Tps = dict[int, list[tuple[float, float | None]]]
_HEAD = "(window.blocklabGrid = window.blocklabGrid || {})[%d] = "
_TAIL = ";\n"


def write_grid(
    w: Writer, db: ResultsStore, exp: ExperimentView, entries: list[manifest.RunEntry], tps: Tps
) -> None:
    """grid.html and the shards of the cells whose runs changed; `entries` every run's
    manifest entry (its digest), `tps` the series of the runs whose pages were written."""
    base = f"e/{exp.slug}"
    page = grid_json(exp, entries)
    of_run = {e.id: e.digest for e in entries}  # what each run's page is made of
    todo = []
    for n, cell in enumerate(page["cells"]):
        runs = cell.pop("run_ids")
        cell["runs"] = len(runs)
        if not runs:
            continue
        rel = f"grid/cell-{n}.js"
        cell["src"] = rel
        d = manifest.digest([cell, runs, page["colors"], [of_run[r] for r, _ in runs]])
        w.new.cells[f"{base}/{rel}"] = d
        if w.old.cells.get(f"{base}/{rel}") == d and (w.out / base / rel).is_file():
            w.files.add(f"{base}/{rel}")
            continue
        todo.append((n, runs))
    old = w.old.runs_of(exp.slug)
    same = {e.id for e in entries if (o := old.get(e.id)) is not None and o.digest == e.digest}
    kept = {n: _old_lines(w, f"{base}/grid/cell-{n}.js", n, same) for n, _ in todo}
    # the throughput of the changed cells' runs neither written now nor kept, read in bulk
    unread = [
        r for n, runs in todo for r, label in runs if not tps.get(r) and not _has(kept[n], r, label)
    ]
    names = data.THROUGHPUT_SERIES
    read = {r: data.throughput_series(s) for r, s in db.series_of_runs(unread, names=names)}
    for n, runs in todo:
        lines = [
            kept[n][r] if _has(kept[n], r, label) else grid_line(r, label, tps.get(r) or read[r])
            for r, label in runs
        ]
        w.put(f"{base}/grid/cell-{n}.js", grid_shard(n, lines))
    w.page(f"{base}/grid.html", "grid.html", page="grid", exp=exp, data=page)


def _has(lines: dict[int, dict[str, Any]], run_id: int, label: str) -> bool:
    line = lines.get(run_id)
    return line is not None and line.get("label") == label


def _old_lines(w: Writer, rel: str, n: int, same: set[int]) -> dict[int, dict[str, Any]]:
    """run id -> its line in the site's shard `rel` of cell `n`, for the runs in `same`
    (unchanged); none when the shard is missing or not one this module wrote. A run with
    no points has no line in a shard: its series is read again."""
    with contextlib.suppress(OSError, UnicodeDecodeError, orjson.JSONDecodeError):
        text = (w.out / rel).read_text()
        head = _HEAD % n
        if text.startswith(head) and text.endswith(_TAIL):
            lines = orjson.loads(text[len(head) : -len(_TAIL)])
            return {ln["id"]: ln for ln in lines if isinstance(ln, dict) and ln.get("id") in same}
    return {}


def grid_line(run_id: int, label: str, pts: list[tuple[float, float | None]]) -> dict[str, Any]:
    return {
        "id": run_id,
        "label": label,
        "t": [whole_seconds(p[0]) for p in pts],
        "v": [p[1] for p in pts],
    }


def grid_shard(n: int, lines: list[dict[str, Any]]) -> str:
    body = jsontext.text([ln for ln in lines if ln["t"]])
    return f"{_HEAD % n}{body}{_TAIL}"

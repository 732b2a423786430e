"""CSV export: one row per run with every dimension and metric, and the per-second series."""

from __future__ import annotations

import csv
import io
import json
import operator
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from blocklab.errors import UserError
from blocklab.store import ResultsStore

RUN_FIELDS = (
    "experiment",
    "run_id",
    "variant_id",
    "label",
    "round",
    "position",
    "status",
    "reason",
    "started_at",
    "ended_at",
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    "transactions",
    "failed_transactions",
    "exit_code",
    "raw_dir",
)
SERIES_FIELDS = ("experiment", "run_id", "variant_id", "label", "round", "name", "t_s", "value")


def variant_columns(variant_json: str) -> dict[str, Any]:
    """Every dimension of a variant as flat columns (build.block_size_kb, storage.kind, ...)."""
    data = json.loads(variant_json)
    out: dict[str, Any] = {}
    for section in ("build", "storage", "dataset", "workload"):
        for key, value in (data.get(section) or {}).items():
            if isinstance(value, dict):
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, list):
                value = " ".join(map(str, value))
            out[f"{section}.{key}"] = value
    for name, value in data.get("settings") or []:
        out[f"setting.{name}"] = value
    for key in ("settings_policy", "wal_segsize_mb", "data_checksums"):
        out[key] = data.get(key)
    return out


def _experiments(db: ResultsStore, experiment: str | None) -> list[str]:
    if experiment is not None:
        return [db.experiment(experiment)["name"]]
    names = [r["name"] for r in db.experiments()]
    if not names:
        raise UserError(f"--results: {db.directory} holds no experiment")
    return names


def run_rows(
    db: ResultsStore,
    experiment: str | None = None,
    *,
    host: str | None = None,
    rounds: Collection[int] | None = None,
) -> Iterator[dict[str, Any]]:
    """The runs' CSV rows; with `host`, of that fleet host's runs only; with `rounds`, of
    those rounds' runs only."""
    metric_columns: dict[str, str] = {}  # a metric's name -> its column, made once
    for name in _experiments(db, experiment):
        variants = {v["variant_id"]: v for v in db.variants(name)}
        columns = {vid: variant_columns(v["variant_json"]) for vid, v in variants.items()}
        fields: list[str] | None = None  # RUN_FIELDS the store's rows have (one query's)
        for r in db.runs(name):
            if (host is not None and r["host"] != host) or (
                rounds is not None and r["round"] not in rounds
            ):
                continue
            if fields is None:
                fields = [f for f in RUN_FIELDS if f in r.keys()]
            v = variants[r["variant_id"]]
            row: dict[str, Any] = {f: r[f] for f in fields}
            row.update(experiment=name, run_id=r["id"], label=v["label"])
            row.update(columns[r["variant_id"]])
            for k, val in sorted(db.metrics(r["id"]).items()):
                row[metric_columns.get(k) or metric_columns.setdefault(k, f"metric.{k}")] = val
            yield row


def run_columns(db: ResultsStore, experiment: str, *, host: str | None = None) -> list[str]:
    """The columns of the experiment's runs.csv (run_rows' rows, `host`'s runs), in the
    order csv_text writes them, found without making the rows."""
    variants = {v["variant_id"]: v["variant_json"] for v in db.variants(experiment)}
    keys = {"experiment", "run_id", "label"}
    seen: set[str] = set()
    metric_names: set[str] = set()
    for r in db.runs(experiment):
        if host is not None and r["host"] != host:
            continue
        if not seen:
            keys.update(f for f in RUN_FIELDS if f in r.keys())
        if r["variant_id"] not in seen:
            seen.add(r["variant_id"])
            keys.update(variant_columns(variants[r["variant_id"]]))
        metric_names.update(db.metrics(r["id"]))
    keys.update(f"metric.{k}" for k in metric_names)
    return csv_columns(keys, RUN_FIELDS) if seen else list(RUN_FIELDS)


def series_rows(db: ResultsStore, experiment: str | None = None) -> Iterator[dict[str, Any]]:
    for name in _experiments(db, experiment):
        labels = {v["variant_id"]: v["label"] for v in db.variants(name)}
        for r in db.runs(name):
            for metric, points in db.series(r["id"]).items():
                for t_s, value in points:
                    yield {
                        "experiment": name,
                        "run_id": r["id"],
                        "variant_id": r["variant_id"],
                        "label": labels[r["variant_id"]],
                        "round": r["round"],
                        "name": metric,
                        "t_s": t_s,
                        "value": value,
                    }


def write_csv(path: Path, rows: list[dict[str, Any]], first: tuple[str, ...]) -> int:
    with open(path, "w", newline="") as f:
        _write_rows(f, rows, first)
    return len(rows)


def csv_text(
    rows: list[dict[str, Any]],
    first: tuple[str, ...],
    columns: Sequence[str] | None = None,
    *,
    header: bool = True,
) -> str:
    """What write_csv writes, as its file reads back as text (universal newlines: the
    rows end in "\n"), made in memory; `columns`: those of a whole file of which `rows`
    are a part (csv_columns of its rows' keys), `header`: whether the text has it."""
    buf = io.StringIO(newline="")
    _write_rows(buf, rows, first, columns, header=header)
    return buf.getvalue().replace("\r\n", "\n").replace("\r", "\n")


def csv_columns(keys: Collection[str], first: tuple[str, ...]) -> list[str]:
    """A CSV file's columns: `first`, then every other of the rows' keys, sorted."""
    return list(first) + sorted(set(keys) - set(first))


def _write_rows(
    f: Any,
    rows: list[dict[str, Any]],
    first: tuple[str, ...],
    columns: Sequence[str] | None = None,
    *,
    header: bool = True,
) -> None:
    """`first` then every other key of the rows, sorted (or `columns`, a whole file's):
    each row's keys are columns, so none needs checking for keys the header lacks
    (csv.DictWriter's check); a row with every column is written through itemgetter, the
    others with "" where they lack one (csv.DictWriter's restval)."""
    if columns is None:
        columns = csv_columns({k for row in rows for k in row}, first)
    writer = csv.writer(f)
    if header:
        writer.writerow(columns)
    whole = operator.itemgetter(*columns, *columns[:1])  # a tuple even for one column
    n = len(columns)
    writer.writerows(
        whole(row)[:n] if len(row) == n else [row.get(c, "") for c in columns] for row in rows
    )


def export_csv(
    db: ResultsStore, out_dir: Path, experiment: str | None = None
) -> list[tuple[Path, int]]:
    runs = list(run_rows(db, experiment))
    series = list(series_rows(db, experiment))
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        (out_dir / "runs.csv", write_csv(out_dir / "runs.csv", runs, RUN_FIELDS)),
        (out_dir / "series.csv", write_csv(out_dir / "series.csv", series, SERIES_FIELDS)),
    ]

"""An experiment's runs read in bulk, once, for the summary and the report (read_ahead): a
part of ResultsDB (blocklab.store.sqlite), which PostgreSQL's store inherits too.

The runs read ahead carry every column but their settings and provenance (35 kB of JSON a
real run, read for every run at each update of a 10,000-run report) and, instead, the
facts of the provenance a summary reads (`facts_json`: blocklab.store.run_facts). A run
page's settings and provenance are read for the pages written (run_texts)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from blocklab.store import run_facts
from blocklab.store.base import DictRow, RunsKept, run_key

# The runs' order (their rounds, their places in them; a fleet's hosts share both, and the
# id, the order they were stored in, breaks that tie the same way in every read)
RUNS_ORDER = "ORDER BY round, position, id"
# runs' columns but settings_json and provenance_json, and the run's kept facts
LEAN_COLUMNS = (
    "id, experiment, variant_id, round, position, status, reason, started_at, ended_at,"
    " tps, latency_avg_ms, latency_stddev_ms, transactions, failed_transactions, exit_code,"
    " command, raw_dir, host, copy_index,"
    " (SELECT facts_json FROM run_facts WHERE run_id = runs.id) AS facts_json"
)
TEXTS_CHUNK = 500  # runs whose texts one query reads (run_texts)
Metrics = dict[int, dict[str, float | None]]


class ReadAhead:
    """read_ahead and run_texts of the store (base.ResultsStore)."""

    conn: sqlite3.Connection  # the store's (PostgreSQL's store puts its wrapper there)
    _read_ahead: dict[str, list[Any]]  # experiment -> its runs (read_ahead)
    _metrics_ahead: Metrics

    def _tuples(self, sql: str, params: Sequence[Any]) -> list[Any]:
        raise NotImplementedError  # the store's (ResultsDB._tuples)

    def read_ahead(self, experiment: str, kept: RunsKept | None = None) -> None:
        """Read the experiment's runs and their metrics in two queries, and answer runs()
        and metrics() of them from these from now on: the report reads them many times
        over (the summary of each metric, the tables, the CSV files, one run at a time),
        and a stored run's row and metrics never change. Runs recorded later are not
        seen by runs(experiment): the report reads one snapshot. The runs read ahead hold
        no settings_json or provenance_json, but facts_json (the module's docstring).

        With `kept` (what a resident process read before, `report --watch`), the runs'
        key columns are read (id, started_at, ended_at) and only the runs `kept` does not
        hold as they are; `kept` is left holding the experiment's runs now."""
        if kept is None:
            runs, metrics = self._runs_where("experiment=?", [experiment])
        else:
            runs, metrics = self._runs_kept(experiment, kept)
        self._read_ahead[experiment] = runs
        self._metrics_ahead.update(metrics)

    def run_texts(self, run_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """run id -> its (settings_json, provenance_json), read in bulk."""
        out: dict[int, tuple[str, str]] = {}
        for i in range(0, len(run_ids), TEXTS_CHUNK):
            ids = list(run_ids[i : i + TEXTS_CHUNK])
            for run_id, settings, provenance in self._tuples(
                "SELECT id, settings_json, provenance_json FROM runs"
                f" WHERE id IN ({','.join('?' * len(ids))})",
                ids,
            ):
                out[int(run_id)] = (settings or "", provenance or "")
        return out

    def _runs_where(self, where: str, args: list[Any]) -> tuple[list[DictRow], Metrics]:
        """The runs `where` selects (as DictRows, in the runs' order) and their metrics."""
        rows = list(
            self.conn.execute(f"SELECT {LEAN_COLUMNS} FROM runs WHERE {where} {RUNS_ORDER}", args)
        )
        names = rows[0].keys() if rows else []
        runs = [r if isinstance(r, DictRow) else DictRow(zip(names, r, strict=True)) for r in rows]
        self._facts_missing(runs)
        metrics: Metrics = {int(r["id"]): {} for r in runs}
        for run_id, name, value in self._tuples(
            # IN, not a join: the rows come in the key's order, not sorted after (half the time)
            "SELECT run_id, name, value FROM metrics"
            f" WHERE run_id IN (SELECT id FROM runs WHERE {where}) ORDER BY run_id, name",
            args,
        ):
            metrics[run_id][name] = value
        return runs, metrics

    def _facts_missing(self, runs: list[DictRow]) -> None:
        """The facts of runs stored without them (a store written while this one was
        upgraded), from their provenance."""
        missing = [int(r["id"]) for r in runs if r["facts_json"] is None]
        if missing:
            texts = self.run_texts(missing)
            made = dict(run_facts.facts_rows([(i, texts[i][1]) for i in missing if i in texts]))
            for r in runs:
                if r["facts_json"] is None:
                    r["facts_json"] = made.get(int(r["id"]), "{}")

    def _runs_kept(self, experiment: str, kept: RunsKept) -> tuple[list[DictRow], Metrics]:
        """read_ahead's runs and metrics, those `kept` holds as they are not read again."""
        keys = self._tuples(
            f"SELECT id, started_at, ended_at FROM runs WHERE experiment=? {RUNS_ORDER}",
            [experiment],
        )
        had = kept.get(experiment, {})
        new = [k[0] for k in keys if (h := had.get(k[0])) is None or h[0] != tuple(k)]
        if len(new) > 500:  # a first read: the whole experiment, not thousands of ids
            runs, metrics = self._runs_where("experiment=?", [experiment])
        elif new:
            runs, metrics = self._runs_where(f"id IN ({','.join('?' * len(new))})", new)
        else:
            runs, metrics = [], {}
        for r in runs:
            had[r["id"]] = (run_key(r), r, metrics[int(r["id"])])
        now = {k[0]: h for k in keys if (h := had.get(k[0])) is not None and h[0] == tuple(k)}
        kept[experiment] = now
        return [v[1] for v in now.values()], {i: v[2] for i, v in now.items()}

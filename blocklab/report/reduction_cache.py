"""Each variant's per-round values kept from one build of a site to the next, in its
manifest, and rounds.csv made again only for the variants whose runs changed.

A variant's per-round values (data.reduce_variant: the one reduction of
blocklab.analysis.rounds, per metric) are a pure function of its runs' rounds, copies,
statuses, reasons and values, the design, and whether it is a reference. Kept under a
digest of those, a variant whose runs did not change is read back instead of reduced
again: at 10,000 runs that reduction took a fifth of an update. The values read back (or
made) carry their digest (KeyedValues), so a cell's digest (report.cell_cache) and a
variant's part of rounds.csv are known without hashing the values again.

rounds.csv is the header and one part a variant, in the variants' order (csv_parts: an
update copies the unchanged parts from the file it finds instead of writing them again).
What a build used is what its manifest keeps, so the entries do not pile up.
An entry that does not read back is made again.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

from blocklab.analysis.round_table import ROUND_FIELDS
from blocklab.analysis.rounds import RoundValues
from blocklab.report import csv_parts, data, manifest
from blocklab.store.export import csv_text


class KeyedValues(dict[int, float]):
    """A variant's values by round, with the digest of what they were reduced from."""

    __slots__ = ("digest",)

    def __init__(self, items: Any, digest: str):
        super().__init__(items)
        self.digest = digest


def values_digest(values: Mapping[int, Any] | None) -> str | None:
    """The digest `values` carry (KeyedValues), or None."""
    return values.digest if isinstance(values, KeyedValues) else None


class ReductionCache:
    """data.reduce_variant, answered from `kept` (a manifest's entries) where it can;
    `used` holds every entry this build used, for the next manifest."""

    def __init__(self, kept: Mapping[str, Any], known: Mapping[tuple[Any, ...], str] | None = None):
        self.kept = kept
        self.used: dict[str, dict[str, Any]] = {}
        self.made = 0  # variants reduced (not read back)
        self.of_run: dict[int, str] = {}  # run id -> run_digest (a run id is the store's key)
        # run_digest by the run's key columns (id, started_at, ended_at): `known` those a
        # resident process made before (report.resident), `of_key` this build's
        self.known = known or {}
        self.of_key: dict[tuple[Any, ...], str] = {}

    def run_digest(self, run: data.RunView) -> str:
        """run_digest of `run`, made once a build (or read from `known`: a run's view is
        made of its stored row and metrics, which never change): the site's digest of a
        run's page covers it too (site.run_digest)."""
        got = self.of_run.get(run.id)
        if got is None:
            key = (run.id, run.started_at, run.ended_at)
            got = self.known.get(key) or run_digest(run)
            self.of_run[run.id] = self.of_key[key] = got
        return got

    def reduce(
        self,
        runs: list[data.RunView],
        variant_id: str,
        metrics: list[str],
        design: str,
        is_reference: bool,
    ) -> dict[str, RoundValues]:
        key = variant_key([self.run_digest(r) for r in runs], variant_id, design, is_reference)
        entry: Any = self.used.get(key) or self.kept.get(key)
        got: dict[str, RoundValues] = {}
        kept: dict[str, Any] = {}
        for m in metrics:
            try:
                got[m] = restore(entry[m], f"{key}/{m}")
                kept[m] = entry[m]
            except (KeyError, TypeError, ValueError):
                pass
        todo = [m for m in metrics if m not in got]
        if todo:
            self.made += 1
            for m, rv in data.reduce_variant(runs, variant_id, todo, design, is_reference).items():
                got[m] = RoundValues(KeyedValues(rv.values, f"{key}/{m}"), rv.dropped)
                kept[m] = entry_of(rv)
        self.used.setdefault(key, {}).update(kept)
        return got


def run_digest(run: data.RunView) -> str:
    """A digest of everything a run's view holds: its fields pickled (floats exact, the
    metrics in the store's order). Equal pickles are equal views; two pickles of equal
    views could differ only where one view shares a string object between two fields and
    the other does not, which would make a page again, not keep a stale one. A quarter
    of repr's cost: at 10,000 runs, repr took 0.27 s of an update."""
    return hashlib.sha256(pickle.dumps(vars(run), protocol=5)).hexdigest()[:32]


def variant_key(run_digests: list[str], variant_id: str, design: str, is_reference: bool) -> str:
    """A digest of a variant's reduction's inputs: its runs (`run_digests`, in their
    order), the design, whether it is a reference."""
    return manifest.digest([design, is_reference, variant_id, run_digests])


def entry_of(rv: RoundValues) -> list[Any]:
    """A metric's reduction as the manifest keeps it: [rounds, values, dropped rounds,
    their reasons]."""
    return [list(rv.values), list(rv.values.values()), list(rv.dropped), list(rv.dropped.values())]


def restore(entry: Any, digest: str) -> RoundValues:
    """The reduction `entry` (entry_of) keeps; a ValueError or TypeError for an entry that
    is not one."""
    rounds, values, dropped, reasons = entry
    if not (
        all(type(r) is int for r in rounds)
        and all(type(v) is float for v in values)
        and all(type(r) is int for r in dropped)
        and all(type(w) is str for w in reasons)
    ):
        raise TypeError("a kept reduction holds other than rounds, values and reasons")
    return RoundValues(
        KeyedValues(zip(rounds, values, strict=True), digest),
        dict(zip(dropped, reasons, strict=True)),
    )


# ---------------------------------------------------------------- rounds.csv by parts


def rounds_csv(
    exp: data.ExperimentView,
    metrics: list[str],
    old: Mapping[str, Any] | None,
    old_text: str | None,
) -> tuple[str, dict[str, Any]]:
    """rounds.csv's text (data.variant_round_rows's rows, `metrics` in round_table.metric_order)
    and its record for the manifest: each variant's part copied from `old_text` (the file
    an earlier build wrote, `old` its record) when its digest is recorded there and the
    text is what that build wrote, else made."""
    header = csv_text([], ROUND_FIELDS)
    keyed = list(_part_keys(exp, metrics))

    def make(todo: list[int]) -> list[str]:
        rows = (list(data.variant_round_rows(exp, keyed[i][0], metrics)) for i in todo)
        return [csv_text(r, ROUND_FIELDS, header=False) for r in rows]

    return csv_parts.assemble(header, [key for _, key in keyed], make, old, old_text)


def _part_keys(
    exp: data.ExperimentView, metrics: list[str]
) -> Iterator[tuple[data.VariantView, str | None]]:
    """Each variant and the digest of its part of rounds.csv (None when one of its
    metrics' values carries no digest)."""
    for v in exp.variants:
        digests = [
            values_digest(getattr(exp.reduced.get((v.variant_id, m)), "values", None))
            for m in metrics
        ]
        ok = all(digests)
        yield v, manifest.digest([exp.stored_name, v.variant_id, v.label, digests]) if ok else None

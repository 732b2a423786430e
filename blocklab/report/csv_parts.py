"""The site's CSV files made by parts: an update copies the parts whose inputs did not
change from the file the site has, instead of making their rows again.

A file is its header and its parts, in order; the manifest records each part's place in
the file under the digest of what it is made from, and the digest of the whole file. A
part is copied only when the file's digest is the one recorded (the file is the text
that build wrote); any other part, or every part of a file that does not match, is made.
rounds.csv has a part a variant (reduction_cache.rounds_csv); runs.csv a part a round
(runs_csv): one more run changes the last round's part alone, and its rows took a tenth
of an update at 10,000 runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from itertools import groupby
from typing import Any

from blocklab.report import manifest
from blocklab.store import ResultsStore, export
from blocklab.store.base import run_key


def assemble(
    header: str,
    keys: Sequence[str | None],
    make: Callable[[list[int]], list[str]],
    old: Mapping[str, Any] | None,
    old_text: str | None,
) -> tuple[str, dict[str, Any]]:
    """The file's text and its record for the manifest: the parts of digests `keys` (None:
    always made), each copied from `old_text` (the file an earlier build wrote, `old` its
    record) when its digest is recorded there and the text is what that build wrote, the
    others made at once (`make`: the texts of the parts of those indices)."""
    spans = _spans(old, old_text)  # none unless old_text is the file recorded
    copied: list[str | None] = [
        old_text[span[0] : span[1]]
        if old_text is not None and key and (span := spans.get(key))
        else None
        for key in keys
    ]
    todo = [i for i, text in enumerate(copied) if text is None]
    made = dict(zip(todo, make(todo), strict=True))
    texts = [made[i] if text is None else text for i, text in enumerate(copied)]
    places, at = {}, len(header)
    for key, text in zip(keys, texts, strict=True):
        if key:
            places[key] = [at, at + len(text)]
        at += len(text)
    whole = header + "".join(texts)
    return whole, {"digest": _text_digest(whole), "parts": places}


def runs_csv(
    db: ResultsStore,
    name: str,
    host: str | None,
    old: Mapping[str, Any] | None,
    old_text: str | None,
) -> tuple[str, dict[str, Any]]:
    """runs.csv of an experiment (`host`'s runs; export.run_rows' rows, in their order),
    a part a round: a round's part is kept under a digest of the file's columns, the
    variants' rows and the round's runs named by id, start and end (a stored run is never
    rewritten: kept_experiments; by its id alone, a store made again in the same place
    kept the old store's rows)."""
    columns = export.run_columns(db, name, host=host)
    variants = [[v["variant_id"], v["label"], v["variant_json"]] for v in db.variants(name)]
    of_file = manifest.digest([name, host or "", columns, variants])
    runs = [r for r in db.runs(name) if host is None or r["host"] == host]
    rounds = [(n, list(g)) for n, g in groupby(runs, key=lambda r: r["round"])]
    keys = [manifest.digest([of_file, [run_key(r) for r in rs]]) for _, rs in rounds]

    def make(todo: list[int]) -> list[str]:
        wanted = {rounds[i][0] for i in todo}
        by_round: dict[int, list[dict[str, Any]]] = {n: [] for n in wanted}
        for row in export.run_rows(db, name, host=host, rounds=wanted):
            by_round[row["round"]].append(row)
        return [
            export.csv_text(by_round[rounds[i][0]], export.RUN_FIELDS, columns, header=False)
            for i in todo
        ]

    header = export.csv_text([], export.RUN_FIELDS, columns)
    return assemble(header, keys, make, old, old_text)


def _spans(old: Mapping[str, Any] | None, old_text: str | None) -> dict[str, list[int]]:
    """The parts an earlier build recorded, when `old_text` is the text it wrote."""
    if not old or old_text is None or old.get("digest") != _text_digest(old_text):
        return {}
    parts = old.get("parts")
    if not isinstance(parts, dict):
        return {}
    return {
        k: span
        for k, span in parts.items()
        if isinstance(span, list)
        and len(span) == 2
        and all(type(i) is int for i in span)
        and 0 <= span[0] <= span[1] <= len(old_text)
    }


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]

"""An experiment whose stored rows did not change keeps its pages and files whole.

An update of a site with many experiments, after one more run of one of them, made every
experiment's summary, grid, runs.csv, plots and lists again to find them unchanged: with
10 experiments of 1,000 runs that was most of the update. The manifest now records per
experiment (by its slug) a digest of what its files are made from (`experiment_digest`:
the experiment's row, its variants' and rounds' rows, its runs by id: a run is written
once, with everything it measured, and never changed), the files
it wrote besides its run pages, and what the site's other pages take from its summary
(the index's answer, the drift notes compare.html shows). An update keeps an experiment
whose digest is the recorded one and whose files are all in the site; its summary is not
made. The index and compare pages are made from the views as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from blocklab.report.data import ExperimentView
from blocklab.report.headline import Answer, Headline
from blocklab.report.writer import Writer
from blocklab.store import ResultsStore


def experiment_digest(db: ResultsStore, name: str, host: str | None) -> str:
    """A digest of the stored rows an experiment's files are made from: its row, its
    variants' and rounds' rows, and its runs by id (every host's: a fleet host's view is
    made again when any host's runs change). A run's row, metrics, series, checkpoints
    and per-query rows are written in one transaction and never changed or removed
    alone (the store's record_run; tests/report/test_kept_experiments.py checks that its
    SQL holds no other write to them), so its id stands for them: hashing the rows of
    10,000 runs took 0.25 s, their ids 5 ms."""
    h = hashlib.sha256(repr((name, host)).encode())
    h.update(_row_text(db.experiment(name)))
    for v in db.variants(name):
        h.update(_row_text(v))
    for r in db.rounds(name):
        h.update(_row_text(r))
    h.update(repr([r["id"] for r in db.runs(name)]).encode())
    return h.hexdigest()[:32]


def _row_text(row: Any) -> bytes:
    """A stored row's columns and values (sqlite3.Row and the PostgreSQL store's rows)."""
    return repr([(k, row[k]) for k in row.keys()]).encode()


def answer_entry(answer: Answer) -> list[Any]:
    return [[[h.text, h.verdict, h.css] for h in answer.lines], answer.more, answer.empty]


def answer_of(entry: Any) -> Answer:
    """The Answer `entry` (answer_entry) keeps; a TypeError or ValueError otherwise."""
    lines, more, empty = entry
    if not all(isinstance(x, str) for x in (more, empty)):
        raise TypeError("a kept answer's words are not text")
    headlines = []
    for line in lines:
        text, verdict, css = line
        if not all(isinstance(x, str) for x in (text, verdict, css)):
            raise TypeError("a kept headline is not text")
        headlines.append(Headline(text, verdict, css))
    return Answer(headlines, more, empty)


class KeptExperiments:
    """The experiments a site's manifest recorded (`old`: slug -> record) and those this
    build records, for the next manifest."""

    def __init__(self, old: Mapping[str, Any]):
        self.old = old
        self.digests = {rec.get("digest") for rec in old.values() if isinstance(rec, dict)}

    def may_keep(self, digest: str) -> bool:
        """Whether an experiment of this digest was recorded (its summary may not be
        needed: whether it is kept is known once its slug is, `keep`)."""
        return digest in self.digests

    def keep(self, w: Writer, exp: ExperimentView, digest: str) -> Answer | None:
        """Keep the experiment's files as they are, when its record has this digest, can
        be read back and every file is in the site: its answer then (its drift notes set
        on `exp`); None when it must be made again."""
        slug = exp.slug
        rec = self.old.get(slug)
        runs = w.old.experiments.get(slug)
        if not isinstance(rec, dict) or rec.get("digest") != digest or runs is None:
            return None
        try:
            answer = answer_of(rec["answer"])
            drift = [str(x) for x in rec["drift"]]
            others = [str(x) for x in rec["files"]]
        except (KeyError, TypeError, ValueError):
            return None
        base = f"e/{slug}"
        present = w.files_in(f"{base}/runs")
        pages = [f"{base}/runs/{r.id}.html" for r in runs]
        if any(f"{r.id}.html" not in present for r in runs) or not all(
            (w.out / f).exists() for f in others
        ):
            return None
        if any(f.endswith(".html") and f not in w.old.pages for f in [*pages, *others]):
            return None
        for f in [*pages, *others]:
            if f.endswith(".html"):
                w.keep(f, present=True)  # in old.pages and present: both checked above
            else:
                w.files.add(f)
        w.files.update(f"{base}/runs/{r.id}-raw/" for r in runs)
        w.new.experiments[slug] = runs
        w.new.cells.update({k: v for k, v in w.old.cells.items() if k.startswith(f"{base}/")})
        w.new.parts.update({k: v for k, v in w.old.parts.items() if k.startswith(f"{base}/")})
        w.new.kept_experiments[slug] = rec
        exp.stationarity = drift
        return answer

    @staticmethod
    def record(w: Writer, exp: ExperimentView, digest: str, answer: Answer) -> None:
        """What the next update needs to keep the experiment just written."""
        base = f"e/{exp.slug}/"
        run_files = {f"{base}runs/{r.id}.html" for r in exp.runs}
        run_files |= {f"{base}runs/{r.id}-raw/" for r in exp.runs}
        others = sorted(f for f in w.files if f.startswith(base) and f not in run_files)
        w.new.kept_experiments[exp.slug] = {
            "digest": digest,
            "files": others,
            "answer": answer_entry(answer),
            "drift": list(exp.stationarity),
        }

"""What a generated site was built from, so `blocklab report` rewrites only what changed.

The manifest (.blocklab-manifest.json in the site) holds the site version (blocklab's
version and a digest of the templates and static files: either changing forces a full
rebuild), and per experiment the digest of each run's inputs in page order, with the few
numbers of a run the experiment's pages need without reading its series (tps range), the
statistics of the experiment pages' cells (blocklab.report.cell_cache), and each variant's
per-round values and its part of rounds.csv (blocklab.report.reduction_cache), and per
experiment what its files were made from (blocklab.report.kept_experiments). Written and
read as the site's JSON (report.jsontext: orjson, no NaN; the cells mark theirs).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab import __version__
from blocklab.report import jsontext

MANIFEST = ".blocklab-manifest.json"


def digest(value: Any) -> str:
    """A stable digest of a JSON-able value (keys sorted; non-JSON values as str)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def site_version() -> str:
    """blocklab's version and a digest of every template and static file of the report."""
    h = hashlib.sha256(__version__.encode())
    root = resources.files("blocklab.report")
    for folder in ("templates", "static"):
        for item in sorted(root.joinpath(folder).iterdir(), key=lambda p: p.name):
            if item.is_file():
                h.update(item.name.encode())
                h.update(item.read_bytes())
    return f"{__version__}+{h.hexdigest()[:16]}"


@dataclass
class RunEntry:
    """One run as the experiment pages see it: its input digest and tps range."""

    id: int
    digest: str
    tps_max: float | None = None
    t_min: float | None = None
    t_max: float | None = None

    def as_list(self) -> list[Any]:
        return [self.id, self.digest, self.tps_max, self.t_min, self.t_max]


@dataclass
class Manifest:
    version: str
    experiments: dict[str, list[RunEntry]] = field(default_factory=dict)  # slug -> runs
    # a file made from what its digest covers (grid shards, runs list pages) -> the digest
    cells: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)  # cell digest -> its statistics
    # a variant's runs' digest -> its per-round values by metric (report.reduction_cache)
    reductions: dict[str, Any] = field(default_factory=dict)
    # a file made of parts (rounds.csv) -> its digest and each part's place in it
    parts: dict[str, Any] = field(default_factory=dict)
    # an experiment's slug -> what its files were made from, the files, its answer
    # (blocklab.report.kept_experiments)
    kept_experiments: dict[str, Any] = field(default_factory=dict)
    pages: dict[str, int] = field(default_factory=dict)  # every HTML page -> bytes

    def runs_of(self, slug: str) -> dict[int, RunEntry]:
        return {r.id: r for r in self.experiments.get(slug, [])}

    def save(self, site: Path) -> None:
        body = {
            "version": self.version,
            "experiments": {
                k: [r.as_list() for r in v] for k, v in sorted(self.experiments.items())
            },
            "cells": dict(sorted(self.cells.items())),
            "stats": dict(sorted(self.stats.items())),
            "reductions": dict(sorted(self.reductions.items())),
            "parts": dict(sorted(self.parts.items())),
            "kept_experiments": dict(sorted(self.kept_experiments.items())),
            "pages": dict(sorted(self.pages.items())),
        }
        part = site / f"{MANIFEST}.part"  # then renamed: a reader sees it whole or not
        part.write_bytes(jsontext.dumps(body) + b"\n")
        os.replace(part, site / MANIFEST)


def load(site: Path) -> Manifest | None:
    """The manifest of a site, or None when there is none or it is unreadable."""
    try:
        body = jsontext.loads((site / MANIFEST).read_bytes())
        return Manifest(
            version=body["version"],
            experiments={
                k: [RunEntry(*r) for r in v] for k, v in body.get("experiments", {}).items()
            },
            cells=dict(body.get("cells", {})),
            stats=dict(body.get("stats", {})),
            reductions=dict(body.get("reductions", {})),
            parts=dict(body.get("parts", {})),
            kept_experiments=dict(body.get("kept_experiments", {})),
            pages={k: int(v) for k, v in body.get("pages", {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None

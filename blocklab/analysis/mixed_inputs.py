"""Whether each variant's runs were measured on one build and one dataset (pure).

A variant is its definition (model.Variant.variant_id), not what was built from it. The
build's key (blocklab.postgres.build.key_material) also holds what the definition only
names: the source's identity (a tree's contents, Debian's package version), the patches'
contents, the compiler and its environment. An experiment resumed after a patch was
edited, a newer source package came or CFLAGS changed builds another server under the
same variant; a dataset's key changes with the settings its load runs with
(model.LOAD_SETTINGS). The experiment loop stores such runs beside the old ones, so one
variant's rounds would compare two servers, or two datasets, without a word. This check
counts each variant's successful runs by the build and the dataset their provenance
names (`build_key`, `dataset.key`), and the summary says which variants pool more than
one, in its checks and beside their verdicts. Runs that name neither (stored before the
keys were recorded) are not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ADVICE = "rerun it as a new experiment"


@dataclass(frozen=True)
class Mixed:
    """A variant whose runs came from more than one build (or dataset)."""

    variant_id: str
    label: str
    what: str  # "builds" or "datasets"
    runs: dict[str, int]  # its key -> the successful runs measured on it

    def line(self) -> str:
        """'! bs=4k: its 12 runs came from 2 builds (pg18...-aaa: 8, pg18...-bbb: 4); its
        comparisons pool them: rerun it as a new experiment'."""
        n = sum(self.runs.values())
        counts = ", ".join(f"{key}: {k}" for key, k in _by_count(self.runs))
        return (
            f"! {self.label}: its {n} runs came from {len(self.runs)} {self.what} ({counts}); "
            f"its comparisons pool them: {ADVICE}"
        )


def find(labels: Mapping[str, str], runs: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Mixed]:
    """The variants (`labels`: variant id -> label, in the summary's order) whose
    successful runs (`runs`: (variant id, provenance)) name more than one build, else
    more than one dataset. A variant on two builds is on two datasets too (a dataset's
    key holds its build's): only its builds are named."""
    counted = keys_by_variant(runs)
    out = []
    for variant_id, label in labels.items():
        for what, by_variant in counted.items():
            found = by_variant.get(variant_id, Counter())
            if len(found) > 1:
                out.append(Mixed(variant_id, label, what, dict(found)))
                break
    return out


def keys_by_variant(
    runs: Iterable[tuple[str, Mapping[str, Any]]],
) -> dict[str, dict[str, Counter[str]]]:
    """ "builds" and "datasets": variant id -> its runs counted by the build (`build_key`)
    or the dataset (`dataset.key`) their provenance names, in one pass over the runs (a
    summary's, at every report update); runs naming none left out."""
    out: dict[str, dict[str, Counter[str]]] = {"builds": {}, "datasets": {}}
    for variant_id, prov in runs:
        dataset = prov.get("dataset")
        keys = (prov.get("build_key"), dataset.get("key") if isinstance(dataset, Mapping) else None)
        for what, key in zip(("builds", "datasets"), keys, strict=True):
            if key:
                out[what].setdefault(variant_id, Counter())[str(key)] += 1
    return out


def _by_count(runs: Mapping[str, int]) -> list[tuple[str, int]]:
    """Most runs first, then by key."""
    return sorted(runs.items(), key=lambda kv: (-kv[1], kv[0]))

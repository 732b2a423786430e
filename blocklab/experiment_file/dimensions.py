"""A matrix dimension: its values (options), how each fills the variant, and how labels,
selectors and Experiment.dims() show it. Each family of dimensions (postgres, storage,
workload, settings, and the scalars of blocklab.experiment_file.matrix) makes these."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blocklab.experiment_file.values import fail

Scalar = str | int | bool
Flat = dict[str, Scalar]
LabelPart = Callable[[Scalar], str]
SelectorValue = Callable[[Any, str], Any]


@dataclass(frozen=True)
class Option:
    """One value of one dimension: what it builds, how selectors see it, its JSON."""

    value: Any
    flat: Flat  # selector key -> value, e.g. {"storage": "ext4-4k", "fs": "ext4", ...}
    json: Any


@dataclass(frozen=True)
class Dimension:
    key: str  # a matrix key or "settings.NAME"
    options: tuple[Option, ...]
    # an option's value -> the Variant fields it sets: "build.block_size_kb", "storage",
    # "settings.NAME" (a dotted name is a field of that part of the variant)
    fields: Callable[[Any], dict[str, Any]]
    # per selector key: the label part (None: not shown; absent: "name=value"), the name
    # in Experiment.dims() (absent: the key) and how a selector's value is read
    labels: Mapping[str, LabelPart | None] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    selector_values: Mapping[str, SelectorValue] = field(default_factory=dict)


def values(raw: Any, path: str) -> list[tuple[Any, str]]:
    """A scalar is one value; a list is a dimension. Returns (value, path) pairs."""
    if isinstance(raw, list):
        if not raw:
            raise fail(path, "an empty list has no values")
        return [(v, f"{path}[{i}]") for i, v in enumerate(raw)]
    return [(raw, path)]


def unique(opts: list[Option], path: str) -> tuple[Option, ...]:
    seen: set[str] = set()
    for o in opts:
        blob = json.dumps(o.json, sort_keys=True, default=str)
        if blob in seen:
            raise fail(path, f"the value {blob} is listed twice")
        seen.add(blob)
    return tuple(opts)


def unique_labels(opts: tuple[Option, ...], key: str) -> tuple[Option, ...]:
    """Distinct options whose labels collide get a #n suffix."""
    counts: dict[Scalar, int] = {}
    for o in opts:
        counts[o.flat[key]] = counts.get(o.flat[key], 0) + 1
    out, seen = [], dict.fromkeys(counts, 0)
    for o in opts:
        label = o.flat[key]
        if counts[label] > 1:
            seen[label] += 1
            o = Option(o.value, {**o.flat, key: f"{label}#{seen[label]}"}, o.json)
        out.append(o)
    return tuple(out)

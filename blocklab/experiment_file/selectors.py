"""Selectors pick variants by dimension values: [[exclude]] rules drop combinations and
experiment.reference says which variant each variant is compared with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blocklab.experiment_file import settings
from blocklab.experiment_file.dimensions import Dimension, Flat, Scalar, SelectorValue
from blocklab.experiment_file.matrix import Combo
from blocklab.experiment_file.values import fail, table


@dataclass(frozen=True)
class Selector:
    path: str
    keys: dict[str, tuple[Scalar, ...]]  # selector key -> accepted values

    def matches(self, flat: Flat) -> bool:
        return all(flat[k] in vals for k, vals in self.keys.items())


@dataclass(frozen=True)
class Vocabulary:
    """What selectors may name in this matrix: each key's values, its other name
    (block_size_kb for block_size) and how a selector's value for it is read."""

    known: dict[str, list[Scalar]]
    aliases: Mapping[str, str]
    readers: Mapping[str, SelectorValue]

    @classmethod
    def of(cls, dims: Sequence[Dimension], known: dict[str, list[Scalar]]) -> Vocabulary:
        aliases = {n: k for d in dims for k, n in d.names.items()}
        readers = {k: r for d in dims for k, r in d.selector_values.items()}
        return cls(known, aliases, readers)


def selector(raw: Any, path: str, vocab: Vocabulary) -> Selector:
    flat = settings.flatten(table(raw, path), path)
    if not flat:
        raise fail(path, "an empty selector matches everything", ", ".join(vocab.known))
    keys: dict[str, tuple[Scalar, ...]] = {}
    for raw_key, raw_value in flat.items():
        key = vocab.aliases.get(raw_key, raw_key)
        p = f"{path}.{raw_key}"
        if key not in vocab.known:
            raise fail(p, "not a dimension of this matrix", ", ".join(vocab.known))
        vals = raw_value if isinstance(raw_value, list) else [raw_value]
        keys[key] = tuple(_value(key, v, p, vocab) for v in vals)
    return Selector(path, keys)


def _value(key: str, value: Any, path: str, vocab: Vocabulary) -> Scalar:
    read = vocab.readers.get(key)
    v = read(value, path) if read else value
    allowed = vocab.known[key]
    if isinstance(v, bool) != any(isinstance(a, bool) for a in allowed) or v not in allowed:
        shown = ", ".join(json.dumps(a) for a in allowed)
        raise fail(path, f"{json.dumps(value)} is not a value of this matrix", shown)
    return v


# ---------------------------------------------------------------- excludes


def excludes(raw: Any, vocab: Vocabulary) -> list[Selector]:
    if not isinstance(raw, list):
        raise fail("exclude", "expected [[exclude]] tables", "[[exclude]] with dimension keys")
    return [selector(r, f"exclude[{i}]", vocab) for i, r in enumerate(raw)]


def drop_excluded(combos: list[Combo], rules: Sequence[Selector]) -> list[Combo]:
    """Each rule in turn; a rule that matches nothing or leaves nothing is an error."""
    for rule in rules:
        if not any(rule.matches(c.flat) for c in combos):
            raise fail(rule.path, "matches no variant (left after the rules before it)")
        combos = [c for c in combos if not rule.matches(c.flat)]
        if not combos:
            raise fail(rule.path, "excludes every remaining variant")
    return combos


# ---------------------------------------------------------------- references


def references(
    raw: Any,
    combos: Sequence[Combo],
    labels: Sequence[str],
    varying: Sequence[str],
    vocab: Vocabulary,
) -> list[int]:
    """For each combo, the index of its reference combo."""
    n = len(combos)
    if raw is None:
        if n == 1:
            return [0]
        raise fail(
            "experiment.reference",
            "missing: which variant do the others compare with?",
            "a selector such as { block_size = 8 } or a label: " + ", ".join(map(repr, labels)),
        )
    if isinstance(raw, str):
        if raw not in labels:
            raise fail(
                "experiment.reference", f"{raw!r} is not a variant", ", ".join(map(repr, labels))
            )
        return [labels.index(raw)] * n
    sel = selector(raw, "experiment.reference", vocab)
    refs = [i for i, c in enumerate(combos) if sel.matches(c.flat)]
    if not refs:
        raise fail("experiment.reference", "matches no variant (all excluded)", ", ".join(labels))
    if len(refs) == 1:
        return refs * n
    return [_group_reference(i, combos, refs, sel, varying, labels) for i in range(n)]


def _group_reference(
    i: int,
    combos: Sequence[Combo],
    refs: Sequence[int],
    sel: Selector,
    varying: Sequence[str],
    labels: Sequence[str],
) -> int:
    """A reference selector matching several variants: each variant's reference is the one
    that agrees with it on every varying dimension the selector does not name."""
    free = [k for k in varying if k not in sel.keys]
    mine = [r for r in refs if all(combos[r].flat[k] == combos[i].flat[k] for k in free)]
    if len(mine) != 1:
        found = ", ".join(repr(labels[r]) for r in mine) or "none"
        raise fail(
            "experiment.reference",
            f"variant {labels[i]!r} needs exactly one reference that agrees on "
            f"{', '.join(free) or 'every other dimension'}; found {found}",
            "a selector naming more dimensions, or a label",
        )
    return mine[0]

"""The experiment file's [fleet] table: which fleet host runs which variants.

    [fleet.hosts]
    nvme-box = { fs = "xfs" }              # a selector, as in [[exclude]]
    sata-box = { fs = ["ext4", "xfs"] }

A host runs the variants its selector matches and their references (a pair never spans
hosts); a host of `fleet submit --hosts` that the table does not name runs every variant.
`blocklab run` on one machine runs the whole matrix and ignores the table."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from blocklab.experiment_file.matrix import Combo
from blocklab.experiment_file.selectors import Vocabulary, selector
from blocklab.experiment_file.values import check_keys, fail, table

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
HOST_RULE = "1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"

FLEET_KEYS = ("hosts",)


def host_assignment(
    raw: Any,
    combos: Sequence[Combo],
    ref_index: Sequence[int],
    labels: Sequence[str],
    vocab: Vocabulary,
) -> dict[str, list[int]]:
    """host -> the indexes of the combos it runs (its selection and their references),
    in matrix order; {} without a [fleet] table."""
    if raw is None:
        return {}
    f = table(raw, "fleet")
    check_keys(f, FLEET_KEYS, "fleet")
    hosts = table(f.get("hosts", {}), "fleet.hosts")
    if not hosts:
        raise fail(
            "fleet.hosts", "missing or empty", "host names with selectors: a = { fs = 'xfs' }"
        )
    out: dict[str, list[int]] = {}
    for name, raw_selector in hosts.items():
        path = f"fleet.hosts.{name}"
        if not HOST_RE.match(name):
            raise fail(path, f"{name!r} is not a host name", HOST_RULE)
        sel = selector(raw_selector, path, vocab)
        picked = [i for i, c in enumerate(combos) if sel.matches(c.flat)]
        if not picked:
            raise fail(path, "matches no variant", ", ".join(map(repr, labels)))
        out[name] = sorted(set(picked) | {ref_index[i] for i in picked})
    return out

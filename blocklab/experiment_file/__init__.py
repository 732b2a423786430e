"""Experiment files: the matrix, validated before anything runs.

An experiment file is TOML with three parts. Every key is checked: an unknown key, a
wrong type or an impossible value is a UserError naming the key path and the allowed
values (exit code 2), before anything is built or started.

    [experiment]
    name = "page-size"               # required; letters, digits, . _ -
    description = "4 kB vs 8 kB"
    seed = 42                         # optional; default derived from the name
    rounds = 5                        # every variant once per round, balanced orders
    reference = { block_size = 8 }    # a selector (see below) or a variant label
    settings_policy = "bytes"         # "native" (same numbers) or "bytes" (same bytes)
    until_ci_pct = 2.0                # optional: add rounds until every CI half-width <=
    max_rounds = 30                   # optional cap for until_ci_pct
    time_budget_s = 3600              # optional
    equivalence = 2                   # optional: "equal within ±2 %" (percent, default 2)

    [matrix]                          # a list makes a dimension; a scalar is fixed
    block_size = [2, 4, 8]            # every key: blocklab.experiment_file.matrix
    clients = [1, 5, 10, 15]
    [matrix.settings]                 # GUCs; a list varies one GUC
    max_wal_size = ["1GB", "4GB"]

    [[exclude]]                       # drop combinations matching every key of a rule
    block_size = 2
    clients = [10, 15]

Storage tables take the keys of blocklab.model.StorageRequest: kind (dir, ext4, xfs,
btrfs, device), block_size (file-system block, bytes or "4k"; a list expands into one
storage per size), size_mb, mount_options, mkfs_options, path, erase_confirmed, fs (the
file system blocklab makes on a kind = "device": ext4, xfs or btrfs; default ext4), wal (a
storage table for pg_wal), memory_limit ("1GiB"), drop_caches. What the machine can
provision (blocklab.storage.validate) is checked by check_machine, in plan and run.

Workloads: a built-in pgbench script (tpcb-like, simple-update, select-only) or script
files ("file.sql" or "file.sql@weight", relative to the experiment file), and a
query_mode (simple, extended, prepared; default prepared).

Selectors (reference, exclude) use the matrix keys (postgres, block_size, ..., with the
storage's label, its fs (kind) and fs_block_size, the workload's query_mode, and
settings.NAME or a nested settings table); a value or a list of values. A reference
selector that matches several variants defines one reference per group: each variant is
compared with the matching variant that agrees on every dimension the selector does not
name (e.g. reference = { wal_block_size = 8 } across clients = [1, 5, 10]).

Sizes: "kB", "MB", "GB" count 1024 as PostgreSQL does; "KiB", "MiB", "GiB" are the same.

The modules: values (TOML values to typed values, the key path in every error), matrix
(the list of dimensions, their expansion, each combination as a Variant) with one module
per dimension family that has a table of its own (postgres, storage, workload,
settings), selectors (excludes and references), experiment (the Experiment model),
loader (file or packaged demo.toml -> Experiment), machine (check_machine).

Layer: the experiment file's vocabulary (matrix keys, designs, settings) sits below analysis
and execution; it may import workloads (driver keys), postgres (settings policy), storage
and the shared nouns; never execution, analysis or anything above.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blocklab.experiment_file.experiment import Experiment, default_seed
    from blocklab.experiment_file.loader import (
        OVERRIDABLE,
        demo,
        from_dict,
        load,
        overridden_name,
    )
    from blocklab.experiment_file.values import parse_seconds, parse_size

# name -> its module, imported when the name is first used: importing a light module of
# this package (design, values) does not load the models (pydantic, probes, psycopg), which
# every `blocklab report` and `summary` paid on start
_LAZY = {
    "Experiment": "experiment",
    "default_seed": "experiment",
    "OVERRIDABLE": "loader",
    "demo": "loader",
    "from_dict": "loader",
    "load": "loader",
    "overridden_name": "loader",
    "parse_seconds": "values",
    "parse_size": "values",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "OVERRIDABLE",
    "Experiment",
    "default_seed",
    "demo",
    "from_dict",
    "load",
    "overridden_name",
    "parse_seconds",
    "parse_size",
]

"""matrix.dataset: your own database, `{ dump = "app.dump" }` (a list of tables varies
it): a pg_dump archive in custom (-Fc) or directory (-Fd) format, relative to the
experiment file, restored into every build and storage by the queries driver's load
(blocklab.workloads.queries), for the queries driver or pgbench custom scripts:

    dataset = { dump = "app.dump" }
    workload = { driver = "queries", file = "queries.sql", passes = 3 }
    # or: workload = { scripts = ["orders.sql"] }   (pgbench, your scripts, on your data)

The archive is checked here (exists, readable, a pg_dump archive; a plain SQL dump is
refused) and its content hash taken: the hash is the dataset's identity with the build,
storage and fillfactors, so an unchanged dump is restored once per build and storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blocklab import model
from blocklab.experiment_file.dimensions import Dimension, Flat, Option, unique, values
from blocklab.experiment_file.values import check_keys, fail, resolve, table
from blocklab.workloads import dump
from blocklab.workloads.queries import NAME as QUERIES

KEYS = ("dump",)
KEY = "dataset"


def read(raw: Any, base: Path) -> list[Dimension]:
    path = f"matrix.{KEY}"
    opts = []
    for v, p in values(raw, path):
        t = table(v, p)
        check_keys(t, KEYS, p)
        if not isinstance(t.get("dump"), str) or not t["dump"]:
            raise fail(f"{p}.dump", "missing", f'{dump.ALLOWED}, e.g. "app.dump"')
        _missing_hint(t["dump"], base, f"{p}.dump")
        file = resolve(t["dump"], base, f"{p}.dump", "dump")
        _, sha256 = dump.inspect(Path(file), f"{p}.dump")
        options = model.options_of({"dump": file, "dump_sha256": sha256})
        flat: Flat = {KEY: Path(file).name}
        opts.append(Option(options, flat, {"dump": file, "sha256": sha256}))
    return [
        Dimension(
            KEY,
            unique(opts, path),
            # restored by the queries driver's load, whichever driver runs the workload
            lambda options: {"dataset.options": options, "dataset.driver": QUERIES},
            labels={KEY: lambda name: f"dump={name}"},
        )
    ]


def _missing_hint(dump_text: str, base: Path, path: str) -> None:
    """A missing dump, with the way to make one: `pg_dump -Fc`, or the script that sits
    beside it (the shipped example's dump is made by examples/own-database/make_dump.py)."""
    where = Path(dump_text).expanduser()
    where = where if where.is_absolute() else base / where
    if where.exists():
        return
    maker = sorted(where.parent.glob("make_dump.py")) if where.parent.is_dir() else []
    how = f"sudo .venv/bin/python {maker[0]}" if maker else "pg_dump -Fc -f FILE yourdb"
    raise fail(path, f"dump {str(where)!r} does not exist: make it first with {how}")


def check_pairing(dims: list[Dimension]) -> None:
    """A dump goes with the queries driver or pgbench custom scripts (run against the
    restored database), and the queries driver with a dump (UserError naming the key
    otherwise)."""
    has_dump = any(d.key == KEY for d in dims)
    workloads = [o.value for d in dims if d.key == "workload" for o in d.options]
    drivers = {w.get("driver", model.DEFAULT_DRIVER) if isinstance(w, dict) else None
               for w in workloads}  # fmt: skip
    on_dump = all(
        isinstance(w, dict)
        and (w.get("driver") == QUERIES
             or (w.get("driver", model.DEFAULT_DRIVER) == model.DEFAULT_DRIVER
                 and w.get("scripts")))
        for w in workloads
    )  # fmt: skip
    if has_dump and not on_dump:
        raise fail(
            "matrix.dataset",
            "a dump is restored for the queries driver and pgbench custom scripts only "
            "(other drivers and pgbench's built-in scripts load their own data)",
            'workload = { driver = "queries", file = "queries.sql" } or '
            'workload = { scripts = ["mine.sql"] }',
        )
    if not has_dump and QUERIES in drivers:
        raise fail(
            "matrix.workload.driver",
            "the queries driver runs on your own database, and none is given",
            'matrix.dataset = { dump = "app.dump" } (pg_dump -Fc)',
        )

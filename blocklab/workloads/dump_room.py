"""The bytes a dump dataset's tables and indexes take once restored, for the plan's room
check (blocklab.workloads.sizing; issue 32), from the best basis at hand, which the plan
states beside the figure:

1. measured when the dataset was restored: a complete snapshot of this dump (same
   content hash and fillfactors; blocklab.workloads.dataset's meta.json holds each table's
   and index's bytes, TOAST not counted), the largest over the builds it was restored into;
2. estimated from the dump (blocklab.workloads.dump_size), read by the pg_restore of the
   newest cached build, run as the driver's OS user on a private copy of the archive (as
   the restore itself is; the data section is written beside the copy, in the temporary
   directory, and counted line by line). What it reads is kept in
   paths.work/datasets/dump-<hash>.json, so a second plan reads no archive;
3. guessed from the archive's size, when no build is cached yet, its pg_restore cannot
   read the dump (an older version than the pg_dump that made it) or the plan does not
   run as root (which the private copy needs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from blocklab.errors import CommandError
from blocklab.model import DatasetRequest
from blocklab.paths import Paths
from blocklab.postgres import build
from blocklab.workloads import dump, dump_size
from blocklab.workloads.execution import run_driver

RESTORE_TIMEOUT_S = 3600


def room(
    dataset: DatasetRequest, block_size_bytes: int, paths: Paths | None = None
) -> tuple[int, str]:
    """(bytes of tables and indexes, the basis in words)."""
    paths = paths or Paths.from_env()
    source, sha256 = Path(str(dataset.option("dump"))), str(dataset.option("dump_sha256"))
    measured = measured_bytes(paths, dataset)
    if measured is not None:
        nbytes, restores = measured
        return nbytes, (
            f"measured when the dataset was restored ({restores} restore(s) of this dump, "
            "the largest; TOAST not counted)"
        )
    contents, why = contents_of(paths, source, sha256)
    if contents is not None:
        return dump_size.estimate(
            contents, dataset.fillfactor, dataset.index_fillfactor, block_size_bytes
        )
    nbytes, basis = dump_size.guess(archive_bytes(source))
    return nbytes * 100 // dataset.fillfactor, basis + why


def archive_bytes(source: Path) -> int:
    files = [source] if source.is_file() else list(source.glob("*"))
    return sum(p.stat().st_size for p in files if p.is_file())


def measured_bytes(paths: Paths, dataset: DatasetRequest) -> tuple[int, int] | None:
    """(the largest tables + indexes bytes, how many snapshots) of the complete snapshots
    of this dataset (dump, hash and fillfactors), on whatever build; None without one."""
    found = []
    for meta_file in (paths.work / "datasets").glob("*/meta.json"):
        if not (meta_file.parent / "COMPLETE").exists():
            continue
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError):
            continue
        same = (
            meta.get("options") == dict(dataset.options)
            and meta.get("fillfactor") == dataset.fillfactor
            and meta.get("index_fillfactor") == dataset.index_fillfactor
        )
        if same:
            found.append(sum(int(r["bytes"]) for r in meta.get("relations", [])))
    return (max(found), len(found)) if found else None


def contents_of(paths: Paths, source: Path, sha256: str) -> tuple[dump_size.Contents | None, str]:
    """What the archive holds (read once, then from the cache file), or None and why."""
    cache = paths.work / "datasets" / f"dump-{sha256[:16]}.json"
    if cache.is_file():
        return _from_json(json.loads(cache.read_text())), ""
    builds = build.cached_builds(paths)
    if not builds:
        return None, ""
    if os.geteuid() != 0:  # the copy for the driver's OS user needs root, as the restore
        return None, "; the dump is read by a plan run as root"
    inst = builds[0]
    try:
        with dump.staged(source, sha256) as archive:
            contents = read_archive(inst.bin("pg_restore"), archive)
    except CommandError as e:
        tail = (e.output.strip().splitlines() or [str(e)])[-1]
        return None, f"; pg_restore {inst.version} cannot read it: {tail}"
    except OSError as e:  # e.g. no room in the temporary directory for the data section
        return None, f"; reading it failed: {e}"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(_to_json(contents), indent=1))
    return contents, ""


def read_archive(pg_restore: Path, archive: Path) -> dump_size.Contents:
    """The archive's TOC, post-data section and data section, read by `pg_restore` as the
    driver's user (the data section into a file beside the archive, read line by line)."""
    listing = run_driver([str(pg_restore), "--list", str(archive)], timeout_s=600).stdout
    post = run_driver([str(pg_restore), "--section=post-data", "-f", "-", str(archive)],
                      timeout_s=600).stdout  # fmt: skip
    data = archive.parent / "data.copy"
    run_driver([str(pg_restore), "--data-only", "-f", str(data), str(archive)],
               timeout_s=RESTORE_TIMEOUT_S)  # fmt: skip
    with open(data, "rb") as f:
        tables = dump_size.read_data(f)
    data.unlink()
    return dump_size.Contents(
        dump_size.count_entries(listing), tables, dump_size.read_indexes(post)
    )


def _to_json(c: dump_size.Contents) -> dict[str, object]:
    return {
        "entries": c.entries,
        "tables": {k: [t.rows, t.text_bytes] for k, t in c.tables.items()},
        "indexes": [list(i) for i in c.indexes],
    }


def _from_json(d: dict[str, object]) -> dump_size.Contents:
    tables = d["tables"]
    assert isinstance(tables, dict) and isinstance(d["entries"], dict)
    assert isinstance(d["indexes"], list)
    return dump_size.Contents(
        dict(d["entries"]),
        {k: dump_size.TableData(int(v[0]), int(v[1])) for k, v in tables.items()},
        tuple((str(a), str(b)) for a, b in d["indexes"]),
    )

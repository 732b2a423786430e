"""A run's raw files in the site: hard-linked where possible, copied otherwise, regular
files only (symlinks are neither followed nor listed); large ones linked where they are.

A site is what people publish: a real 60-second pgbench run's per-transaction log is about
500 kB (sampled at 10 %), which at 10,000 runs would put 5 GB into a site of 90 MB. A
file over MAX_SITE_RAW_FILE_BYTES stays in the results directory; the run's page lists it
with its size and a link to it there, and says so."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from blocklab.report import data

MAX_SITE_RAW_FILE_BYTES = 64 * 1024  # a server log, pgbench's output: a few kB
LEFT_NOTE = "not copied into the site (over 64 kB): linked in the results directory"


def copy_raw(results: Path, raw_dir: str, dest: Path, href_base: str) -> list[dict[str, Any]]:
    """Copy (hard-link where possible) a run's raw files into the site; regular files only,
    symlinks are not followed. Returns [{name, href, size, note}]."""
    src = data.raw_source(results, raw_dir)
    if src is None:
        return []
    out = []
    made = False  # the run's directory in the site, made before its first link
    for rel, path, size in _regular_files(str(src)):
        entry = {"name": rel, "href": f"{href_base}/{rel}", "size": size, "note": ""}
        if size > MAX_SITE_RAW_FILE_BYTES:
            entry.update(href=Path(path).absolute().as_uri(), note=LEFT_NOTE)
        else:
            if not made:
                os.makedirs(dest, exist_ok=True)
                made = True
            _link_or_copy(path, os.path.join(dest, rel))
        out.append(entry)
    return out


def _regular_files(src: str) -> list[tuple[str, str, int]]:
    """(relative posix path, path, size) of the regular files under `src`, sorted; symlinks
    are neither followed nor listed (one lstat a file: thousands of runs a site)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:  # gone meanwhile
                continue
            if stat.S_ISREG(st.st_mode):
                rel = name if rel_dir == "." else f"{Path(rel_dir).as_posix()}/{name}"
                found.append((rel, path, st.st_size))
    return sorted(found, key=lambda f: f[0])


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link `src` at `dst` (replacing a file there), else copy it."""
    for _ in range(3):
        try:
            os.link(src, dst)
            return
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        except FileExistsError:
            os.unlink(dst)
        except OSError:
            break
    Path(dst).unlink(missing_ok=True)
    shutil.copyfile(src, dst)

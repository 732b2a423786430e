"""A run's raw files in the site: hard-linked where possible, copied otherwise, regular
files only (symlinks are neither followed nor listed), huge ones linked in place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from blocklab.report import data

MAX_RAW_FILE_BYTES = 256 * 1024 * 1024


def copy_raw(results: Path, raw_dir: str, dest: Path, href_base: str) -> list[dict[str, Any]]:
    """Copy (hard-link where possible) a run's raw files into the site; regular files only,
    symlinks are not followed. Returns [{name, href, size, note}]."""
    src = data.raw_source(results, raw_dir)
    if src is None:
        return []
    out = []
    for rel, p in _regular_files(src):
        size = p.stat().st_size
        entry = {"name": rel, "href": f"{href_base}/{rel}", "size": size, "note": ""}
        if size > MAX_RAW_FILE_BYTES:
            entry.update(
                href=p.as_uri(), note="too large to copy into the site; links the original"
            )
        else:
            _link_or_copy(p, dest / rel)
        out.append(entry)
    return out


def _regular_files(src: Path) -> list[tuple[str, Path]]:
    """(relative posix path, path) of the regular files under `src`, sorted; symlinks are
    neither followed nor listed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = Path(dirpath).relative_to(src)
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            if not p.is_symlink() and p.is_file():
                found.append(((rel_dir / name).as_posix(), p))
    return sorted(found, key=lambda f: f[0])


def _link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link `src` at `dst` (replacing a file there), else copy it."""
    for _ in range(3):
        try:
            os.link(src, dst)
            return
        except FileNotFoundError:
            dst.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            dst.unlink()
        except OSError:
            break
    dst.unlink(missing_ok=True)
    shutil.copyfile(src, dst)

"""A user's pg_dump archive: what it is (custom or directory format), its content hash,
the extensions it creates, and a private copy of it for the driver's OS user to read
(`staged`: the restore's and the plan's pg_restore). No database is touched here.

pg_dump's custom format (-Fc) is one file and its directory format (-Fd) a directory
with `toc.dat`; both begin with the magic bytes "PGDMP" and are read by pg_restore, which
runs no psql meta-command. A plain SQL dump (pg_dump's default, -Fp) is refused: psql
would run it, and psql runs what a `\\!` line in it asks. The tar format (-Ft) is refused
too: pg_restore cannot restore it with parallel jobs.

The content hash (SHA-256 over the file, or over every file of the directory by name) is
part of the dataset's identity: a changed dump is restored again, an unchanged one once
per build and storage.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from blocklab.errors import UserError
from blocklab.workloads.execution import driver_user

MAGIC = b"PGDMP"
FORMATS = ("custom", "directory")
ALLOWED = "a pg_dump archive in custom (pg_dump -Fc) or directory (pg_dump -Fd) format"
# a line of `pg_restore --list`: "3; 3079 16385 EXTENSION - pg_trgm"
_EXTENSION = re.compile(r"^\d+; \d+ \d+ EXTENSION - (?P<name>[A-Za-z0-9_-]+)[ \t]*$", re.MULTILINE)


def inspect(path: Path, key: str) -> tuple[str, str]:
    """(format, sha256) of the archive at `path`; UserError naming `key` and the file for
    a missing or unreadable path, a plain-SQL or tar dump, or anything else."""
    try:
        st = path.stat()
    except OSError as e:
        raise UserError(f"{key}: {path}: {e.strerror}; allowed: {ALLOWED}") from None
    if stat.S_ISDIR(st.st_mode):
        return "directory", _hash_directory(path, key)
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{key}: {path} is neither a file nor a directory; allowed: {ALLOWED}")
    head = _read_head(path, key)
    if not head.startswith(MAGIC):
        raise UserError(f"{key}: {path} is {_what(head)}; allowed: {ALLOWED}")
    return "custom", _hash_files([("", path)], key)


def _read_head(path: Path, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(512)
    except OSError as e:
        raise UserError(f"{key}: {path}: {e.strerror}; allowed: {ALLOWED}") from None


def _what(head: bytes) -> str:
    if len(head) > 262 and head[257:262] == b"ustar":
        return "a tar archive (pg_dump -Ft), which pg_restore cannot restore in parallel"
    return (
        "not a pg_dump archive (a plain SQL dump is refused: psql would run it, with "
        "any \\! shell command it holds)"
    )


def _hash_directory(path: Path, key: str) -> str:
    toc = path / "toc.dat"
    if not toc.is_file() or not _read_head(toc, key).startswith(MAGIC):
        raise UserError(
            f"{key}: {path} is a directory without a pg_dump toc.dat; allowed: {ALLOWED}"
        )
    files = sorted((p.name, p) for p in path.iterdir() if p.is_file() and not p.is_symlink())
    return _hash_files(files, key)


def _hash_files(files: list[tuple[str, Path]], key: str) -> str:
    h = hashlib.sha256()
    for name, p in files:
        h.update(name.encode() + b"\0")
        try:
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError as e:
            raise UserError(f"{key}: {p}: {e.strerror}; allowed: {ALLOWED}") from None
    return h.hexdigest()


def extensions(listing: str) -> list[str]:
    """The extensions a `pg_restore --list` output creates, in order. Pure."""
    return [m["name"] for m in _EXTENSION.finditer(listing)]


def missing_extensions(wanted: list[str], available: list[str]) -> list[str]:
    have = set(available)
    return [e for e in wanted if e not in have]


@contextmanager
def staged(source: Path, sha256: str) -> Iterator[Path]:
    """A copy of the archive in a fresh directory of the driver's user (mode 0700),
    checked against the plan's hash; removed afterwards."""
    key = "matrix.dataset.dump"
    _, now = inspect(source, key)
    if now != sha256:
        raise UserError(f"{key}: {source} changed since the plan; allowed: an unchanged dump")
    user = driver_user()
    work = Path(tempfile.mkdtemp(prefix="blocklab-dump-"))
    try:
        target = work / source.name
        if source.is_dir():
            shutil.copytree(source, target, symlinks=False)
        else:
            shutil.copyfile(source, target)
        for root, dirs, files in os.walk(work):
            for name in [*dirs, *files, "."]:
                os.chown(os.path.join(root, name), user.uid, user.gid)
        yield target
    finally:
        shutil.rmtree(work, ignore_errors=True)

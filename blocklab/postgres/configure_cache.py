"""configure's answers shared by the builds of one source: autoconf's cache file.

Every build runs PostgreSQL's configure, 12 s of one CPU here (gcc 12, PostgreSQL 18),
and most of it asks the system the same questions: which headers, functions and
libraries there are. Builds of one source that differ in page size, WAL block size,
segment size, install prefix or link order get the same answers, and autoconf's cache
(`configure -C`) keeps them: with an earlier build's cache, configure took 1.3 s.

The answers depend on the system and on what configure is asked, so a cache file is
shared only by builds with the same `key()`: the configure script's own hash (version
and patches), its arguments other than those that ask nothing of the system (the prefix,
the sizes), the compiler and the variables configure reads (PATH, CC, CFLAGS ...), and
the state of the installed Debian packages (dpkg's status file: installing a -dev package
makes a new key). The generated files are the same as without the cache (pg_config.h and
Makefile.global compared: only configure's own arguments differ, by "-C", which
`pg_config --configure` then shows); the build key ignores it.

A build copies the shared file into its tree, runs `configure -C`, and publishes the
tree's file back by an atomic rename when configure succeeded. If configure fails with
a copied cache it runs once more without one. BLOCKLAB_CONFIGURE_CACHE=0 turns it off;
deleting `<cache>/configure` forgets every answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

OFF_VARIABLE = "BLOCKLAB_CONFIGURE_CACHE"
TREE_FILE = "config.cache"  # where `configure -C` reads and writes it
FLAG = "-C"
DPKG_STATUS = Path("/var/lib/dpkg/status")
# arguments that ask configure nothing of the system: a cache serves every value of them
NOT_ASKED = ("--prefix=", "--with-blocksize=", "--with-wal-blocksize=", "--with-segsize=")


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(OFF_VARIABLE, "") != "0"


def asked(argv: Sequence[str]) -> list[str]:
    """configure's arguments (without argv[0]) that change its answers (pure)."""
    return [a for a in argv[1:] if not a.startswith(NOT_ASKED)]


def key(
    configure_script: Path,
    argv: Sequence[str],
    variables: Mapping[str, str],
    compiler: str,
    dpkg_status: Path = DPKG_STATUS,
) -> str:
    """The name of the cache file that builds with these inputs share."""
    try:
        st = os.stat(dpkg_status)
        packages = [st.st_size, st.st_mtime_ns]
    except OSError:
        packages = []
    script = hashlib.sha256(configure_script.read_bytes()).hexdigest()
    inputs = {
        "configure_sha256": script,
        "arguments": asked(argv),
        "variables": dict(sorted(variables.items())),
        "compiler": compiler,
        "packages": packages,
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"{digest[:16]}.cache"


def seed(tree: Path, shared: Path) -> bool:
    """Copy the shared cache into `tree` (True when there was one to copy)."""
    try:
        shutil.copyfile(shared, tree / TREE_FILE)
    except FileNotFoundError:
        return False
    return True


def publish(tree: Path, shared: Path) -> None:
    """The tree's cache becomes the shared one (written beside it, then renamed)."""
    made = tree / TREE_FILE
    if not made.is_file():
        return
    shared.parent.mkdir(parents=True, exist_ok=True)
    part = shared.with_name(f".{shared.name}.{os.getpid()}")
    shutil.copyfile(made, part)
    os.replace(part, shared)


def forget(tree: Path) -> None:
    (tree / TREE_FILE).unlink(missing_ok=True)

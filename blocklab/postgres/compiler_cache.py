"""ccache for PostgreSQL builds, when Debian's ccache is installed (`make setup` installs
it): the compiler is found through ccache's links (/usr/lib/ccache/gcc), so configure and
make run it as always and pg_config still names plain `gcc`.

Two builds of one geometry that differ only in their link order (a `layout_seed`) or in a
patch to a few .c files compile the same objects: the second build takes them from the
cache and only links. Builds at another page size share nothing: BLCKSZ is in
pg_config.h, which every file includes, and c.h (included by every file) declares
PGAlignedBlock as `char data[BLCKSZ]`, so even a file's preprocessed text differs and no
ccache mode finds its object again. ccache returns the object the compiler made, so
the binaries are the same with or without it; the build key ignores it.

On a cold cache ccache costs CPU: it runs the preprocessor once more per file to hash
what the file includes, 33 to 42 % more CPU than a plain compile here (gcc 12,
src/backend/access, 2 cores). So by default only builds that share objects with another
build go through it (`shares_objects`): a layout or patched build, and an ordinary build
whose layout or patched variants the same experiment runs. ccache's depend mode would
skip that pass but hashes every header whole, and pg_config.h holds configure's
arguments, --prefix (a path per build) among them: no object was found again.

The cache lives in blocklab's cache directory (`<cache>/ccache`), bounded in size.
BLOCKLAB_CCACHE=1 puts every build through it (an ordinary `blocklab build` whose layout
variants come later), BLOCKLAB_CCACHE=0 none."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

LINKS_DIR = Path("/usr/lib/ccache")  # Debian's ccache: gcc, cc, clang ... -> ccache
OFF_VARIABLE = "BLOCKLAB_CCACHE"
MAX_SIZE = "4G"
STATS_LOG_NAME = "ccache-stats.log"  # in the build's work directory, read before it goes
HIT_COUNTERS = frozenset({"direct_cache_hit", "preprocessed_cache_hit"})
MISS_COUNTER = "cache_miss"


def wanted(shares_objects: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a build goes through the cache: BLOCKLAB_CCACHE=1 every build, =0 none,
    else (unset) a build that shares objects with another."""
    setting = environ.get(OFF_VARIABLE, "")
    return setting == "1" or (setting != "0" and shares_objects)


def available(links_dir: Path = LINKS_DIR) -> bool:
    """ccache's compiler links exist (Debian's ccache is installed)."""
    return (links_dir / "gcc").exists()


def build_env(
    cache_dir: Path,
    work_dir: Path,
    links_dir: Path = LINKS_DIR,
    environ: Mapping[str, str] = os.environ,
    *,
    shares_objects: bool = True,
) -> dict[str, str]:
    """The variables a build's configure and make get: ccache's links first on PATH, its
    cache in `cache_dir`, paths under `work_dir` hashed as relative ones (each build
    compiles in a directory of its own). Empty when ccache is not available or the build
    is not `wanted`."""
    if not (wanted(shares_objects, environ) and available(links_dir)):
        return {}
    path = environ.get("PATH", os.defpath)
    return {
        "PATH": f"{links_dir}{os.pathsep}{path}",
        "CCACHE_DIR": str(cache_dir),
        "CCACHE_BASEDIR": str(work_dir),
        "CCACHE_MAXSIZE": MAX_SIZE,
        "CCACHE_STATSLOG": str(work_dir / STATS_LOG_NAME),
    }


def count(stats_log: str) -> dict[str, int]:
    """Hits and misses in a ccache stats log (pure): one counter name a line, each
    compilation's lines after a `# <source>` line."""
    names = [line.strip() for line in stats_log.splitlines()]
    return {
        "hits": sum(n in HIT_COUNTERS for n in names),
        "misses": sum(n == MISS_COUNTER for n in names),
    }


def summary(env: Mapping[str, str]) -> dict[str, object] | None:
    """What the build's compiler cache did, for its manifest: None without ccache."""
    if not env:
        return None
    log = Path(env["CCACHE_STATSLOG"])
    text = log.read_text() if log.is_file() else ""
    return {"tool": "ccache", **count(text)}

"""A seeded link order for the backend: one build-layout perturbation (issue: a 4 kB build is
also another binary).

BLCKSZ lives in pg_config.h, so a build at another page size recompiles every file and its
functions land at other addresses, with other alignments and cache-line and
branch-predictor conflicts. Mytkowicz, Diwan, Hauswirth and Sweeney ("Producing Wrong Data
Without Doing Anything Obviously Wrong!", ASPLOS 2009) moved program speed by several
percent by changing nothing but the link order. A build with a `layout_seed` keeps the
source, the geometry and every compiler flag, and links the backend's object files in an
order shuffled by that seed, so the spread of a few such builds of one geometry measures
how far code layout alone moves a workload.

How: the backend links `$(call expand_subsys,$^)` (src/backend/Makefile), where
`expand_subsys` (src/backend/common.mk) turns each subdirectory's objfiles.txt into its
object files. make is given a command-line definition of `expand_subsys` (it overrides the
makefile's, in every sub-make) that runs this module: the same expansion, then the object
files shuffled by the seed; archives (libpgport_srv.a, libpgcommon_srv.a) keep their places
at the end, since the linker resolves them against the objects before them.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

BACKEND_PREFIX = "../../src/backend/"  # what common.mk's expansion strips


def expand(top_builddir: str, entries: Sequence[str], read: Callable[[str], str]) -> list[str]:
    """common.mk's expand_subsys (pure, `read` returns a file's text): each objfiles.txt
    becomes the object files it lists, prefixed with top_builddir and stripped of
    ../../src/backend/; other entries stay as they are."""
    out: list[str] = []
    for entry in entries:
        if not entry.endswith("/objfiles.txt"):
            out.append(entry)
            continue
        for obj in read(entry).split():
            path = f"{top_builddir}/{obj}"
            out.append(path[len(BACKEND_PREFIX) :] if path.startswith(BACKEND_PREFIX) else path)
    return out


def shuffled(files: Sequence[str], seed: int) -> list[str]:
    """The object files in an order drawn from `seed` (the same seed, the same order);
    everything that is not an object file (archives, flags) keeps its place after them."""
    objects = [f for f in files if f.endswith(".o")]
    rest = [f for f in files if not f.endswith(".o")]
    random.Random(seed).shuffle(objects)
    return objects + rest


def make_override(seed: int, python: str = sys.executable) -> str:
    """The make command-line argument that links with the order of `seed`."""
    return (
        f"expand_subsys=$(shell {python} -m blocklab.postgres.link_order {seed} "
        "$(top_builddir) $(1))"
    )


def main(argv: Sequence[str]) -> int:
    seed, top_builddir, *entries = argv
    files = expand(top_builddir, entries, lambda p: Path(p).read_text())
    print(" ".join(shuffled(files, int(seed))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Layout variants of a build: the backend's seeded link order (blocklab.postgres.link_order)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.model import BuildRequest
from blocklab.postgres import build, link_order, sources
from blocklab.postgres.installation import Installation

OBJFILES = {
    "access/objfiles.txt": "src/backend/access/heap/heapam.o src/backend/access/nbtree/nbtree.o",
    "storage/objfiles.txt": "src/backend/storage/buffer/bufmgr.o src/backend/storage/smgr/md.o",
    "../../src/timezone/objfiles.txt": "src/timezone/localtime.o src/timezone/pgtz.o",
}
ENTRIES = [
    *OBJFILES,
    "main/main.o",
    "../../src/port/libpgport_srv.a",
    "../../src/common/libpgcommon_srv.a",
]


def test_expand_lists_each_subsystems_objects_relative_to_the_backend() -> None:
    files = link_order.expand("../..", ENTRIES, OBJFILES.__getitem__)
    assert files == [
        "access/heap/heapam.o",
        "access/nbtree/nbtree.o",
        "storage/buffer/bufmgr.o",
        "storage/smgr/md.o",
        "../../src/timezone/localtime.o",
        "../../src/timezone/pgtz.o",
        "main/main.o",
        "../../src/port/libpgport_srv.a",
        "../../src/common/libpgcommon_srv.a",
    ]


def test_a_seed_draws_one_order_of_the_same_objects_and_keeps_the_archives_last() -> None:
    files = link_order.expand("../..", ENTRIES, OBJFILES.__getitem__)
    orders = {seed: link_order.shuffled(files, seed) for seed in range(1, 9)}
    assert link_order.shuffled(files, 3) == orders[3]  # the same seed, the same order
    assert len({tuple(o) for o in orders.values()}) > 1  # seeds give other orders
    for order in orders.values():
        assert sorted(order) == sorted(files)  # nothing added, nothing lost
        assert order[-2:] == files[-2:]  # archives after every object, in their order


def test_make_takes_the_command_line_definition_in_sub_makes_too(tmp_path: Path) -> None:
    """The mechanism the build relies on: a command-line `expand_subsys=` overrides the
    makefile's own definition, inside $(call ...) and in a sub-make, and runs this module
    with the makefile's own $(top_builddir)."""
    sub = tmp_path / "src" / "backend"
    sub.mkdir(parents=True)
    for name, text in OBJFILES.items():
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text(text + "\n")
    (sub / "Makefile").write_text(
        "top_builddir = ../..\n"
        "expand_subsys = ORIGINAL $(1)\n"
        f"all:\n\t@echo $(call expand_subsys,{' '.join(ENTRIES)})\n"
    )
    (tmp_path / "Makefile").write_text(
        "all:\n\t@$(MAKE) -s --no-print-directory -C src/backend all\n"
    )
    plain = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(tmp_path)], capture_output=True, text=True
    )
    assert plain.stdout.split()[0] == "ORIGINAL", plain
    override = link_order.make_override(5, python=sys.executable)
    shuffled = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(tmp_path), override],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = link_order.shuffled(link_order.expand("../..", ENTRIES, OBJFILES.__getitem__), 5)
    assert shuffled.stdout.split() == expected, shuffled.stderr


def test_an_ordinary_build_keeps_its_json_key_material_and_make_arguments() -> None:
    req = BuildRequest(pg="18", block_size_kb=8)
    assert "layout_seed" not in req.canonical_json()  # variant ids made before it stay
    assert build.make_args(req) == []
    spec = sources.SourceSpec(kind="debian", location="", identity={"kind": "x"}, version="18.6")
    assert "layout_seed" not in build.key_material(req, spec)


def test_a_layout_seed_is_part_of_the_key_and_named_in_it() -> None:
    spec = sources.SourceSpec(kind="debian", location="", identity={"kind": "x"}, version="18.6")
    keys = {
        seed: build.format_key(
            "18.6",
            BuildRequest(layout_seed=seed),
            build.key_material(BuildRequest(layout_seed=seed), spec),
        )
        for seed in (None, 1, 2)
    }
    assert len(set(keys.values())) == 3
    assert "-layout2-" in keys[2] and "layout" not in keys[None]
    (arg,) = build.make_args(BuildRequest(layout_seed=2))
    assert arg.startswith("expand_subsys=$(shell ") and " 2 $(top_builddir) $(1))" in arg


@pytest.mark.parametrize("seed", [0, -1, 2**31])
def test_a_layout_seed_outside_its_range_is_refused(seed: int) -> None:
    from blocklab.commands.build import request_from_options
    from blocklab.errors import UserError

    with pytest.raises(UserError, match="--layout-seed: must be a whole number from 1"):
        request_from_options(layout_seed=seed)


@pytest.mark.build
@pytest.mark.builds((8, 8, 1))
def test_a_layout_variant_is_another_binary_of_the_same_geometry_and_it_runs(
    paths, pg18_8k: Installation
) -> None:  # type: ignore[no-untyped-def]
    """A real build with a seeded link order: verified like every build (initdb, start,
    SELECT, stop), the same page size, and a postgres binary that differs from the
    ordinary build's. Its objects are the ordinary build's: on a cold cache (CI's) the
    compiler cache gives them back and the build only links."""
    inst = build.ensure_build(BuildRequest(pg="18", block_size_kb=8, layout_seed=1), paths)
    assert "-layout1-" in inst.key and inst.key != pg18_8k.key
    assert inst.block_size_bytes == pg18_8k.block_size_bytes == 8192
    assert inst.manifest["layout_seed"] == 1
    assert inst.manifest["postgres_sha256"] != sources.sha256_file(pg18_8k.bin("postgres"))
    assert len(inst.manifest["postgres_sha256"]) == 64
    if "compiler_cache" in inst.manifest:  # absent: cached by a blocklab before ccache
        cached = inst.manifest["compiler_cache"]  # `make setup` installs ccache
        assert cached is not None and cached["tool"] == "ccache", inst.manifest
        if pg18_8k.manifest.get("compiler_cache") is not None:  # both built with ccache
            assert cached["hits"] > 10 * cached["misses"], cached

"""What a build inherits from its environment: never a parent make's variables (the
README's `make demo` exports MAKELEVEL=1 and MAKEFLAGS, and PostgreSQL generates its
headers only at MAKELEVEL 0), and the compiler variables only through the build key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.model import BuildRequest
from blocklab.postgres import build, sources

# A parent `make -w demo DEMO_ARGS=...` exports these: the override after "--" reaches a
# child make through MAKEFLAGS and would override the child's own variable.
PARENT_MAKE = {
    "MAKELEVEL": "1",
    "MAKEFLAGS": "w -- PROBE=from-parent",
    "MFLAGS": "-w",
    "MAKEOVERRIDES": "${-*-command-variables-*-}",
    "GNUMAKEFLAGS": "--no-print-directory",
}
SHOW = '\t@echo "make level=[$(MAKELEVEL)] flags=[$(MAKEFLAGS)] probe=[$(PROBE)]"\n'
TARGETS = ("all", "install", "install-local", "generated-headers")
MAKEFILE = "PROBE ?= own\n" + "".join(f"{target}:\n{SHOW}" for target in TARGETS)


def _tree_that_reports_its_environment(root: Path) -> Path:
    """A source tree with the shape the build steps expect (configure, a top Makefile,
    the contrib modules) whose every step prints what it inherited."""
    tree = root / "tree"
    made = (*build.COMPILED, *build.INSTALLED_TOO, "src", *(f"contrib/{n}" for n in build.CONTRIB))
    for sub in made:
        (tree / sub).mkdir(parents=True, exist_ok=True)
        (tree / sub / "Makefile").write_text(MAKEFILE)
    configure = tree / "configure"
    shown = " ".join(f"{k}=[${{{k}-unset}}]" for k in PARENT_MAKE)
    configure.write_text(f'#!/bin/sh\necho "configure {shown}"\n')
    configure.chmod(0o755)
    return tree


def test_build_steps_do_not_inherit_a_parent_makes_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PARENT_MAKE.items():
        monkeypatch.setenv(name, value)
    tree = _tree_that_reports_its_environment(tmp_path)
    log_path = tmp_path / "build.log"

    build._compile_and_install(tree, [str(tree / "configure")], log_path, lambda _m: None)

    lines = log_path.read_text().splitlines()
    configure = [line for line in lines if line.startswith("configure ")]
    assert configure == ["configure " + " ".join(f"{k}=[unset]" for k in PARENT_MAKE)]
    makes = [line for line in lines if line.startswith("make level=")]
    compiled, installed = len(build.COMPILED), len(build.COMPILED) + len(build.INSTALLED_TOO)
    assert len(makes) == 1 + compiled + installed + 1 + len(build.CONTRIB), lines
    for line in makes:
        assert line.startswith("make level=[0] "), line
        assert line.endswith(" probe=[own]"), line
        assert "from-parent" not in line and "no-print-directory" not in line, line


def _key(req: BuildRequest) -> str:
    spec = sources.SourceSpec("debian", "18.6", {"kind": "debian", "version": "18.6-3"})
    return build.format_key("18.6", req, build.key_material(req, spec))


def test_compiler_variables_change_the_key_and_make_variables_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (*build.COMPILER_VARIABLES, *build.MAKE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    req = BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=4)
    plain = _key(req)
    assert _key(req) == plain  # the key is a function of its inputs

    for name, value in PARENT_MAKE.items():
        monkeypatch.setenv(name, value)
    assert _key(req) == plain  # they are never passed on, so they do not make another build

    monkeypatch.setenv("CFLAGS", "-O0 -g")
    with_cflags = _key(req)
    assert with_cflags != plain
    monkeypatch.setenv("CFLAGS", "-O1")
    assert _key(req) not in (plain, with_cflags)
    monkeypatch.delenv("CFLAGS")
    assert _key(req) == plain

    monkeypatch.setenv("CC", "/usr/bin/gcc")
    assert _key(req) != plain


NICE_PROBE = """
import os, sys
from blocklab import proc
os.nice(int(sys.argv[1]))
print(proc.run(proc.keeping_niceness(["cat", "/proc/self/autogroup"])).stdout.strip())
own = "cut -d' ' -f19 /proc/self/stat"  # the niceness field
print(proc.run(proc.keeping_niceness(["sh", "-c", own])).stdout.strip())
"""


@pytest.mark.skipif(not proc.AUTOGROUP.exists(), reason="this kernel has no autogroups")
def test_a_build_step_keeps_the_niceness_it_was_started_with_in_its_own_session() -> None:
    """`nice -n 10 blocklab build`: each step runs in a session of its own (its process
    group ends with it), which autogroup scheduling makes a group weighed by its own
    niceness: the step gives its session the caller's. At 0, nothing is added."""
    out = subprocess.run(
        [sys.executable, "-c", NICE_PROBE, "7"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0].endswith(" nice 7"), out  # the session's group
    assert out[1] == "7", out  # and the process itself
    if os.nice(0) == 0:  # at niceness 0 a step is started as it is
        assert proc.keeping_niceness(["make", "-j2"]) == ["make", "-j2"]


def test_the_libraries_the_backend_links_are_made_before_it() -> None:
    """src/backend's Makefile has no rule for libpgcommon_srv.a (only libpgport_srv.a
    waits for the sub-make that makes both): under make -j2 with the compiler cache's
    objects the link came first and failed (CI, a layout build), as the top-level make's
    order never lets it."""
    order = list(build.COMPILED)
    assert order.index("src/port") < order.index("src/backend")
    assert order.index("src/common") < order.index("src/backend")

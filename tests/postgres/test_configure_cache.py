"""configure's shared cache (blocklab.postgres.configure_cache): which builds share one,
and, with PostgreSQL 18's real configure, that a second build reuses the first one's
answers, generates the same headers, and that a cache configure refuses is dropped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.model import BuildRequest
from blocklab.paths import Paths
from blocklab.postgres import build, configure_cache, sources

ARGV = ["./configure", "--prefix=/p/a", "--with-blocksize=8", "--with-wal-blocksize=8",
        "--with-segsize=1", "--with-lz4", "--with-zstd"]  # fmt: skip
VARIABLES = {"PATH": "/usr/bin:/bin"}


def _key(tmp_path: Path, argv: list[str] = ARGV, **changed: object) -> str:
    script = tmp_path / "configure"
    if not script.exists():
        script.write_text("#! /bin/sh\n# configure of some source\n")
    status = tmp_path / "status"
    if not status.exists():
        status.write_text("Package: gcc\n")
    kwargs: dict[str, object] = {"variables": VARIABLES, "compiler": "gcc (Debian 12.2.0)"}
    kwargs.update(changed)
    return configure_cache.key(script, argv, dpkg_status=status, **kwargs)  # type: ignore[arg-type]


def test_builds_that_differ_in_prefix_and_sizes_share_a_cache(tmp_path: Path) -> None:
    same = ["./configure", "--prefix=/p/b", "--with-blocksize=4", "--with-wal-blocksize=4",
            "--with-segsize=2", "--with-lz4", "--with-zstd"]  # fmt: skip
    assert _key(tmp_path) == _key(tmp_path, same)
    assert configure_cache.asked(same) == ["--with-lz4", "--with-zstd"]


def test_what_changes_configures_answers_changes_the_cache(tmp_path: Path) -> None:
    first = _key(tmp_path)
    assert _key(tmp_path, [*ARGV[:-1], "--without-zstd"]) != first
    assert _key(tmp_path, [*ARGV, "--enable-debug"]) != first
    assert _key(tmp_path, variables={**VARIABLES, "CFLAGS": "-O0"}) != first
    assert _key(tmp_path, variables={"PATH": "/usr/lib/ccache:/usr/bin:/bin"}) != first
    assert _key(tmp_path, compiler="clang 14") != first
    (tmp_path / "status").write_text("Package: gcc\n\nPackage: liburing-dev\n")  # installed
    assert _key(tmp_path) != first
    second = _key(tmp_path)
    (tmp_path / "configure").write_text("#! /bin/sh\n# patched\n")
    assert _key(tmp_path) != second


def test_turned_off_by_its_variable() -> None:
    assert configure_cache.wanted({}) and configure_cache.wanted({"BLOCKLAB_CONFIGURE_CACHE": "1"})
    assert not configure_cache.wanted({"BLOCKLAB_CONFIGURE_CACHE": "0"})


def _configure(tree: Path, argv: list[str], shared: Path, log_path: Path) -> str:
    def step(what: str, cmd: list[str]) -> None:
        with open(log_path, "a") as f:
            f.write(f"\n$ {' '.join(cmd)}\n")
        proc.run(cmd, cwd=tree, log_path=log_path, timeout_s=600, unset=build.MAKE_VARIABLES)

    return build._configure(tree, argv, step, lambda _m: None, shared)


def _defines(tree: Path) -> list[str]:
    """pg_config.h without configure's own arguments and the sizes."""
    text = (tree / "src/include/pg_config.h").read_text()
    skip = re.compile(r"^#define (CONFIGURE_ARGS|BLCKSZ|XLOG_BLCKSZ|RELSEG_SIZE) ")
    return [line for line in text.splitlines() if not skip.match(line)]


@pytest.mark.build
def test_a_second_build_reuses_the_answers_and_a_refused_cache_is_dropped(
    paths: Paths, tmp_path: Path
) -> None:
    req = BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8)
    spec = sources.resolve(req, paths, lambda _m: None)
    tree = sources.materialize(spec, paths, tmp_path / "src", lambda _m: None)
    shared, log_path = tmp_path / "shared" / "x.cache", tmp_path / "configure.log"
    argv = build.configure_argv(req, tmp_path / "p8", spec.version)

    assert _configure(tree, argv, shared, log_path) == "started empty"
    assert shared.is_file()  # published for the next build
    eight = _defines(tree)

    four_kb = req.model_copy(update={"block_size_kb": 4})
    four = build.configure_argv(four_kb, tmp_path / "p4", spec.version)
    assert _configure(tree, four, shared, log_path) == "answers reused"
    assert _defines(tree) == eight  # the same answers
    header = (tree / "src/include/pg_config.h").read_text()
    assert "#define BLCKSZ 4096" in header and " '-C' '--prefix=" in header

    # a cache whose CFLAGS differ from this run's: configure refuses it, runs without
    with open(shared, "a") as f:
        f.write("ac_cv_env_CFLAGS_set=set\nac_cv_env_CFLAGS_value='-O0 -g'\n")
    assert _configure(tree, four, shared, log_path) == "failed with the cache, ran without"
    assert "CFLAGS" in log_path.read_text() and _defines(tree) == eight
    assert "-O0 -g" not in shared.read_text()  # the good run's cache replaced it

"""The compiler cache's variables and its stats log (ccache's own output, recorded)."""

from __future__ import annotations

from pathlib import Path

from blocklab.postgres import compiler_cache

# `gcc -O2 -c a.c` twice under CCACHE_STATSLOG, ccache 4.7.5 (Debian 12): a miss, a hit.
STATS_LOG = """# a.c
cache_miss
direct_cache_miss
local_storage_miss
local_storage_read_miss
local_storage_read_miss
local_storage_write
local_storage_write
preprocessed_cache_miss
# a.c
direct_cache_hit
local_storage_hit
local_storage_read_hit
local_storage_read_hit
"""


def _links(tmp_path: Path) -> Path:
    links = tmp_path / "links"
    links.mkdir()
    (links / "gcc").symlink_to("/usr/bin/ccache")
    return links


def test_the_links_go_first_on_path_and_the_cache_and_its_log_are_blocklabs(
    tmp_path: Path,
) -> None:
    links = _links(tmp_path)
    env = compiler_cache.build_env(
        tmp_path / "ccache", tmp_path / "work", links, {"PATH": "/usr/bin:/bin"}
    )
    assert env["PATH"] == f"{links}:/usr/bin:/bin"
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache")
    assert env["CCACHE_BASEDIR"] == str(tmp_path / "work")  # builds compile in their own dirs
    assert env["CCACHE_STATSLOG"] == str(tmp_path / "work" / compiler_cache.STATS_LOG_NAME)


def test_without_ccache_or_when_turned_off_a_build_gets_nothing(tmp_path: Path) -> None:
    links = _links(tmp_path)
    missing = tmp_path / "none"
    assert compiler_cache.build_env(tmp_path, tmp_path, missing, {"PATH": "/bin"}) == {}
    off = {"PATH": "/bin", compiler_cache.OFF_VARIABLE: "0"}
    assert compiler_cache.build_env(tmp_path, tmp_path, links, off) == {}
    assert compiler_cache.summary({}) is None


def test_a_stats_log_counts_each_compilation_once() -> None:
    assert compiler_cache.count(STATS_LOG) == {"hits": 1, "misses": 1}
    assert compiler_cache.count("") == {"hits": 0, "misses": 0}


def test_the_summary_reads_the_builds_stats_log(tmp_path: Path) -> None:
    env = compiler_cache.build_env(tmp_path / "c", tmp_path, _links(tmp_path), {"PATH": "/bin"})
    (tmp_path / compiler_cache.STATS_LOG_NAME).write_text(STATS_LOG)
    assert compiler_cache.summary(env) == {"tool": "ccache", "hits": 1, "misses": 1}


def test_by_default_only_a_build_that_shares_objects_goes_through_the_cache(
    tmp_path: Path,
) -> None:
    links = _links(tmp_path)
    for setting, shares, through in [
        (None, True, True), (None, False, False),  # the default: a cold cache costs CPU
        ("1", False, True), ("1", True, True),  # every build
        ("0", True, False), ("0", False, False),  # none
    ]:  # fmt: skip
        environ = {"PATH": "/bin"} | ({compiler_cache.OFF_VARIABLE: setting} if setting else {})
        env = compiler_cache.build_env(tmp_path, tmp_path, links, environ, shares_objects=shares)
        assert bool(env) is through, (setting, shares)
        assert compiler_cache.wanted(shares, environ) is through


def test_builds_that_differ_only_in_link_order_or_patches_share_objects() -> None:
    from blocklab.model import BuildRequest

    plain = BuildRequest(pg="18")
    assert plain.shares_objects_with(BuildRequest(pg="18", layout_seed=3))
    assert plain.shares_objects_with(BuildRequest(pg="18", patches=("a.patch",)))
    assert not plain.shares_objects_with(plain)  # itself: nothing to share
    assert not plain.shares_objects_with(BuildRequest(pg="18", block_size_kb=4))
    assert not plain.shares_objects_with(BuildRequest(pg="18", configure_args=("--with-icu",)))

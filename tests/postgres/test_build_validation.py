"""Bad build input is refused with exit 2, naming the option and the allowed values,
before anything is downloaded; and the pure parsers behind builds and sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blocklab.cli import main
from blocklab.commands.build import unused_builds
from blocklab.model import BuildRequest
from blocklab.postgres import build, sources, throwaway
from blocklab.postgres.installation import Installation


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BLOCKLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BLOCKLAB_CACHE", str(cache))
    return cache


def _unreadable(tmp_path: Path) -> str:
    p = tmp_path / "unreadable.patch"
    p.mkdir()  # a directory: not a readable patch file, even for root
    return str(p)


BAD_INPUTS = [
    (["--block-size", "3"], "--block-size", "1, 2, 4, 8, 16, 32"),
    (["--block-size", "64"], "--block-size", "1, 2, 4, 8, 16, 32"),
    (["--block-size", "0"], "--block-size", "1, 2, 4, 8, 16, 32"),
    (["--wal-block-size", "128"], "--wal-block-size", "1, 2, 4, 8, 16, 32, 64"),
    (["--wal-block-size", "3"], "--wal-block-size", "power of two"),
    (["--wal-block-size", "12"], "--wal-block-size", "1, 2, 4, 8, 16, 32, 64"),
    (["--segsize-gb", "3"], "--segsize-gb", "1, 2, 4, 8, 16, 32"),
    (["--pg", "99"], "--pg", "13, 14, 15, 16, 17, 18, 19"),
    (["--pg", "eighteen"], "--pg", "13, 14, 15, 16, 17, 18, 19"),
    (["--source", "/nonexistent/postgresql-18.1.tar.bz2"], "--source", "tarball"),
    (["--source", "/nonexistent/tree"], "--source", "debian"),
    (["--patch", "/nonexistent/fix.patch"], "--patch", "/nonexistent/fix.patch"),
]


@pytest.mark.parametrize(("args", "flag", "allowed"), BAD_INPUTS)
def test_bad_input_exits_2_naming_the_flag(
    args: list[str], flag: str, allowed: str, empty_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and allowed in err, err
    assert not empty_cache.exists(), "nothing may be downloaded or built for bad input"


def test_unreadable_patch(
    tmp_path: Path, empty_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", "--patch", _unreadable(tmp_path)]) == 2
    assert "--patch" in capsys.readouterr().err
    assert not empty_cache.exists()


def test_configured_tree_is_refused(tmp_path: Path, empty_cache: Path) -> None:
    tree = tmp_path / "pg"
    tree.mkdir()
    (tree / "configure").write_text("#!/bin/sh\n")
    (tree / "config.status").write_text("")
    assert main(["build", "--source", str(tree)]) == 2
    assert not empty_cache.exists()


def test_non_integer_block_size_is_exit_2(
    empty_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", "--block-size", "4k"]) == 2
    assert "--block-size" in capsys.readouterr().err


def test_validate_accepts_good_requests() -> None:
    build.validate(BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=64))
    build.validate(BuildRequest(pg="15", block_size_kb=32, wal_block_size_kb=1, segsize_gb=2))


# --- apt configuration parsing --------------------------------------------------------
DEB822 = """\
Types: deb
# a comment
URIs: http://archive.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://archive.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://other.example/debian
Suites: bookworm
Components: main
"""


def test_deb822_and_main_archive() -> None:
    entries = sources.parse_deb822(DEB822)
    assert [e.uri for e in entries] == [
        "http://archive.example/debian",
        "http://archive.example/debian-security",
    ]
    archives = sources.main_archives(entries, "bookworm")
    assert [a.uri for a in archives] == ["http://archive.example/debian"]
    text = sources.deb_src_list(archives, sources.candidate_suites("bookworm"))
    lines = text.splitlines()
    assert lines[0] == (
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://archive.example/debian bookworm main"
    )
    assert [ln.split()[-2] for ln in lines] == [
        "bookworm",
        "bookworm-backports",
        "stable",
        "stable-backports",
        "testing",
        "unstable",
    ]


def test_one_line_sources_list() -> None:
    text = (
        "# comment\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://a.example/debian/ trixie main contrib\n"
        "deb-src http://a.example/debian trixie main\n"
        "deb http://s.example/debian-security trixie-security main\n"
    )
    entries = sources.parse_one_line(text)
    assert len(entries) == 2
    assert entries[0].uri == "http://a.example/debian"
    assert entries[0].signed_by == "/k.gpg"
    assert entries[0].components == ("main", "contrib")
    assert [e.uri for e in sources.main_archives(entries, "trixie")] == ["http://a.example/debian"]


SHOWSRC = """\
Package: postgresql-18
Binary: postgresql-18, postgresql-client-18
Version: 18.6-3
Checksums-Sha256:
 aaaa 4752 postgresql-18_18.6-3.dsc
 bbbb 22632314 postgresql-18_18.6.orig.tar.bz2

Package: postgresql-18
Version: 18.5-1
Checksums-Sha256:
 cccc 4700 postgresql-18_18.5-1.dsc
"""


def test_showsrc_records_and_versions() -> None:
    recs = sources.parse_showsrc(SHOWSRC)
    assert [r["Version"] for r in recs] == ["18.6-3", "18.5-1"]
    assert sources.dsc_checksum(recs[0]) == "aaaa"
    assert sources.newest(list(reversed(recs)))["Version"] == "18.6-3"
    assert sources.upstream_version("17.11-0+deb13u1") == "17.11"
    assert sources.upstream_version("1:18.6-3") == "18.6"
    assert sources.read_codename('NAME="Debian"\nVERSION_CODENAME=bookworm\n') == "bookworm"


def test_first_failing_hunk_is_named() -> None:
    out = (
        "checking file src/include/pg_config_manual.h\n"
        "checking file src/backend/main/main.c\n"
        "Hunk #1 succeeded at 10.\n"
        "Hunk #2 FAILED at 120.\n"
        "1 out of 2 hunks FAILED\n"
    )
    assert sources.first_failure(out) == "src/backend/main/main.c: Hunk #2 FAILED at 120."
    assert "can't find file" in sources.first_failure("can't find file to patch at input line 3")


# --- verification and prune ------------------------------------------------------------
CONTROLDATA = """\
pg_control version number:            1800
Database block size:                  4096
Blocks per segment of large relation: 262144
WAL block size:                       4096
Bytes per WAL segment:                16777216
"""


def _inst(bs: int, wal: int, **manifest: object) -> Installation:
    return Installation(Path("/x"), "k", "18.6", bs, wal, 1, manifest=dict(manifest))


def test_controldata_geometry_check() -> None:
    control = throwaway.parse_controldata(CONTROLDATA)
    assert build.check_geometry(control, _inst(4096, 4096)) == []
    problems = build.check_geometry(control, _inst(8192, 4096))
    assert len(problems) == 2  # page size and blocks per segment
    assert "Database block size" in problems[0]


def test_unused_builds_keeps_what_variants_or_runs_use() -> None:
    req4 = BuildRequest(block_size_kb=4, wal_block_size_kb=4).model_dump(mode="json")
    req8 = BuildRequest().model_dump(mode="json")
    used_by_variant = Installation(Path("/a"), "ka", "18.6", 4096, 4096, manifest={"request": req4})
    used_by_run = Installation(Path("/b"), "kb", "18.5", 8192, 8192, manifest={"request": req8})
    unused = Installation(
        Path("/c"), "kc", "18.6", 2048, 2048, manifest={"request": {"block_size_kb": 2}}
    )
    unknown = Installation(Path("/d"), "kd", "18.6", 8192, 8192, manifest={})
    found = unused_builds([used_by_variant, used_by_run, unused, unknown], [req4], '{"b":"kb"}')
    assert [b.key for b in found] == ["kc"]


def test_key_format_and_material_differ_by_geometry() -> None:
    spec = sources.SourceSpec("debian", "18.6", {"kind": "debian", "version": "18.6-3"})
    r4 = BuildRequest(block_size_kb=4, wal_block_size_kb=4)
    r8 = BuildRequest(block_size_kb=8, wal_block_size_kb=4)
    k4 = build.format_key("18.6", r4, build.key_material(r4, spec))
    k8 = build.format_key("18.6", r8, build.key_material(r8, spec))
    assert k4.startswith("pg18.6-bs4k-wal4k-") and k8.startswith("pg18.6-bs8k-wal4k-")
    assert k4.split("-")[-1] != k8.split("-")[-1]


def test_resolved_debian_version_sticks_once_downloaded(tmp_path: Path) -> None:
    from blocklab.paths import Paths

    apt = sources.DebianApt(Paths(home=tmp_path, cache=tmp_path / "cache", results=tmp_path))
    apt.root.mkdir(parents=True)
    record = {"Package": "postgresql-18", "Version": "18.6-3"}
    stale = {"postgresql-18": {"lists": "an older index", "record": record}}
    apt.resolved.write_text(json.dumps(stale))
    assert apt.remembered("postgresql-18") is None  # indexes changed, nothing downloaded
    done = apt.downloads / "postgresql-18_18.6-3" / ".complete"
    done.parent.mkdir(parents=True)
    done.write_text("")
    assert apt.remembered("postgresql-18") == record  # downloaded: keep the same source
    assert apt.remembered("postgresql-17") is None

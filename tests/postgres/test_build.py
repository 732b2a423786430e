"""Real PostgreSQL builds: verified geometry, cache hits, keys, patches and failures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.errors import BuildError, UserError
from blocklab.model import BuildRequest, Variant
from blocklab.paths import Paths, ensure_dir
from blocklab.postgres import build, source_trees, sources, throwaway
from blocklab.postgres.installation import MANIFEST_NAME, Installation

pytestmark = pytest.mark.build

REQ_4K = BuildRequest(pg="18", block_size_kb=4, wal_block_size_kb=8)  # pg18_4k's


def _controldata_of_fresh_cluster(inst: Installation, paths: Paths) -> dict[str, str]:
    """initdb a cluster as the server user, independently of build.verify, and read it."""
    user = build.server_user()
    base = Path(os.path.join(ensure_dir(paths.work), "test-build-initdb"))
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    os.chown(base, user.uid, user.gid)
    try:
        data = base / "data"
        proc.run([inst.bin("initdb"), "-D", data, "--no-sync"], user=user, cwd=base)
        out = proc.run([inst.bin("pg_controldata"), data], user=user, cwd=base).stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return throwaway.parse_controldata(out)


# Page size and WAL block size one at a time, each against the other's default: a build
# that swapped or ignored one of them fails here.
@pytest.mark.parametrize(
    ("fixture", "page_bytes", "wal_bytes"), [("pg18_4k", 4096, 8192), ("pg18_wal4k", 8192, 4096)]
)
def test_a_build_has_the_pages_and_wal_blocks_it_was_asked_for(
    fixture: str, page_bytes: int, wal_bytes: int, request: pytest.FixtureRequest, paths: Paths
) -> None:
    inst: Installation = request.getfixturevalue(fixture)
    assert inst.major == 18
    control = _controldata_of_fresh_cluster(inst, paths)
    assert control["Database block size"] == str(page_bytes)
    assert control["WAL block size"] == str(wal_bytes)
    manifest = json.loads((inst.prefix / MANIFEST_NAME).read_text())
    for key in ("key", "version", "source", "patches", "configure", "compiler", "created_at"):
        assert manifest[key] not in (None, ""), key
    assert manifest["verification"]["database_block_size"] == page_bytes
    assert manifest["verification"]["server_block_size_wal_block_size"] == (
        f"{page_bytes}|{wal_bytes}"
    )
    assert f"--with-blocksize={page_bytes // 1024}" in manifest["configure"]
    assert f"--with-wal-blocksize={wal_bytes // 1024}" in manifest["configure"]
    assert manifest["size_bytes"] > 10 * 1024**2
    for tool in build.TOOLS:
        assert inst.bin(tool).is_file(), tool
    pkglib = Path(proc.run([inst.bin("pg_config"), "--pkglibdir"]).stdout.strip())
    share = Path(proc.run([inst.bin("pg_config"), "--sharedir"]).stdout.strip())
    assert pkglib.is_relative_to(inst.prefix) and share.is_relative_to(inst.prefix)
    for ext in build.CONTRIB:
        assert (pkglib / f"{ext}.so").is_file(), ext
        assert list((share / "extension").glob(f"{ext}--*.sql")), ext


def test_install_is_readable_by_others(pg18_4k: Installation) -> None:
    for dirpath, _dirnames, filenames in os.walk(pg18_4k.prefix):
        assert os.stat(dirpath).st_mode & 0o755 == 0o755, dirpath
        for name in filenames:
            assert os.stat(os.path.join(dirpath, name)).st_mode & 0o444 == 0o444, name


def test_second_request_is_a_cache_hit(pg18_4k: Installation, paths: Paths) -> None:
    marker = pg18_4k.prefix / build.MARKER_NAME
    before = marker.stat().st_mtime_ns
    messages: list[str] = []
    again = build.ensure_build(REQ_4K, paths, log=messages.append)
    assert again.key == pg18_4k.key and again.prefix == pg18_4k.prefix
    assert build.build_key(REQ_4K, paths) == pg18_4k.key
    assert marker.stat().st_mtime_ns == before
    assert not [m for m in messages if m.startswith(("building", "configure", "make"))], messages
    assert again.manifest["created_at"] == pg18_4k.manifest["created_at"]


def test_cached_builds_lists_it(pg18_4k: Installation, paths: Paths) -> None:
    assert pg18_4k.key in [b.key for b in build.cached_builds(paths)]


def test_patch_and_geometry_change_the_key(paths: Paths, tmp_path: Path) -> None:
    p1 = tmp_path / "a.patch"
    p1.write_text("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+y\n")
    p2 = tmp_path / "b.patch"
    p2.write_text("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+z\n")
    plain = build.build_key(REQ_4K, paths)
    with_p1 = build.build_key(REQ_4K.model_copy(update={"patches": (str(p1),)}), paths)
    with_p2 = build.build_key(REQ_4K.model_copy(update={"patches": (str(p2),)}), paths)
    both = build.build_key(REQ_4K.model_copy(update={"patches": (str(p1), str(p2))}), paths)
    swapped = build.build_key(REQ_4K.model_copy(update={"patches": (str(p2), str(p1))}), paths)
    wal4 = build.build_key(REQ_4K.model_copy(update={"wal_block_size_kb": 4}), paths)
    seg2 = build.build_key(REQ_4K.model_copy(update={"segsize_gb": 2}), paths)
    conf = build.build_key(REQ_4K.model_copy(update={"configure_args": ("--with-lz4",)}), paths)
    keys = [plain, with_p1, with_p2, both, swapped, wal4, seg2, conf]
    assert len(set(keys)) == len(keys), keys


def test_an_edited_patch_is_another_build_of_the_same_variant(paths: Paths, tmp_path: Path) -> None:
    """Why the summary checks a variant's builds (analysis/mixed_inputs.py): a patch
    edited in place between two sessions of one experiment keeps the variant (its path)
    and changes the build (its contents)."""
    patch = tmp_path / "a.patch"
    patch.write_text("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+y\n")
    variant = Variant(build=REQ_4K.model_copy(update={"patches": (str(patch),)}))
    first = build.build_key(variant.build, paths)
    patch.write_text("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+z\n")
    assert Variant(build=variant.build).variant_id == variant.variant_id
    assert build.build_key(variant.build, paths) != first


def test_debian_source_is_found_in_the_machines_apt_archives(paths: Paths) -> None:
    spec = sources.resolve_debian("18", paths, lambda _m: None)
    assert spec.version.startswith("18.")
    assert spec.identity["package"] == "postgresql-18"
    assert len(spec.identity["dsc_sha256"]) == 64
    text = (sources.DebianApt(paths).etc / "sources.list").read_text()
    assert text.startswith("deb-src ") and "signed-by=" in text


@pytest.mark.build  # unpacks PostgreSQL 18's Debian source (9 CPU s), as a build does
def test_a_debian_source_is_unpacked_once_and_copied_for_each_build(
    paths: Paths, tmp_path: Path
) -> None:
    spec = sources.resolve_debian("18", paths, lambda _m: None)
    package, version = spec.location.split("=", 1)
    apt = sources.DebianApt(paths)
    with sources.file_lock(apt.root / ".lock"):
        dsc = apt.download(package, version, lambda _m: None)
    trees, said = tmp_path / "trees", []
    first = source_trees.copy_of(dsc, trees, tmp_path / "a", said.append)
    second = source_trees.copy_of(dsc, trees, tmp_path / "b", said.append)
    assert [m.split()[0] for m in said] == ["extracting", "copying", "copying"]
    kept = trees / dsc.stem
    for rel in ("configure", "src/include/pg_config_manual.h", "src/backend/Makefile"):
        assert (
            (first / rel).read_bytes() == (second / rel).read_bytes() == (kept / rel).read_bytes()
        )
    (first / "configure").write_text("a build's own copy\n")
    assert (kept / "configure").read_bytes() == (second / "configure").read_bytes()


# --- small trees: patches and failures (fast, no compile of PostgreSQL) ---------------
@pytest.fixture(autouse=True)
def _forget_small_tree_builds(paths: Paths) -> Iterator[None]:
    """The small trees below are version 18.99: remove their locks and logs afterwards."""
    yield
    for leftover in [
        *paths.builds.glob(".pg18.99-*.lock"),
        *(paths.cache / "logs").glob("pg18.99-*.log"),
    ]:
        leftover.unlink(missing_ok=True)


def _fake_tree(root: Path, configure: str = "#!/bin/sh\nexit 1\n") -> Path:
    tree = root / "pgtree"
    (tree / "src").mkdir(parents=True)
    (tree / "configure.ac").write_text("AC_INIT([PostgreSQL], [18.99], [x])\n")
    (tree / "configure").write_text(configure)
    (tree / "configure").chmod(0o755)
    (tree / "src" / "file.c").write_text("int a = 1;\nint b = 2;\nint c = 3;\n")
    return tree


def _patch(path: Path, old: str, new: str) -> Path:
    path.write_text(
        f"--- a/src/file.c\n+++ b/src/file.c\n@@ -1,3 +1,3 @@\n int a = 1;\n-{old}\n+{new}\n"
        " int c = 3;\n"
    )
    return path


def test_patch_that_does_not_apply_names_patch_and_hunk(paths: Paths, tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path)
    good = _patch(tmp_path / "good.patch", "int b = 2;", "int b = 20;")
    bad = _patch(tmp_path / "bad.patch", "int b = 2;", "int b = 200;")  # b is 20 by then
    req = BuildRequest(pg="18", source=str(tree), patches=(str(good), str(bad)))
    with pytest.raises(UserError) as exc:
        build.ensure_build(req, paths, log=lambda _m: None)
    msg = str(exc.value)
    assert "--patch" in msg and "bad.patch" in msg and "good.patch" not in msg
    assert "src/file.c" in msg and "Hunk #1 FAILED" in msg
    assert not (paths.builds / build.build_key(req, paths)).exists()


def test_failed_build_shows_log_tail_and_leaves_nothing_usable(
    paths: Paths, tmp_path: Path
) -> None:
    tree = _fake_tree(
        tmp_path, "#!/bin/sh\necho 'checking things... no such compiler' >&2\nexit 3\n"
    )
    req = BuildRequest(pg="18", source=str(tree))
    key = build.build_key(req, paths)
    with pytest.raises(BuildError) as exc:
        build.ensure_build(req, paths, log=lambda _m: None)
    msg = str(exc.value)
    log_path = paths.cache / "logs" / f"{key}.log"
    assert "no such compiler" in msg and str(log_path) in msg and "exit code 3" in msg
    assert log_path.is_file()
    assert not (paths.builds / key).exists()
    assert not (paths.cache / "work" / key).exists()


def test_incomplete_build_dir_is_removed_before_building(paths: Paths, tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path)
    req = BuildRequest(pg="18", source=str(tree))
    key = build.build_key(req, paths)
    leftover = ensure_dir(paths.builds / key / "bin")
    (leftover / "postgres").write_text("half-built")
    with pytest.raises(BuildError):
        build.ensure_build(req, paths, log=lambda _m: None)
    assert not (paths.builds / key).exists()


def test_tree_and_tarball_identity_follow_content(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path)
    first = sources.resolve_tree(str(tree))
    assert first.version == "18.99"
    (tree / "src" / "file.c").write_text("int a = 2;\n")
    assert sources.resolve_tree(str(tree)).identity != first.identity
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    proc.run(["git", "init", "-q", tree])
    proc.run(["git", "-C", tree, "add", "."])
    proc.run(["git", "-C", tree, "commit", "-qm", "x"], env=env)
    clean = sources.resolve_tree(str(tree))
    assert len(clean.identity["commit"]) == 40
    (tree / "src" / "file.c").write_text("int a = 3;\n")
    assert sources.resolve_tree(str(tree)).identity["diff_sha256"] != clean.identity["diff_sha256"]
    tarball = tmp_path / "postgresql-18.99.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(tree, arcname="postgresql-18.99")
    spec = sources.resolve_tarball(str(tarball))
    assert spec.version == "18.99" and len(spec.identity["sha256"]) == 64


def test_second_process_waits_for_the_lock_then_hits_the_cache(
    paths: Paths, tmp_path: Path
) -> None:
    """While one holder has the build's lock, a second ensure_build waits; when the holder
    finishes the build, the waiter returns it without building again."""
    tree = _fake_tree(tmp_path)  # its configure fails: building it would raise BuildError
    req = BuildRequest(pg="18", source=str(tree), block_size_kb=4, wal_block_size_kb=4)
    key = build.build_key(req, paths)
    prefix = paths.builds / key
    messages: list[str] = []
    outcome: list[object] = []

    def second() -> None:
        try:
            outcome.append(build.ensure_build(req, paths, log=messages.append))
        except Exception as e:  # noqa: BLE001 - reported through `outcome`
            outcome.append(e)

    with sources.file_lock(paths.builds / f".{key}.lock"):
        waiter = threading.Thread(target=second)
        waiter.start()
        deadline = time.monotonic() + 30
        while not messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert messages and messages[0].startswith("waiting for another"), messages
        assert not outcome and waiter.is_alive()
        ensure_dir(prefix)  # the holder "finishes" the build: manifest, then marker
        manifest = {"key": key, "version": "18.99", "block_size_bytes": 4096,
                    "wal_block_size_bytes": 4096, "segsize_gb": 1}  # fmt: skip
        (prefix / MANIFEST_NAME).write_text(json.dumps(manifest))
        (prefix / build.MARKER_NAME).write_text("done\n")
    waiter.join(60)
    try:
        assert len(outcome) == 1 and isinstance(outcome[0], Installation), outcome
        assert outcome[0].key == key and outcome[0].block_size_bytes == 4096
        assert messages == [messages[0]], messages  # nothing built after the wait
    finally:
        build.remove_build(prefix)


# --- the `builds` command ----------------------------------------------------------------
def _fake_complete_build(builds_dir: Path, key: str, req: BuildRequest) -> Path:
    prefix = ensure_dir(builds_dir / key)
    manifest = {"key": key, "version": "18.99", "block_size_bytes": req.block_size_kb * 1024,
                "wal_block_size_bytes": req.wal_block_size_kb * 1024, "segsize_gb": 1,
                "request": req.model_dump(mode="json"), "size_bytes": 1,
                "created_at": "2025-01-01T00:00:00+00:00", "patches": []}  # fmt: skip
    (prefix / MANIFEST_NAME).write_text(json.dumps(manifest))
    (prefix / build.MARKER_NAME).write_text("done\n")
    return prefix


def _results_with_variant(results: Path, req: BuildRequest) -> None:
    from blocklab.model import Variant
    from blocklab.store import ResultsDB

    v = Variant(build=req)
    with ResultsDB(results) as db:
        db.upsert_experiment(
            "e1", description="", spec={}, seed=1, reference=v.variant_id,
            created_at="2025-01-01T00:00:00+00:00", host={},
            variants=[(v.variant_id, "v", v.canonical_json(), {})],
        )  # fmt: skip


def test_builds_lists_and_prune_removes_only_unused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from blocklab.cli import main

    monkeypatch.setenv("BLOCKLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "cache"))
    builds_dir = tmp_path / "cache" / "builds"
    used_req = BuildRequest(block_size_kb=4, wal_block_size_kb=4)
    used = _fake_complete_build(builds_dir, "pg18.99-used", used_req)
    unused = _fake_complete_build(builds_dir, "pg18.99-unused", BuildRequest(block_size_kb=16))
    _results_with_variant(tmp_path / "results", used_req)

    assert main(["builds"]) == 0
    out = capsys.readouterr().out
    assert "pg18.99-used" in out and "pg18.99-unused" in out and "16k/8k/1G" in out

    assert main(["builds", "--prune", "--dry-run", "--results", str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert "would remove pg18.99-unused" in out and "pg18.99-used " not in out
    # what it cannot see: the experiments of other results databases (issue 35)
    assert f"counts the experiments of {tmp_path / 'results'} only" in err
    assert "another results directory or a fleet's PostgreSQL database" in err
    assert unused.exists()

    assert main(["builds", "--prune", "--results", str(tmp_path / "results")]) == 0
    assert not unused.exists() and used.is_dir()
    assert main(["builds", "--prune", "--results", str(tmp_path / "nowhere")]) == 2
    assert used.is_dir()


def test_build_command_prints_prefix_and_key_from_the_cache(
    pg18_4k: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    from blocklab.cli import main

    assert main(["build", "--pg", "18", "--block-size", "4", "--wal-block-size", "8"]) == 0
    captured = capsys.readouterr()
    assert f"prefix  {pg18_4k.prefix}" in captured.out
    assert f"key     {pg18_4k.key}" in captured.out
    assert "building" not in captured.err


def test_a_terminated_build_ends_what_it_started(paths: Paths, tmp_path: Path) -> None:
    """`blocklab build` killed with SIGTERM (as tests/prebuild.py ends its builds) ends its
    configure or make too: they run in a session of their own, out of reach of a signal
    to the caller's process group."""
    pid_file = tmp_path / "configure.pid"
    tree = _fake_tree(tmp_path, f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    argv = [sys.executable, "-m", "blocklab.cli", "build", "--source", str(tree)]
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.is_file() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "configure never started"
            time.sleep(0.1)
        configure = int(pid_file.read_text())
        child.terminate()
        child.wait(timeout=60)
        deadline = time.monotonic() + 15
        while proc.pid_alive(configure):
            assert time.monotonic() < deadline, "configure outlived its blocklab build"
            time.sleep(0.1)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

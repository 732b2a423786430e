"""PostgreSQL builds at any page and WAL block size: keyed, cached, locked and verified.

    validate(req)                      bad input -> UserError, before anything is fetched
    build_key(req, paths)              the cache key, without building
    ensure_build(req, paths, log=...)  an Installation, built once and then cached

A build lives in `paths.builds/<key>/` (the install prefix). Its manifest
(`installation.MANIFEST_NAME`) is written after verification and the completion marker
last; a directory without the marker is garbage and is removed before building again.
An flock on `paths.builds/.<key>.lock` makes a second process wait, then hit the cache.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from blocklab import faults, proc
from blocklab.errors import BuildError, CommandError, UserError
from blocklab.model import BuildRequest
from blocklab.paths import Paths, ensure_dir, tree_size_bytes
from blocklab.postgres import (
    cluster,
    compiler_cache,
    configure_cache,
    link_order,
    settings_catalogue,
    sources,
    throwaway,
)
from blocklab.postgres.installation import (
    FEATURES,
    MANIFEST_NAME,
    Installation,
    features_of,
    major_of,
)
from blocklab.postgres.throwaway import log_tail

Log = Callable[[str], None]

RECIPE_VERSION = 2  # bump when the build steps change what gets installed
MARKER_NAME = ".blocklab-complete"
BUILD_LOG_NAME = "blocklab-build.log"
CONTRIB = ("pageinspect", "pgstattuple")
TOOLS = ("postgres", "initdb", "pg_ctl", "pg_controldata", "pg_waldump", "psql", "pgbench")
# What a build compiles and installs (recipe 2): the server with what initdb and a session
# load (encoding conversions, snowball stemmers, PL/pgSQL, time zones, the replication
# modules), libpq, the tools blocklab runs, pg_dump/pg_restore (a user's dump), pg_config,
# pg_resetwal and pg_test_fsync; not ecpg, the other client programs or the regression
# drivers (recipe 1, the top-level make, built those too). src/port and src/common come
# first, as in the top-level make: src/backend's Makefile links libpgcommon_srv.a with no
# rule to make it (only libpgport_srv.a waits for the sub-make that makes both), so under
# make -j2 the link raced their sub-make and lost when the objects came from the compiler
# cache ("No rule to make target '../../src/common/libpgcommon_srv.a'").
COMPILED = (
    "src/port", "src/common",
    "src/backend", "src/backend/utils/mb/conversion_procs", "src/backend/snowball",
    "src/backend/replication/libpqwalreceiver", "src/backend/replication/pgoutput",
    "src/timezone", "src/pl", "src/interfaces/libpq",
    *(f"src/bin/{t}" for t in TOOLS[1:]), "src/bin/pg_dump", "src/bin/pg_config",
    "src/bin/pg_resetwal", "src/bin/pg_test_fsync",
)  # fmt: skip
# installed as the top-level make install did, for extensions built against the install
INSTALLED_TOO = ("src/include", "src/makefiles", "config")
LLVM_DIR = "src/backend/jit/llvm"  # compiled too when configured --with-llvm
LIBURING_SINCE_MAJOR = 18  # --with-liburing (io_method = io_uring) exists from 18
# A parent make (the README's `make demo`) exports these; PostgreSQL's Makefile.global
# generates its headers only at MAKELEVEL 0, so a build must never inherit them.
MAKE_VARIABLES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "GNUMAKEFLAGS")
# Variables configure and make read that change the binaries: part of the build key.
COMPILER_VARIABLES = (
    "CC", "CPP", "CFLAGS", "CPPFLAGS", "LDFLAGS", "LDFLAGS_EX", "LDFLAGS_SL", "LIBS",
    "CXX", "CXXFLAGS", "CLANG", "LLVM_CONFIG", "BITCODE_CFLAGS", "BITCODE_CXXFLAGS",
    "COPT", "PROFILE", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR",
)  # fmt: skip


# --- validation and key ----------------------------------------------------------------
def validate(req: BuildRequest) -> None:
    """Raise UserError for an unknown major, a missing source path or an unreadable patch.
    (Block sizes and segment size are checked by the BuildRequest model itself.)"""
    sources.validate_source(req)
    for p in req.patches:
        path = Path(p)
        if not path.is_file():
            raise UserError(f"--patch: no such file {p!r}")
        try:
            with open(path, "rb") as f:
                f.read(1)
        except OSError as e:
            raise UserError(f"--patch: cannot read {p!r}: {e.strerror}") from None


@functools.cache
def compiler_version() -> str:
    cc = os.environ.get("CC", "gcc")
    try:
        out = proc.run([cc, "--version"], timeout_s=60).stdout
    except (CommandError, OSError) as e:
        raise BuildError(f"no working C compiler ({cc}): {e}; run `make setup`") from None
    return out.splitlines()[0].strip() if out else cc


@functools.cache
def icu_available() -> bool:
    res = proc.run(["pkg-config", "--exists", "icu-uc", "icu-i18n"], check=False, timeout_s=60)
    return res.returncode == 0


def configured_features(major: int) -> tuple[str, ...]:
    """The optional libraries every build of this PostgreSQL major is configured with:
    lz4 and zstd (wal_compression, TOAST compression), and liburing from PostgreSQL 18
    (io_method = io_uring). `make setup` installs their Debian -dev packages."""
    return FEATURES if major >= LIBURING_SINCE_MAJOR else FEATURES[:2]


def configure_argv(req: BuildRequest, prefix: Path, version: str = "") -> list[str]:
    """configure's argv; `version` is the source's (the request's major when empty).
    The feature flags come before configure_args, so a user's --without-lz4 wins."""
    argv = [
        "./configure",
        f"--prefix={prefix}",
        f"--with-blocksize={req.block_size_kb}",
        f"--with-wal-blocksize={req.wal_block_size_kb}",
        f"--with-segsize={req.segsize_gb}",
    ]
    if not icu_available() and "--with-icu" not in req.configure_args:
        argv.append("--without-icu")
    argv += [f"--with-{name}" for name in configured_features(major_of(version or req.pg))]
    return argv + list(req.configure_args)


def key_material(req: BuildRequest, spec: sources.SourceSpec) -> dict[str, Any]:
    """Everything that makes two builds differ. The prefix is left out (it is the key).
    The feature flags (--with-lz4 --with-zstd, --with-liburing from 18) are in
    "configure", so builds made before they were added have other keys and are not
    reused: ensure_build makes a new build beside them (`blocklab builds --prune` removes
    the old ones once no stored run names them)."""
    return {
        "recipe": RECIPE_VERSION,
        "source": spec.identity,
        "block_size_kb": req.block_size_kb,
        "wal_block_size_kb": req.wal_block_size_kb,
        "segsize_gb": req.segsize_gb,
        "configure": configure_argv(req, Path("PREFIX"), spec.version)[1:],
        "patches": [p["sha256"] for p in sources.patch_identity(req.patches)],
        "compiler": compiler_version(),
        "environment": compiler_environment(),
        "contrib": list(CONTRIB),
    } | ({"layout_seed": req.layout_seed} if req.layout_seed is not None else {})


def compiler_environment() -> dict[str, str]:
    """The inherited variables that change what configure and make produce."""
    return {k: os.environ[k] for k in COMPILER_VARIABLES if k in os.environ}


def format_key(version: str, req: BuildRequest, material: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    name = "".join(c if c.isalnum() or c in ".-" else "-" for c in version) or "x"
    layout = f"-layout{req.layout_seed}" if req.layout_seed is not None else ""
    return f"pg{name}-bs{req.block_size_kb}k-wal{req.wal_block_size_kb}k{layout}-{digest[:12]}"


def _resolve(req: BuildRequest, paths: Paths, log: Log) -> tuple[sources.SourceSpec, str]:
    validate(req)
    spec = sources.resolve(req, paths, log)
    return spec, format_key(spec.version or req.pg, req, key_material(req, spec))


def build_key(req: BuildRequest, paths: Paths, *, log: Log = lambda _m: None) -> str:
    """The build's key (may refresh Debian's source index; never downloads sources)."""
    return _resolve(req, paths, log)[1]


# --- the cache -------------------------------------------------------------------------
def is_complete(prefix: Path) -> bool:
    return (prefix / MARKER_NAME).is_file() and (prefix / MANIFEST_NAME).is_file()


def cached_builds(paths: Paths) -> list[Installation]:
    """Complete builds in the cache, newest first."""
    if not paths.builds.is_dir():
        return []
    found = []
    for p in paths.builds.iterdir():
        if is_complete(p):
            try:
                found.append(Installation.from_manifest(p))
            except (OSError, ValueError, KeyError):  # unreadable manifest: not listed
                continue
    return sorted(found, key=lambda i: str(i.manifest.get("created_at", "")), reverse=True)


def request_features(req: BuildRequest, version: str = "") -> tuple[str, ...]:
    """The optional libraries a build of `req` is configured with now."""
    return features_of(configure_argv(req, Path("PREFIX"), version))


def is_current(inst: Installation) -> bool:
    """A cached build has every optional library its request is configured with now;
    one made before blocklab configured them (another key) is not used for it."""
    request = inst.manifest.get("request")
    if not isinstance(request, dict) or inst.features is None:
        return False
    try:
        wanted = request_features(BuildRequest.model_validate(request), inst.version)
    except ValueError:
        return False
    return set(wanted) <= set(inst.features)


def cached_for(req: BuildRequest, paths: Paths) -> Installation | None:
    """The newest current cached build of this request (matched by the request its
    manifest records; starts nothing but pkg-config), or None."""
    for inst in cached_builds(paths):
        if inst.manifest.get("request") == req.model_dump(mode="json") and is_current(inst):
            return inst
    return None


def remove_build(prefix: Path) -> None:
    """Remove the marker first, so a half-removed build never looks usable."""
    (prefix / MARKER_NAME).unlink(missing_ok=True)
    shutil.rmtree(prefix, ignore_errors=True)


def ensure_build(
    req: BuildRequest, paths: Paths, *, log: Log = print, shares_objects: bool = False
) -> Installation:
    """The Installation for `req`: from the cache, or built, installed and verified.
    `shares_objects`: other builds of its geometry will follow (layout or patched
    variants), so it compiles through the compiler cache (blocklab.postgres.compiler_cache);
    a layout or patched build always does."""
    faults.step("build")
    spec, key = _resolve(req, paths, log)
    prefix = paths.builds / key
    if is_complete(prefix):
        return Installation.from_manifest(prefix)
    ensure_dir(paths.builds)

    def waiting() -> None:
        log(f"waiting for another blocklab process that is building {key}")

    with sources.file_lock(paths.builds / f".{key}.lock", on_wait=waiting):
        if is_complete(prefix):  # another process built it while we waited
            return Installation.from_manifest(prefix)
        if prefix.exists():
            log(f"removing incomplete build {prefix}")
            remove_build(prefix)
        shares = shares_objects or req.layout_seed is not None or bool(req.patches)
        _build(req, spec, key, prefix, paths, log, shares)
    return Installation.from_manifest(prefix)


# --- building ----------------------------------------------------------------------------
def _build(
    req: BuildRequest,
    spec: sources.SourceSpec,
    key: str,
    prefix: Path,
    paths: Paths,
    log: Log,
    shares_objects: bool,
) -> None:
    log_path = ensure_dir(paths.cache / "logs") / f"{key}.log"
    log_path.write_text(f"blocklab build {key}\n{json.dumps(req.model_dump(mode='json'))}\n")
    work = paths.cache / "work" / key
    shutil.rmtree(work, ignore_errors=True)
    ensure_dir(work)
    started = time.monotonic()
    log(f"building {key} (log: {log_path})")
    try:
        tree = sources.materialize(spec, paths, work / "src", log)
        sources.apply_patches(tree, req.patches, log_path, log)
        argv = configure_argv(req, prefix, spec.version)
        env = compiler_cache.build_env(paths.cache / "ccache", work, shares_objects=shares_objects)
        shared = _shared_configure_cache(tree, argv, env, paths)
        how = _compile_and_install(tree, argv, log_path, log, make_args(req), env, shared)
        make_readable(prefix)
        inst = _provisional(prefix, key, tree, spec, req)
        log("verifying: initdb, pg_controldata, start, SELECT, stop")
        verification = verify(inst, req, paths)
        manifest = _manifest(inst, spec, req, argv, verification, time.monotonic() - started)
        manifest["compiler_cache"] = compiler_cache.summary(env)
        manifest["configure_cache"] = how
        _finish(prefix, manifest, log_path)
    except CommandError as e:
        remove_build(prefix)
        raise BuildError(_failure_message(key, log_path, e)) from None
    except BaseException:
        remove_build(prefix)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built {key} in {time.monotonic() - started:.0f} s")


def make_args(req: BuildRequest) -> list[str]:
    """Extra arguments of the server's make and make install: a layout variant's link
    order (blocklab.postgres.link_order); none for an ordinary build."""
    if req.layout_seed is None:
        return []
    return [link_order.make_override(req.layout_seed)]


def _shared_configure_cache(
    tree: Path, argv: list[str], env: dict[str, str], paths: Paths
) -> Path | None:
    """The configure cache this build shares (blocklab.postgres.configure_cache), or None
    when it is turned off."""
    if not configure_cache.wanted():
        return None
    path = env.get("PATH", os.environ.get("PATH", ""))  # a compiler cache's links first
    variables = {**compiler_environment(), "PATH": path}
    name = configure_cache.key(tree / "configure", argv, variables, compiler_version())
    return paths.cache / "configure" / name


def _compile_and_install(
    tree: Path,
    argv: list[str],
    log_path: Path,
    log: Log,
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
    shared: Path | None = None,
) -> str:
    """configure, make, make install and the contrib modules; `env` (a compiler cache's
    variables, blocklab.postgres.compiler_cache) is given to every step, `shared` is the
    configure cache to start from and to leave. Returns how configure used it."""
    jobs = str(len(os.sched_getaffinity(0)))
    if env:
        log(f"compiler cache: ccache in {env['CCACHE_DIR']}")
        with open(log_path, "a") as f:
            f.write(f"compiler cache: ccache in {env['CCACHE_DIR']}\n")

    def step(what: str, cmd: list[str]) -> None:
        if what:
            log(what)
        with open(log_path, "a") as f:
            f.write(f"\n$ {' '.join(cmd)}\n")
        proc.run(  # at the niceness blocklab was started with, also in its own session
            proc.keeping_niceness(cmd),
            cwd=tree,
            env=env,
            log_path=log_path,
            timeout_s=3 * 3600,
            unset=MAKE_VARIABLES,
        )

    how = _configure(tree, argv, step, log, shared)
    compiled = [*COMPILED, *([LLVM_DIR] if "--with-llvm" in argv else [])]
    log(f"make -j{jobs}: {len(compiled)} directories (server, libpq, the tools blocklab runs)")
    # first the generated headers (the top-level make's first step): `make -j` in
    # src/backend alone would compile beside their generation and miss them
    step("", ["make", "-C", "src/backend", "generated-headers"])
    for d in compiled:
        step("", ["make", f"-j{jobs}", "-C", d, *extra])
    log("make install")
    for d in (*compiled, *INSTALLED_TOO):
        step("", ["make", "-C", d, "install", *extra])
    step("", ["make", "-C", "src", "install-local"])  # Makefile.global for extensions
    for name in CONTRIB:
        step(f"contrib/{name}", ["make", f"-j{jobs}", "-C", f"contrib/{name}", "install"])
    return how


def _configure(
    tree: Path, argv: list[str], step: Callable[[str, list[str]], None], log: Log,
    shared: Path | None,
) -> str:  # fmt: skip
    """configure, with the shared cache when there is one: "off", "started empty",
    "answers reused" or "failed with the cache, ran without"."""
    if shared is None:
        step("configure: " + " ".join(argv[1:]), argv)
        return "off"
    cached = [argv[0], configure_cache.FLAG, *argv[1:]]
    seeded = configure_cache.seed(tree, shared)
    what = "configure (answers of an earlier build): " if seeded else "configure: "
    try:
        step(what + " ".join(cached[1:]), cached)
        how = "answers reused" if seeded else "started empty"
    except CommandError:
        if not seeded:
            raise
        log(f"configure failed with the cache {shared}; again without it")
        configure_cache.forget(tree)
        step("configure: " + " ".join(cached[1:]), cached)
        how = "failed with the cache, ran without"
    configure_cache.publish(tree, shared)
    return how


def make_readable(prefix: Path) -> None:
    """Directories 0755, files readable by all (executables stay executable)."""
    for dirpath, _dirnames, filenames in os.walk(prefix):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            f = os.path.join(dirpath, name)
            if not os.path.islink(f):
                mode = os.stat(f).st_mode & 0o777
                os.chmod(f, mode | 0o444 | (0o111 if mode & 0o100 else 0))
    p = prefix
    while p != p.parent:  # every parent must be traversable for the server user
        mode = p.stat().st_mode & 0o777
        if mode & 0o011 != 0o011:
            os.chmod(p, mode | 0o011)
        p = p.parent


def _provisional(
    prefix: Path, key: str, tree: Path, spec: sources.SourceSpec, req: BuildRequest
) -> Installation:
    missing = [t for t in TOOLS if not (prefix / "bin" / t).is_file()]
    if missing:
        raise BuildError(f"build {key}: the install lacks {', '.join(missing)}")
    version = sources.tree_version(tree) or spec.version or req.pg
    return Installation(
        prefix=prefix,
        key=key,
        version=version,
        block_size_bytes=req.block_size_kb * 1024,
        wal_block_size_bytes=req.wal_block_size_kb * 1024,
        segsize_gb=req.segsize_gb,
    )


def _manifest(
    inst: Installation,
    spec: sources.SourceSpec,
    req: BuildRequest,
    argv: list[str],
    verification: dict[str, Any],
    build_s: float,
) -> dict[str, Any]:
    return {
        "key": inst.key,
        "version": inst.version,
        "block_size_bytes": inst.block_size_bytes,
        "wal_block_size_bytes": inst.wal_block_size_bytes,
        "segsize_gb": inst.segsize_gb,
        "source": {**spec.identity, "location": spec.location},
        "patches": sources.patch_identity(req.patches),
        "configure": " ".join(argv),
        "configure_argv": argv,
        "features": list(features_of(argv)),
        "compiler": compiler_version(),
        "contrib": list(CONTRIB),
        "request": req.model_dump(mode="json"),
        "recipe": RECIPE_VERSION,
        "layout_seed": req.layout_seed,
        "postgres_sha256": sources.sha256_file(inst.bin("postgres")),  # layouts differ here
        "verification": verification,
        "build_seconds": round(build_s, 1),
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "size_bytes": tree_size_bytes(inst.prefix),
        "log": str(inst.prefix / BUILD_LOG_NAME),
    }


def _finish(prefix: Path, manifest: dict[str, Any], log_path: Path) -> None:
    shutil.copyfile(log_path, prefix / BUILD_LOG_NAME)
    os.chmod(prefix / BUILD_LOG_NAME, 0o644)
    tmp = prefix / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, prefix / MANIFEST_NAME)
    (prefix / MARKER_NAME).write_text(manifest["created_at"] + "\n")
    log_path.unlink(missing_ok=True)


def _failure_message(key: str, log_path: Path, e: CommandError) -> str:
    """The failed command, the last lines of its output (for build steps: of the build
    log, which is where their output goes) and the log's path."""
    what = e.reason or f"exit code {e.returncode}"
    tail = "\n".join(e.output.rstrip().splitlines()[-30:]) or log_tail(log_path)
    return (
        f"build {key} failed ({what}) in: {' '.join(e.argv)}\n"
        f"--- last lines of its output ---\n{tail}\n"
        f"--- full build log: {log_path}"
    )


# --- verification ------------------------------------------------------------------------
def check_geometry(control: dict[str, str], inst: Installation) -> list[str]:
    """Mismatches between pg_controldata and the requested geometry (empty if none)."""
    wanted = {
        "Database block size": inst.block_size_bytes,
        "WAL block size": inst.wal_block_size_bytes,
        "Blocks per segment of large relation": inst.segsize_gb * 1024**3 // inst.block_size_bytes,
    }
    problems = []
    for label, value in wanted.items():
        if control.get(label) != str(value):
            problems.append(f"{label}: pg_controldata says {control.get(label)!r}, wanted {value}")
    return problems


def server_user() -> proc.User:
    """The unprivileged OS user servers run as (blocklab.postgres.cluster owns its creation)."""
    return cluster.server_user()


GEOMETRY_SQL = "SELECT current_setting('block_size') || '|' || current_setting('wal_block_size')"


def verify(inst: Installation, req: BuildRequest, paths: Paths) -> dict[str, Any]:
    """initdb a throwaway cluster, check pg_controldata, ask the server for its block
    sizes and record its settings catalogue beside the build
    (blocklab.postgres.settings_catalogue)."""
    control, (answer, settings) = throwaway.fresh_cluster_answers(
        inst, paths, [GEOMETRY_SQL, settings_catalogue.SQL]
    )
    problems = check_geometry(control, inst)
    if problems:
        raise BuildError(f"build {inst.key} verification failed: " + "; ".join(problems))
    expected = f"{inst.block_size_bytes}|{inst.wal_block_size_bytes}"
    if answer != expected:
        raise BuildError(f"build {inst.key}: the server reports {answer!r}, wanted {expected!r}")
    settings_catalogue.save(inst, settings)
    return {
        "database_block_size": int(control["Database block size"]),
        "wal_block_size": int(control["WAL block size"]),
        "blocks_per_segment": int(control["Blocks per segment of large relation"]),
        "server_block_size_wal_block_size": answer,
        "pg_control_version": control.get("pg_control version number", ""),
        "verified_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }

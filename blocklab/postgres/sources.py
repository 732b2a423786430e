"""Where a PostgreSQL source tree comes from: Debian's source package, a tarball or a tree.

Three steps, kept apart so that a build key can be computed without downloading sources:
  `validate_source(source)`  checks the input only (no network, no files written);
  `resolve(req, paths)`      names the exact source (Debian version and .dsc checksum,
                             tarball checksum, or tree commit and diff) -> `SourceSpec`;
  `materialize(spec, ...)`   writes a fresh, private copy of the tree to build in.
Then `apply_patches(tree, patches, ...)` applies the user's patches in order.

Debian sources: a deb-src list is derived from the machine's own apt configuration
(same URIs and Signed-By keyring as its main archive, suites that may carry the wanted
major) and kept in a private apt directory under the cache, so the system's apt state is
never touched. The upstream tree is extracted from the source package with Debian's own
packaging patches skipped (they move sockets and library paths for Debian's layout),
once per package version, and copied for each build (postgres.source_trees).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocklab import proc
from blocklab.errors import CommandError, UserError
from blocklab.model import BuildRequest
from blocklab.paths import Paths, ensure_dir
from blocklab.postgres import source_trees

Log = Callable[[str], None]

SUPPORTED_MAJORS = tuple(str(m) for m in range(13, 20))
# Suites tried besides the machine's own: the archive's generic aliases, oldest first.
EXTRA_SUITES = ("stable", "stable-backports", "testing", "unstable")
LISTS_MAX_AGE_S = 7 * 24 * 3600.0
APT_SOURCES_DIR = Path("/etc/apt/sources.list.d")
APT_SOURCES_LIST = Path("/etc/apt/sources.list")
OS_RELEASE = Path("/etc/os-release")
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@dataclass(frozen=True)
class SourceSpec:
    """An exact source: `identity` goes into the build key, the rest tells how to fetch it."""

    kind: str  # "debian" | "tarball" | "tree"
    version: str  # PostgreSQL version, e.g. "18.6" ("" when unknown before extraction)
    identity: dict[str, Any] = field(default_factory=dict)
    location: str = ""  # tarball or tree path; Debian: "package=version"


# --- validation (pure, no network) -------------------------------------------------
def source_kind(source: str) -> str:
    if source == "debian":
        return "debian"
    if source.endswith(TARBALL_SUFFIXES):
        return "tarball"
    return "tree"


def validate_source(req: BuildRequest) -> None:
    """UserError for an unknown major version or a missing tarball/tree path."""
    allowed = ", ".join(SUPPORTED_MAJORS)
    if req.pg not in SUPPORTED_MAJORS:
        raise UserError(f"--pg: must be one of {allowed} (got {req.pg!r})")
    kind = source_kind(req.source)
    if kind == "debian":
        return
    path = Path(req.source)
    what = "debian, a tarball (.tar.gz/.tar.bz2/.tar.xz) or a source tree"
    if kind == "tarball" and not path.is_file():
        raise UserError(f"--source: no such tarball {req.source!r} (use {what})")
    if kind == "tree":
        if not path.is_dir():
            raise UserError(f"--source: {req.source!r} is neither an existing path nor {what}")
        if not (path / "configure").is_file() and not (path / "configure.ac").is_file():
            raise UserError(f"--source: {req.source!r} is not a PostgreSQL source tree")
        if (path / "config.status").exists() and not (path / ".git").exists():
            raise UserError(
                f"--source: {req.source!r} is configured in place (config.status); "
                "run `make distclean` in it or use a clean checkout"
            )


# --- Debian apt configuration (pure parsing) -----------------------------------------
@dataclass(frozen=True)
class AptEntry:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str


def parse_deb822(text: str) -> list[AptEntry]:
    """Entries of a .sources file (deb822) whose Types include `deb`."""
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
            continue
        for uri in fields.get("uris", "").split():
            entries.append(
                AptEntry(
                    uri=uri.rstrip("/"),
                    suites=tuple(fields.get("suites", "").split()),
                    components=tuple(fields.get("components", "").split()),
                    signed_by=fields.get("signed-by", ""),
                )
            )
    return entries


def parse_one_line(text: str) -> list[AptEntry]:
    """Entries of a one-line sources.list: `deb [opts] URI SUITE COMPONENT...`."""
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        m = re.match(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
        entries.append(
            AptEntry(
                uri=m.group(2).rstrip("/"),
                suites=(m.group(3),),
                components=tuple(m.group(4).split()),
                signed_by=opts.get("signed-by", ""),
            )
        )
    return entries


def main_archives(entries: list[AptEntry], codename: str) -> list[AptEntry]:
    """The entries that serve the release itself (a suite equal to the codename, i.e. not
    `-security` or `-updates` only): these are the ones other suites can come from."""
    return [e for e in entries if codename in e.suites and "main" in e.components]


def candidate_suites(codename: str) -> tuple[str, ...]:
    ordered = (codename, f"{codename}-backports", *EXTRA_SUITES)
    return tuple(dict.fromkeys(ordered))


def deb_src_list(archives: list[AptEntry], suites: tuple[str, ...]) -> str:
    lines = []
    for a in archives:
        opt = f"[signed-by={a.signed_by}] " if a.signed_by else ""
        for suite in suites:
            lines.append(f"deb-src {opt}{a.uri} {suite} main")
    return "\n".join(dict.fromkeys(lines)) + "\n"


def parse_showsrc(text: str) -> list[dict[str, str]]:
    """Records of `apt-cache showsrc` as dicts (continuation lines joined with newlines)."""
    records = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        rec: dict[str, str] = {}
        last = ""
        for line in stanza.splitlines():
            if line[:1].isspace() and last:
                rec[last] += "\n" + line.strip()
            elif ":" in line:
                last, value = line.split(":", 1)
                rec[last] = value.strip()
        if rec.get("Package"):
            records.append(rec)
    return records


def dsc_checksum(record: dict[str, str]) -> str:
    for line in record.get("Checksums-Sha256", "").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].endswith(".dsc"):
            return parts[0]
    return ""


def upstream_version(debian_version: str) -> str:
    """`18.6-3` -> `18.6`; `17.11-0+deb13u1` -> `17.11`."""
    no_epoch = debian_version.split(":", 1)[-1]
    return no_epoch.rsplit("-", 1)[0]


def read_codename(os_release_text: str) -> str:
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?", os_release_text, re.M)
    return m.group(1) if m else ""


# --- Debian apt (I/O) --------------------------------------------------------------
class DebianApt:
    """A private apt directory: its own deb-src list, indexes and caches."""

    def __init__(self, paths: Paths):
        self.root = paths.sources / "debian"
        self.etc = self.root / "apt" / "etc"
        self.lists = self.root / "apt" / "lists"
        self.cache = self.root / "apt" / "cache"
        self.downloads = self.root / "packages"
        self.resolved = self.root / "resolved.json"

    def options(self) -> list[str]:
        return [
            "-o",
            f"Dir::Etc::SourceList={self.etc / 'sources.list'}",
            "-o",
            "Dir::Etc::SourceParts=-",
            "-o",
            f"Dir::State::Lists={self.lists}",
            "-o",
            f"Dir::Cache={self.cache}",
            "-o",
            "Debug::NoLocking=1",
            "-o",
            "APT::Sandbox::User=root",
        ]

    def write_sources_list(self) -> str:
        codename = read_codename(OS_RELEASE.read_text()) if OS_RELEASE.exists() else ""
        entries = system_apt_entries()
        archives = main_archives(entries, codename)
        if not archives:
            raise UserError(
                "--source debian: the machine's apt configuration has no Debian main archive "
                f"for {codename or 'its release'}; use --source TARBALL or TREE"
            )
        text = deb_src_list(archives, candidate_suites(codename))
        ensure_dir(self.etc)
        target = self.etc / "sources.list"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            shutil.rmtree(self.lists, ignore_errors=True)
        return text

    def lists_age_s(self) -> float:
        stamps = list(self.lists.glob("*Sources*")) if self.lists.exists() else []
        if not stamps:
            return float("inf")
        return time.time() - max(p.stat().st_mtime for p in stamps)

    def update(self, log: Log) -> None:
        ensure_dir(self.lists / "partial")
        ensure_dir(self.cache / "archives" / "partial")
        log("refreshing Debian source indexes (private apt directory)")
        res = proc.run(["apt-get", "-q", *self.options(), "update"], check=False, timeout_s=900)
        if not list(self.lists.glob("*Sources*")):
            raise CommandError(res.argv, res.returncode, res.stdout + res.stderr)

    def showsrc(self, package: str) -> list[dict[str, str]]:
        res = proc.run(
            ["apt-cache", *self.options(), "showsrc", "--only-source", package],
            check=False,
            timeout_s=300,
        )
        return [r for r in parse_showsrc(res.stdout) if r.get("Package") == package]

    def lists_signature(self) -> str:
        """Changes whenever the indexes are refreshed or the deb-src list changes."""
        files = sorted(self.lists.glob("*Sources*")) if self.lists.exists() else []
        parts = [f"{p.name}:{p.stat().st_mtime_ns}" for p in files]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def remembered(self, package: str) -> dict[str, str] | None:
        """The record resolved last time, if the indexes have not changed since or its
        source is already downloaded: a refresh of the indexes must not silently move
        an existing build setup to a newer Debian version (delete resolved.json for that)."""
        try:
            data = json.loads(self.resolved.read_text())
        except (OSError, ValueError):
            return None
        entry = data.get(package, {})
        record = entry.get("record")
        if not record:
            return None
        downloaded = self.downloads / f"{package}_{record.get('Version')}" / ".complete"
        if entry.get("lists") != self.lists_signature() and not downloaded.exists():
            return None
        return dict(record)

    def newest_record(self, package: str) -> dict[str, str] | None:
        records = self.showsrc(package)
        if not records:
            return None
        rec = newest(records)
        try:
            data = json.loads(self.resolved.read_text())
        except (OSError, ValueError):
            data = {}
        data[package] = {"lists": self.lists_signature(), "record": rec}
        self.resolved.write_text(json.dumps(data, indent=1, sort_keys=True))
        return rec

    def download(self, package: str, version: str, log: Log) -> Path:
        dest = ensure_dir(self.downloads / f"{package}_{version}")
        found = list(dest.glob("*.dsc"))
        if found and (dest / ".complete").exists():
            return found[0]
        log(f"downloading Debian source package {package}={version}")
        for p in dest.iterdir():
            p.unlink()
        proc.run(
            ["apt-get", "-q", *self.options(), "source", "--download-only", f"{package}={version}"],
            cwd=dest,
            timeout_s=1800,
        )
        (dest / ".complete").write_text("")
        found = list(dest.glob("*.dsc"))
        if not found:
            raise UserError(f"--source debian: apt-get source left no .dsc in {dest}")
        return found[0]


def system_apt_entries() -> list[AptEntry]:
    entries: list[AptEntry] = []
    if APT_SOURCES_LIST.exists():
        entries += parse_one_line(APT_SOURCES_LIST.read_text())
    if APT_SOURCES_DIR.is_dir():
        for f in sorted(APT_SOURCES_DIR.glob("*.sources")):
            entries += parse_deb822(f.read_text())
        for f in sorted(APT_SOURCES_DIR.glob("*.list")):
            entries += parse_one_line(f.read_text())
    return entries


@contextmanager
def file_lock(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive flock on `path`; `on_wait` is called once if someone else holds it."""
    ensure_dir(path.parent)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def newest(records: list[dict[str, str]]) -> dict[str, str]:
    best = records[0]
    for r in records[1:]:
        res = proc.run(
            ["dpkg", "--compare-versions", r["Version"], "gt", best["Version"]], check=False
        )
        if res.returncode == 0:
            best = r
    return best


def resolve_debian(major: str, paths: Paths, log: Log) -> SourceSpec:
    apt = DebianApt(paths)
    package = f"postgresql-{major}"
    with file_lock(apt.root / ".lock"):
        apt.write_sources_list()
        if apt.lists_age_s() > LISTS_MAX_AGE_S:
            apt.update(log)
        rec = apt.remembered(package) or apt.newest_record(package)
        if rec is None and apt.lists_age_s() > 600:
            apt.update(log)
            rec = apt.newest_record(package)
    if rec is None:
        raise UserError(
            f"--pg {major}: no Debian source package {package} in the suites "
            f"{', '.join(candidate_suites(read_codename(OS_RELEASE.read_text())))}; "
            "use --source TARBALL or TREE"
        )
    identity = {
        "kind": "debian",
        "package": package,
        "version": rec["Version"],
        "dsc_sha256": dsc_checksum(rec),
    }
    return SourceSpec(
        "debian", upstream_version(rec["Version"]), identity, f"{package}={rec['Version']}"
    )


# --- tarballs and trees --------------------------------------------------------------
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tarball_version(name: str) -> str:
    m = re.search(r"postgresql-(?:\d+_)?(\d+(?:\.\d+)*(?:beta\d+|rc\d+|devel)?)", name)
    return m.group(1) if m else ""


VERSION_RE = r"PACKAGE_VERSION='([^']+)'|AC_INIT\(\[PostgreSQL\], \[([^\]]+)\]"


def tree_version(tree: Path) -> str:
    for name in ("configure", "configure.ac"):
        f = tree / name
        if f.is_file():
            m = re.search(VERSION_RE, _head(f))
            if m:
                return m.group(1) or m.group(2)
    return ""


def _head(path: Path, size: int = 1 << 20) -> str:
    with open(path, errors="replace") as f:
        return f.read(size)


def resolve_tarball(source: str) -> SourceSpec:
    path = Path(source).absolute()
    identity = {"kind": "tarball", "name": path.name, "sha256": sha256_file(path)}
    return SourceSpec("tarball", tarball_version(path.name), identity, str(path))


def git_files(tree: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files, or None if `tree` is not a git checkout."""
    if not (tree / ".git").exists():
        return None
    res = proc.run(
        ["git", "-C", tree, "ls-files", "-z", "-co", "--exclude-standard"], timeout_s=300
    )
    return sorted(p for p in res.stdout.split("\0") if p)


def tree_identity(tree: Path) -> dict[str, Any]:
    if (tree / ".git").exists():
        head = proc.run(["git", "-C", tree, "rev-parse", "HEAD"], timeout_s=60).stdout.strip()
        diff = proc.run(["git", "-C", tree, "diff", "HEAD", "--binary"], timeout_s=300).stdout
        untracked = proc.run(
            ["git", "-C", tree, "ls-files", "-z", "-o", "--exclude-standard"], timeout_s=300
        ).stdout
        h = hashlib.sha256(diff.encode())
        for rel in sorted(p for p in untracked.split("\0") if p):
            h.update(rel.encode() + b"\0" + _file_digest(tree / rel).encode())
        return {"kind": "tree", "commit": head, "diff_sha256": h.hexdigest()}
    h = hashlib.sha256()
    for rel in _walk_files(tree):
        h.update(rel.encode() + b"\0" + _file_digest(tree / rel).encode())
    return {"kind": "tree", "content_sha256": h.hexdigest()}


def _file_digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    return sha256_file(path) if path.is_file() else ""


def _walk_files(tree: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), tree))
    return sorted(out)


def resolve_tree(source: str) -> SourceSpec:
    path = Path(source).absolute()
    return SourceSpec("tree", tree_version(path), tree_identity(path), str(path))


def resolve(req: BuildRequest, paths: Paths, log: Log) -> SourceSpec:
    kind = source_kind(req.source)
    if kind == "debian":
        return resolve_debian(req.pg, paths, log)
    if kind == "tarball":
        return resolve_tarball(req.source)
    return resolve_tree(req.source)


# --- materialize ---------------------------------------------------------------------
def _extract(tarball: Path, dest: Path) -> None:
    """Unpack a tarball as tarfile's "data" filter allows (we run as root): no device
    nodes, no setuid/setgid bits, no absolute names or links out of `dest`, files owned
    by whoever extracts. A tarball that needs any of it is a UserError."""
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise UserError(f"matrix.postgres.source: {tarball} cannot be unpacked safely: {e}") from e


def materialize(spec: SourceSpec, paths: Paths, dest: Path, log: Log) -> Path:
    """A fresh copy of the source tree at `dest` (which must not exist)."""
    if spec.kind == "debian":
        package, version = spec.location.split("=", 1)
        apt = DebianApt(paths)
        with file_lock(apt.root / ".lock"):
            dsc = apt.download(package, version, log)
        trees = source_trees.trees_dir(apt.root)  # unpacked once, copied for each build
        with file_lock(source_trees.lock_path(dsc, trees)):
            return source_trees.copy_of(dsc, trees, dest, log)
    if spec.kind == "tarball":
        log(f"extracting {Path(spec.location).name}")
        staging = ensure_dir(dest.parent / (dest.name + ".unpack"))
        _extract(Path(spec.location), staging)
        tops = [p for p in staging.iterdir()]
        top = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
        os.rename(top, dest)
        shutil.rmtree(staging, ignore_errors=True)
        return dest
    log(f"copying source tree {spec.location}")
    _copy_tree(Path(spec.location), dest)
    return dest


def _copy_tree(src: Path, dest: Path) -> None:
    files = git_files(src)
    if files is None:
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return
    for rel in files:
        s, d = src / rel, dest / rel
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_symlink():
            os.symlink(os.readlink(s), d)
        elif s.is_file():
            shutil.copy2(s, d)


# --- patches -------------------------------------------------------------------------
def first_failure(patch_output: str) -> str:
    """`file X: Hunk #N FAILED at L` from `patch` output, or its first complaint."""
    current = ""
    for line in patch_output.splitlines():
        m = re.match(r"^(?:patching|checking) file '?([^']+?)'?$", line.strip())
        if m:
            current = m.group(1)
            continue
        if "FAILED" in line or "can't find file" in line or "malformed" in line.lower():
            where = f"{current}: " if current else ""
            return where + line.strip()
        if "Reversed (or previously applied) patch" in line:
            return f"{current}: patch is reversed or already applied"
    lines = [ln.strip() for ln in patch_output.splitlines() if ln.strip()]
    return lines[-1] if lines else "patch failed"


def apply_patches(tree: Path, patches: tuple[str, ...], log_path: Path, log: Log) -> None:
    for name in patches:
        patch = Path(name).absolute()
        log(f"applying patch {patch.name}")
        argv: list[str | Path] = ["patch", "-p1", "--batch", "--forward", "--dry-run", "-i", patch]
        dry = proc.run(argv, cwd=tree, check=False, timeout_s=300)
        with open(log_path, "a") as f:
            f.write(f"$ {' '.join(map(str, argv))}\n{dry.stdout}{dry.stderr}\n")
        if dry.returncode != 0:
            raise UserError(
                f"--patch {name}: does not apply: {first_failure(dry.stdout + dry.stderr)}"
            )
        proc.run(argv[:-3] + ["-i", patch], cwd=tree, log_path=log_path, timeout_s=300)


def patch_identity(patches: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"path": str(Path(p).absolute()), "sha256": sha256_file(Path(p))} for p in patches]

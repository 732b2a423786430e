"""The trust boundary: what an experiment file (or a queued job) may ask for, and what the
owner of the machine grants (docs/RELIABILITY.md, "The trust boundary").

An experiment file can ask for things that run code or touch the machine beyond
blocklab's own directories. Each belongs to a class; the file asks, and only the owner
grants: `blocklab run`, `plan` and `agent` take `--allow CLASS[,CLASS...]` (or `--allow
all`). A queued job is a file: its agent's `--allow` decides, whatever the submitter
wrote. A request not granted is a UserError naming the key, what it would do and the
flag that allows it (exit 2, nothing started; an agent records it as the job's failure).

Pure: the requests are read from the loaded Experiment's variants; nothing is run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import UserError
from blocklab.experiment_file import settings as settings_mod
from blocklab.experiment_file.experiment import Experiment
from blocklab.model import BuildRequest, StorageRequest, Variant

ALLOW_FLAG = "--allow"
ALL = "all"
# class -> what it covers (the help text of --allow and the table of docs/RELIABILITY.md)
CLASSES: dict[str, str] = {
    "commands": "settings that run a shell command or load a library (archive_command, "
    "*_command, *_library, *_libraries, dynamic_library_path, jit_provider, ...)",
    "files": "settings that name a file or directory of the server's host (log_directory, "
    "log_filename, external_pid_file, ssl_*_file, krb_server_keyfile, ...)",
    "builds": "PostgreSQL from a source tree or tarball, patches, configure_args outside "
    "the safe list (--with-X, --without-X, --enable-X, --disable-X): configure and make "
    "run as root",
    "scripts": "workload script files: SQL run against the server as the workload role "
    "(not a superuser: no COPY ... TO PROGRAM), and pgbench's \\shell and \\setshell run "
    "commands on this machine as the driver's unprivileged user",
    "devices": 'storage kind = "device" (a disk erased and formatted), mkfs_options that '
    "name a path or a device",
    "paths": "files and directories outside the experiment file's directory (on an agent "
    "every path: it names the agent's files, not the submitter's)",
}
# configure arguments that only switch features: no compiler, no prefix, no cache file
SAFE_CONFIGURE = re.compile(
    r"--(with|without|enable|disable)-[a-z0-9][a-z0-9-]*(=[A-Za-z0-9_+-]+)?"
)
# mkfs option keys whose value is a path or a device (xfs -l logdev=, -r rtdev=, -d name=;
# mke2fs -J device=, -d DIR; btrfs --rootdir)
MKFS_PATH_KEYS = ("logdev", "rtdev", "name", "device", "file", "rootdir")
WEIGHT = re.compile(r"@\d+$")  # "file.sql@2"
SHELL_META = re.compile(r"^\s*\\(shell|setshell)\b", re.MULTILINE)


@dataclass(frozen=True)
class Request:
    """One thing the file asks for: its class, the key that asks, and what it does."""

    cls: str
    key: str
    what: str


def parse_allow(values: Iterable[str], flag: str = ALLOW_FLAG) -> frozenset[str]:
    """The classes of `--allow a,b --allow c`; UserError naming the flag for an unknown
    class. "all" grants every class."""
    out: set[str] = set()
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            if name == ALL:
                out |= set(CLASSES)
            elif name in CLASSES:
                out.add(name)
            else:
                raise UserError(
                    f"{flag}: {name!r} is not a class; allowed: {', '.join(CLASSES)}, {ALL}"
                )
    return frozenset(out)


def requests(exp: Experiment, base: Path | None) -> list[Request]:
    """Everything `exp` asks for, once per (class, key), in the order of the variants.
    `base` is the experiment file's directory; None on an agent (every path is foreign)."""
    seen: dict[tuple[str, str], Request] = {}
    for v in exp.variants():
        for r in _of_variant(v, base):
            seen.setdefault((r.cls, r.key), r)
    return list(seen.values())


def refused(exp: Experiment, granted: frozenset[str], base: Path | None) -> list[Request]:
    """The requests of `exp` that `granted` does not allow."""
    return [r for r in requests(exp, base) if r.cls not in granted]


def check(exp: Experiment, granted: frozenset[str], base: Path | None, *, who: str) -> None:
    """UserError for the first request not granted: the key, what it does, the flag."""
    bad = refused(exp, granted, base)
    if not bad:
        return
    r = bad[0]
    others = sorted({x.cls for x in bad})
    raise UserError(
        f"{r.key}: {r.what}; refused unless {who} is started with {ALLOW_FLAG} {r.cls}"
        + (f" (all it asks for: {ALLOW_FLAG} {','.join(others)})" if len(others) > 1 else "")
    )


def _of_variant(v: Variant, base: Path | None) -> Iterator[Request]:
    yield from _of_build(v.build, base)
    yield from _of_storage(v.storage, base, "matrix.storage")
    for i, script in enumerate(v.workload.scripts):
        yield from _of_script(WEIGHT.sub("", script), i, base)
    # your own database: files read as root and handed to the unprivileged restore and
    # client (the queries run as the workload role, not a superuser: no "scripts" class)
    dump = v.dataset.option("dump")
    if dump is not None:
        yield from _outside(str(dump), base, "matrix.dataset.dump")
    queries = dict(v.workload.options).get("file") if v.workload.driver == "queries" else None
    if queries is not None:
        yield from _outside(str(queries), base, "matrix.workload.file")
    for name, value in v.settings:
        key = f"matrix.settings.{name}"
        if settings_mod.runs_commands(name, value):
            yield Request("commands", key, "runs a shell command or loads a shared library")
        elif settings_mod.names_files(name, value):
            yield Request("files", key, f"names a file or directory of the host ({value!r})")


def _of_build(b: BuildRequest, base: Path | None) -> Iterator[Request]:
    if b.source != "debian":
        yield Request(
            "builds", "matrix.postgres.source", f"{b.source!r}: its configure and make run as root"
        )
        yield from _outside(b.source, base, "matrix.postgres.source")
    for i, patch in enumerate(b.patches):
        key = f"matrix.postgres.patches[{i}]"
        yield Request("builds", key, f"{patch!r} changes the code that is built as root")
        yield from _outside(patch, base, key)
    for arg in b.configure_args:
        if not SAFE_CONFIGURE.fullmatch(arg):
            yield Request(
                "builds",
                "matrix.postgres.configure_args",
                f"{arg!r} is not a feature switch (--with-X, --without-X, --enable-X, "
                "--disable-X): configure runs as root",
            )


def _of_storage(s: StorageRequest, base: Path | None, key: str) -> Iterator[Request]:
    if s.kind == "device":
        yield Request("devices", f"{key}.kind", f"erases and formats the block device {s.path!r}")
    for opt in s.mkfs_options:
        if _names_path(opt):
            yield Request(
                "devices",
                f"{key}.mkfs_options",
                f"{opt!r} names a path or device: mkfs would write outside its image",
            )
    if s.kind != "device" and s.path is not None:
        yield from _outside(s.path, base, f"{key}.path")
    if s.wal is not None:
        yield from _of_storage(s.wal, base, f"{key}.wal")


def _of_script(path: str, i: int, base: Path | None) -> Iterator[Request]:
    key = f"matrix.workload.scripts[{i}]"
    what = f"{Path(path).name} runs its SQL as the workload role"
    if _has_shell(path):
        what += " and runs shell commands (\\shell, \\setshell) as the driver's user"
    yield Request("scripts", key, what)
    yield from _outside(path, base, key)


def _has_shell(path: str) -> bool:
    try:
        return bool(SHELL_META.search(Path(path).read_text(errors="replace")))
    except OSError:
        return False


def _names_path(opt: str) -> bool:
    value = opt.split("=", 1)[1] if "=" in opt and not opt.startswith("-") else opt
    keys = {part.split("=", 1)[0] for part in opt.lstrip("-").split(",") if "=" in part}
    return "/" in value or "/" in opt or bool(keys & set(MKFS_PATH_KEYS)) or opt == "--rootdir"


def _outside(path: str, base: Path | None, key: str) -> Iterator[Request]:
    if base is None:
        yield Request(
            "paths", key, f"{path!r} is a path of this host, named by a queued experiment"
        )
        return
    p, root = Path(path).resolve(), base.resolve()
    if p != root and root not in p.parents:
        yield Request("paths", key, f"{path!r} is outside the experiment's directory {root}")

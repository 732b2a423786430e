"""A PostgreSQL server: initdb, settings, start and stop, always as an unprivileged user.

The server runs as the OS user `blocklab` (created by `server_user()` when missing),
listens only on a private unix socket directory (no TCP unless asked), logs checkpoints
with epoch-millisecond prefixes in the C locale, and is stopped by PID: fast shutdown,
then SIGKILL after a timeout, and only once /proc shows that PID to be this data directory's
postgres, run by its owner, started when recorded (`verified_pid`; postmaster.pid is
written by the server's user, so root does not take its word). Every server is recorded
in `State` before it starts so that `blocklab cleanup` can stop what a killed blocklab
left behind.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from blocklab import faults, proc
from blocklab.errors import CommandError, RunError, UserError
from blocklab.paths import Paths, ensure_dir, open_to_server
from blocklab.postgres.installation import Installation
from blocklab.state import State

SERVER_USER = "blocklab"
SETTINGS_FILE = "blocklab.conf"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 120.0
DBNAME = "postgres"

# Settings blocklab always writes; a variant's settings come after and win, except the
# ones below that make the server reachable only by blocklab (they are re-asserted).
BASE_SETTINGS = {
    "listen_addresses": "''",
    "log_checkpoints": "on",
    "lc_messages": "'C'",
    "log_line_prefix": "'%n [%p] '",
    "logging_collector": "off",
    "log_timezone": "'UTC'",
}

MemoryHook = Callable[[int], None]


class ServerStartError(RunError):
    """pg_ctl start failed. `cause` is pg_ctl's reason, `log_tail` the last lines this
    start wrote to the server log (never an earlier start's: the log is shared by the
    variants of one build on one storage), `log_path` the log they came from."""

    def __init__(self, cause: str, log_path: Path, log_tail: str):
        self.cause = cause
        self.log_path = log_path
        self.log_tail = log_tail
        super().__init__(f"the server did not start: {cause}; see {log_path}\n{log_tail}")


def log_tail_since(path: Path, offset: int, lines: int = 20) -> str:
    """The last `lines` lines written to `path` after byte `offset` ('' when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def server_user() -> proc.User:
    """The unprivileged OS user postgres runs as; created (useradd --system) if missing."""
    try:
        pw = pwd.getpwnam(SERVER_USER)
    except KeyError:
        if os.geteuid() != 0:
            raise RunError(
                f"the OS user {SERVER_USER!r} does not exist and only root can create it "
                f"(useradd --system {SERVER_USER})"
            ) from None
        proc.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            timeout_s=60,
        )
        pw = pwd.getpwnam(SERVER_USER)
    if pw.pw_uid == 0:
        raise RunError(f"the OS user {SERVER_USER!r} is root; postgres must never run as root")
    return proc.User(name=pw.pw_name, uid=pw.pw_uid, gid=pw.pw_gid, home=pw.pw_dir)


def open_home(paths: Paths, log: Callable[[str], None] = lambda _m: None) -> proc.User:
    """The server user, with blocklab's home and cache made reachable by it, each change
    told to `log` (see blocklab.paths.open_to_server: UserError when a directory above
    them shuts it out)."""
    user = server_user()
    for line in open_to_server(paths, user.name, user.uid, user.gid):
        log(line)
    return user


def free_port() -> int:
    """A TCP port nobody listens on now (the socket file name uses it, too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def private_dir(path: Path, user: proc.User | None) -> Path:
    """A 0700 directory (owned by `user` when given) whose parents others can traverse."""
    ensure_dir(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    if user is not None:
        os.chown(path, user.uid, user.gid)
    return path


def chown_tree(path: Path, user: proc.User) -> None:
    """Give `path` (and everything below it) to the server user."""
    os.chown(path, user.uid, user.gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), user.uid, user.gid, follow_symlinks=False)


def postmaster_pid(data_dir: Path) -> int | None:
    """The PID in postmaster.pid (its first line), or None when there is none."""
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def render_settings(settings: dict[str, str]) -> str:
    """The text of blocklab.conf. Values are written as given (quote strings yourself)."""
    lines = ["# written by blocklab; changes are overwritten before every run"]
    lines += [f"{name} = {value}" for name, value in settings.items()]
    return "\n".join(lines) + "\n"


# A whole postgresql.conf string: quotes doubled or backslash-escaped, nothing else bare.
QUOTED_SETTING = re.compile(r"'(?:[^'\\\n\r\x00]|''|\\[^\n\r\x00])*'")
LINE_BREAKING = ("\n", "\r", "\x00")


def check_setting_value(name: str, value: str) -> None:
    """Refuse a value that postgresql.conf cannot hold on one line: a line break would
    start a setting of its own (`on'\\nshared_preload_libraries='x`), NUL ends the file."""
    bad = [repr(c) for c in LINE_BREAKING if c in value]
    if bad:
        raise UserError(
            f"settings.{name}: the value {value[:60]!r} holds {', '.join(bad)}; "
            "allowed: a value on one line without NUL"
        )


# A number as postgresql.conf's lexer reads one unquoted (guc-file.l INTEGER and REAL,
# with a unit: 128MB, 0.5, -1, 1e3, 0x10, 30s); anything else is written quoted.
NUMBER_SETTING = re.compile(r"[+-]?(0x[0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[A-Za-z]*")
# Written after every other setting, so that nothing before them can move the server
# off its private socket and port (a later line of the same name wins).
RESERVED_LAST = ("listen_addresses", "unix_socket_directories", "port")


def quote_setting(value: str) -> str:
    """Quote a value for postgresql.conf unless it already is one quoted string or a
    number; quotes and backslashes inside are escaped, so the server reads exactly the
    value given (a dotted word such as pg_catalog.english is not a value unquoted)."""
    if QUOTED_SETTING.fullmatch(value) or NUMBER_SETTING.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


class Cluster:
    """One data directory and the server that runs on it."""

    def __init__(
        self,
        inst: Installation,
        data_dir: Path,
        *,
        socket_dir: Path,
        user: proc.User,
        state: State,
        port: int | None = None,
        wal_dir: Path | None = None,
        log_path: Path | None = None,
        memory_hook: MemoryHook | None = None,
        listen_addresses: str = "",
    ):
        self.inst = inst
        self.data_dir = data_dir
        self.socket_dir = socket_dir
        self.user = user
        self.state = state
        self.port = port if port is not None else free_port()
        self.wal_dir = wal_dir
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.server.log"
        self.memory_hook = memory_hook
        self.listen_addresses = listen_addresses
        self.pid: int | None = None
        self.pid_ticks: int | None = None  # the postmaster's start time, to know it again
        self.refused: list[str] = []  # PIDs root would not signal, and why

    # -- identity ---------------------------------------------------------------------
    @property
    def ident(self) -> str:
        return str(self.data_dir)

    @property
    def conninfo(self) -> str:
        return f"host={self.socket_dir} port={self.port} user={self.user.name} dbname={DBNAME}"

    def conn_args(self) -> list[str]:
        """Connection options for psql/pgbench (-h socket dir -p port -U user)."""
        return ["-h", str(self.socket_dir), "-p", str(self.port), "-U", self.user.name]

    # -- initdb and settings ------------------------------------------------------------
    def initdb(self, *, wal_segsize_mb: int = 16, data_checksums: bool) -> proc.Result:
        self._prepare_dir(self.data_dir)
        argv = [
            str(self.inst.bin("initdb")),
            "-D",
            str(self.data_dir),
            "--username",
            self.user.name,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            f"--wal-segsize={wal_segsize_mb}",
        ]
        argv += self._checksum_args(data_checksums)
        if self.wal_dir is not None:
            self._prepare_dir(self.wal_dir)
            argv += ["--waldir", str(self.wal_dir)]
        return proc.run(argv, user=self.user, timeout_s=600)

    def _checksum_args(self, data_checksums: bool) -> list[str]:
        if data_checksums:
            return ["--data-checksums"]
        # PG 18 enables checksums by default; older versions have no --no-data-checksums.
        return ["--no-data-checksums"] if self.inst.major >= 18 else []

    def _prepare_dir(self, path: Path) -> None:
        private_dir(path, self.user)
        if any(path.iterdir()):
            raise RunError(f"{path} is not empty; initdb needs an empty directory")

    def base_settings(self) -> dict[str, str]:
        base = dict(BASE_SETTINGS)
        base["listen_addresses"] = quote_setting(self.listen_addresses or "''")
        base["unix_socket_directories"] = quote_setting(str(self.socket_dir))
        base["port"] = str(self.port)
        return base

    def write_settings(self, settings: dict[str, str]) -> Path:
        """Write blocklab.conf (base settings, then the variant's, then the reserved ones:
        reachability is not negotiable) and include it once."""
        for name, value in settings.items():
            check_setting_value(name, value)
        base = self.base_settings()
        merged = {k: v for k, v in base.items() if k not in RESERVED_LAST}
        merged.update({k: quote_setting(v) for k, v in settings.items()})
        for key in RESERVED_LAST:
            merged.pop(key, None)
            merged[key] = base[key]
        target = self.data_dir / SETTINGS_FILE
        target.write_text(render_settings(merged))
        os.chown(target, self.user.uid, self.user.gid)
        conf = self.data_dir / "postgresql.conf"
        text = conf.read_text()
        include = f"include '{SETTINGS_FILE}'"
        if include not in text:
            conf.write_text(text.rstrip("\n") + f"\n\n{include}\n")
        return target

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, env: Mapping[str, str] | None = None) -> int:
        """Start with pg_ctl -w; return the postmaster PID (from postmaster.pid). `env`:
        variables added to the canonical environment (Variant.server_environment)."""
        self._prepare_runtime_dirs()
        log_offset = self.log_path.stat().st_size  # this start's lines begin here
        self.state.add("server", self.ident, data_dir=self.ident, pid=None, port=self.port)
        faults.step("server_start")
        argv = [
            str(self.inst.bin("pg_ctl")),
            "start",
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_path),
        ]
        try:
            # the server's environment is the same bytes whoever starts blocklab (its size
            # moves the stack's alignment): proc.canonical_env
            proc.run(argv, user=self.user, timeout_s=START_TIMEOUT_S + 30, inherit=False, env=env)
        except CommandError as e:
            self._after_failed_start()
            raise ServerStartError(
                e.reason or f"exit code {e.returncode}",
                self.log_path,
                log_tail_since(self.log_path, log_offset),
            ) from e
        self.pid = postmaster_pid(self.data_dir)
        if self.pid is None:
            raise RunError(f"the server started but {self.data_dir}/postmaster.pid has no PID")
        self.pid_ticks = proc.start_ticks(self.pid)
        self.state.update("server", self.ident, pid=self.pid, pid_ticks=self.pid_ticks)
        self._apply_memory_hook(self.pid)
        return self.pid

    def _prepare_runtime_dirs(self) -> None:
        private_dir(self.socket_dir, self.user)
        if not self.server_pids():  # a killed server leaves its socket lock file behind
            clear_dir(self.socket_dir)
        ensure_dir(self.log_path.parent)
        self.log_path.touch()
        os.chown(self.log_path, self.user.uid, self.user.gid)

    def _apply_memory_hook(self, pid: int) -> None:
        if self.memory_hook is None:
            return
        for p in [pid, *proc.child_pids(pid)]:
            self.memory_hook(p)

    def _after_failed_start(self) -> None:
        pid = postmaster_pid(self.data_dir)
        if pid is not None and proc.pid_alive(pid):
            self.pid, self.pid_ticks = pid, None
            self.kill()
        else:
            self.state.remove("server", self.ident)

    def alive(self) -> bool:
        return self.pid is not None and proc.pid_alive(self.pid)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Fast shutdown (SIGINT) by PID; SIGKILL after `timeout_s`. True if it was clean.
        Processes a dead postmaster left on this data directory are ended, too."""
        clean = True
        if self.verified_pid() is not None:
            clean = self._signal_and_wait(signal.SIGINT, timeout_s)
            if not clean and (pid := self.verified_pid()) is not None:
                proc.terminate(pid, sig=signal.SIGKILL, grace_s=5.0)
        self._end_leftovers()
        self._forget()
        return clean

    def kill(self) -> None:
        """SIGKILL the postmaster, then whatever it left on this data directory, by PID."""
        if (pid := self.verified_pid()) is not None:
            proc.terminate(pid, sig=signal.SIGKILL, grace_s=5.0)
        self._end_leftovers()
        self._forget()

    def verified_pid(self) -> int | None:
        """self.pid when /proc shows it to be this data directory's postmaster (see
        proc.postmaster_refusal); otherwise None, and the refusal is kept in `refused`."""
        if self.pid is None or not proc.pid_alive(self.pid):
            return None
        exe = str(self.inst.bin("postgres"))
        ticks = self.pid_ticks
        why = proc.postmaster_refusal(self.pid, self.data_dir, started_ticks=ticks, exe=exe)
        if why:
            self.refused.append(f"not signalled: {why}")
            return None
        return self.pid

    def _signal_and_wait(self, sig: int, timeout_s: float) -> bool:
        assert self.pid is not None
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not proc.pid_alive(self.pid):
                return True
            time.sleep(0.05)
        return False

    def _end_leftovers(self, grace_s: float = 10.0) -> None:
        """Backends of a killed postmaster exit on their own; SIGKILL those that don't."""
        deadline = time.monotonic() + grace_s
        pids = self.server_pids()
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = self.server_pids()
        for pid in pids:
            proc.terminate(pid, sig=signal.SIGKILL, grace_s=5.0)

    def server_pids(self) -> list[int]:
        """Live processes of this installation's postgres whose cwd is this data dir."""
        return server_pids(self.data_dir, self.inst.bin("postgres"))

    def _forget(self) -> None:
        self.pid = self.pid_ticks = None
        self.state.remove("server", self.ident)

    # -- queries ------------------------------------------------------------------------
    def psql(self, sql: str, *, timeout_s: float = 600.0, dbname: str = DBNAME) -> str:
        """Run SQL with psql (-X -A -t, stop on error; each statement in its own
        transaction unless the SQL says otherwise) as the server's user, never root;
        return its stdout. Only blocklab's own SQL: never text read from a file or log."""
        argv = [
            str(self.inst.bin("psql")),
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            *self.conn_args(),
            "-d",
            dbname,
            "-f",
            "-",
        ]
        res = proc.run(argv, user=self.user, cwd="/", timeout_s=timeout_s, input_text=sql)
        return res.stdout

    def settings_readback(self) -> dict[str, dict[str, Any]]:
        """The effective settings: pg_settings name -> {setting, unit}."""
        out = self.psql(
            "SELECT name || E'\\x1f' || coalesce(setting, '') || E'\\x1f' || coalesce(unit, '')"
            " FROM pg_settings ORDER BY name"
        )
        return parse_settings_rows(out)

    def version_num(self) -> int:
        return int(self.psql("SHOW server_version_num").strip())

    def remove_data(self) -> None:
        """Delete the data directory's contents (and the WAL directory's); server stopped."""
        if self.alive():
            raise RunError(f"refusing to remove {self.data_dir}: its server is running")
        for d in (self.data_dir, self.wal_dir):
            if d is not None and d.exists():
                clear_dir(d)


def clear_dir(path: Path) -> None:
    """Remove everything inside `path`, keeping `path` itself (it may be a mount point)."""
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def server_pids(data_dir: Path, postgres: Path) -> list[int]:
    """PIDs running `postgres` with `data_dir` as working directory (every server
    process chdirs there), zombies excluded."""
    want_cwd = os.path.realpath(data_dir)
    want_exe = os.path.realpath(postgres)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") != want_cwd or os.readlink(entry / "exe") != want_exe:
                continue
        except OSError:
            continue
        if proc.pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def parse_settings_rows(text: str) -> dict[str, dict[str, Any]]:
    """Parse `name\\x1fsetting\\x1funit` rows (pure)."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        parts = line.split("\x1f")
        if len(parts) != 3:
            continue
        name, setting, unit = parts
        out[name] = {"setting": setting, "unit": unit or None}
    return out

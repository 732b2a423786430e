"""A throwaway cluster: initdb, start on a private socket, ask a few questions, remove.

The build's check (blocklab.postgres.build.verify) and the settings catalogue
(blocklab.postgres.settings_catalogue.load) both ask a fresh cluster of an installation."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from blocklab import proc
from blocklab.errors import BuildError
from blocklab.paths import Paths, ensure_dir
from blocklab.postgres.cluster import open_home
from blocklab.postgres.installation import Installation
from blocklab.state import State

VERIFY_TIMEOUT_S = 120.0


def fresh_cluster_answers(
    inst: Installation, paths: Paths, sqls: list[str]
) -> tuple[dict[str, str], list[str]]:
    """initdb a throwaway cluster as the server user, read pg_controldata, start the
    server on a private unix socket, run each query (psql -At), stop it by PID and
    remove the cluster. Returns pg_controldata and the answers."""
    user = open_home(paths)  # the server user, able to reach the home and the cache
    base = Path(tempfile.mkdtemp(prefix="verify-", dir=ensure_dir(paths.work)))
    try:
        os.chmod(base, 0o700)
        os.chown(base, user.uid, user.gid)
        data = base / "data"
        proc.run(
            [inst.bin("initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"],
            user=user,
            cwd=base,
            timeout_s=600,
        )
        control_text = proc.run([inst.bin("pg_controldata"), data], user=user, cwd=base).stdout
        answers = _start_query_stop(inst, data, base, user, State(paths.state_file), sqls)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return parse_controldata(control_text), answers


def _start_query_stop(
    inst: Installation, data: Path, sock: Path, user: proc.User, state: State, sqls: list[str]
) -> list[str]:
    state.add("server", str(data), data_dir=str(data), pid=None, port=5432)
    server = proc.spawn(
        [
            inst.bin("postgres"),
            "-D",
            data,
            "-p",
            "5432",
            "-c",
            "listen_addresses=",
            "-c",
            f"unix_socket_directories={sock}",
            "-c",
            "fsync=off",
        ],
        stdout_path=sock / "server.log",
        cwd=sock,
        user=user,
    )
    state.update("server", str(data), pid=server.pid)
    try:
        first = _query_when_ready(inst, sock, user, server.pid, sock / "server.log", sqls[0])
        rest = [proc.run(_psql(inst, sock, sql), user=user, cwd=sock).stdout for sql in sqls[1:]]
        return [first] + [r.strip() for r in rest]
    finally:
        proc.terminate(server.pid, sig=signal.SIGINT, grace_s=60)
        server.wait(timeout=10)
        state.remove("server", str(data))


def _psql(inst: Installation, sock: Path, sql: str) -> list[str | Path]:
    argv: list[str | Path] = [inst.bin("psql"), "-X", "-h", sock, "-p", "5432"]
    return argv + ["-U", "postgres", "-d", "postgres", "-Atc", sql]


def _query_when_ready(
    inst: Installation, sock: Path, user: proc.User, pid: int, server_log: Path, sql: str
) -> str:
    argv = _psql(inst, sock, sql)
    deadline = time.monotonic() + VERIFY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not proc.pid_alive(pid):
            raise BuildError(f"verification server exited early:\n{log_tail(server_log)}")
        res = proc.run(argv, user=user, cwd=sock, check=False, timeout_s=30)
        if res.returncode == 0:
            return res.stdout.strip()
        time.sleep(0.3)
    raise BuildError(f"verification server did not answer in {VERIFY_TIMEOUT_S:g} s")


def log_tail(log_path: Path, lines: int = 30) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def parse_controldata(text: str) -> dict[str, str]:
    """`pg_controldata` output as a dict of `label: value`."""
    out = {}
    for line in text.splitlines():
        if ":" in line:
            label, value = line.split(":", 1)
            out[label.strip()] = value.strip()
    return out

"""The session's PostgreSQL builds, made one after another in a background process while
the tests run.

`make test` starts them before anything else that can run beside them (go-tpc's build,
ruff, mypy), as soon as the Debian packages and the venv are there:

    .venv/bin/python tests/prebuild.py make tools lint typecheck pytest

runs the command while the builds are made in the background, then ends what is still
building and exits with the command's code; the test session then starts none of its own
(BLOCKLAB_TEST_PREBUILD=0). Run by hand, a test session makes them itself.

On a cold cache (every CI run) the six builds the tests ask for took about 18 of CI's
55 minutes, each made when its first test asked for it, while nothing else ran. Most
of the tests before and between those are waiting on servers, checkpoints and timers,
not on the two cores: the builds fit into that time. The background process is
`blocklab build` itself, under the parent make's variables like every test build; a
test that needs a build still calls ensure_build, which waits on the build's lock when
the background process is making it and finds it cached after. A build the background
process never reached (or that failed) is made by the test that asks, as before, and
fails there with its log.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# (page kB, WAL block kB), in the order the test tree first asks for them: the demo's two
# (8/8, 4/8: tests/execution, tests/fleet, make demo; pg18_8k and pg18_4k), the WAL block
# examples' 8/4 (seed004, wal-block-clients; pg18_wal4k: tests/postgres, tests/probes),
# 16/8 (own-database, seed002), 2/8 (page-size); last, 8/8 with link-order seed 1
# (tests/postgres/test_link_order.py: a layout variant, which the compiler cache makes a
# link of the first build's objects). No test asks for another: a build is 2 to 2.5
# minutes of both cores on a quiet machine here.
PREBUILT: tuple[tuple[int, ...], ...] = (
    (8, 8), (4, 8), (8, 4), (16, 8), (2, 8), (8, 8, 1),
)  # fmt: skip
STOP_GRACE_S = 30.0  # an ended build leaves a half-made prefix: ensure_build removes it
# The builds go before the tests on the CPUs (tests wait on them, and no test asserts a
# speed): a lower niceness for root, as CI is; others keep theirs (nice says it cannot).
# A build gives its make's session the same (proc.keeping_niceness): with autogroup
# scheduling a session's niceness, not its processes', weighs against the tests' sessions.
NICENESS = -10


def example_geometries(example: Path) -> set[tuple[int, ...]]:
    """The (page kB, WAL block kB) builds an example file's matrix asks for (8 kB WAL
    blocks when it names none)."""
    matrix = tomllib.loads(example.read_text())["matrix"]
    sizes = [matrix.get(k, 8) for k in ("block_size", "wal_block_size")]
    pages, wal = (v if isinstance(v, list) else [v] for v in sizes)
    return set(itertools.product(pages, wal))


def build_argv(block_size_kb: int, wal_block_size_kb: int, layout_seed: int = 0) -> list[str]:
    layout = ["--layout-seed", str(layout_seed)] if layout_seed else []
    return [
        sys.executable, "-m", "blocklab.cli", "build", "--pg", "18",
        "--block-size", str(block_size_kb), "--wal-block-size", str(wal_block_size_kb), *layout,
    ]  # fmt: skip


def script(geometries: Sequence[tuple[int, ...]]) -> str:
    """One shell line per build; a failed build does not stop the ones after it. A
    geometry whose layout variant follows compiles through the compiler cache, so that
    variant only links; the others do not pay the cache's cold cost (a third more CPU:
    blocklab.postgres.compiler_cache)."""
    relinked = {g[:2] for g in geometries if len(g) > 2}

    def line(g: tuple[int, ...]) -> str:
        cache = "BLOCKLAB_CCACHE=1 " if len(g) == 2 and g in relinked else ""
        return f"{cache}nice -n {NICENESS} " + " ".join(build_argv(*g)) + " || true"

    return "\n".join(["set -u", *map(line, geometries)])


@contextmanager
def in_background(
    geometries: Sequence[tuple[int, ...]], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[int]:
    """Start the builds (in `env`, or this process's environment); at exit, end whatever
    is still building (its process group, by the PID this started) and wait for it.
    Yields the PID."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            ["bash", "-c", script(geometries)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ) if env is None else env, start_new_session=True,
        )  # fmt: skip
    try:
        yield child.pid
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


# What tests/conftest.py gives every test: the shared build cache (CI's own empty one)
# and a parent make's variables, so a background build is the build a test would make.
DEFAULT_CACHE = "/var/lib/blocklab/cache"
NO_PREBUILD = "BLOCKLAB_TEST_PREBUILD"  # "0": the session starts no builds of its own
PARENT_MAKE = {"MAKELEVEL": "1", "MAKEFLAGS": "w", "MFLAGS": "-w"}
# The tests' builds are compiled at -Og (COPT is appended to PostgreSQL's CFLAGS, and is
# part of the build key): no test asserts a speed. A whole 8/8 or 4/8 build here took 216
# and 220 CPU s (125 to 129 s) at -Og against 257 to 269 (147 to 150 s) at -O1, and its
# server was as fast (pgbench -i -s 10: 1.2 to 1.3 s against 1.3 to 1.4); -O0 took 173 to
# 192 CPU s but halved the server's speed (2.4 to 2.5 s), which the tests pay back. A COPT
# already in the environment is kept. `blocklab run` and `make demo` compile at -O2.
TEST_COMPILE = {"COPT": "-Og"}


def session_env(environ: dict[str, str], home: Path) -> dict[str, str]:
    """The background builds' environment, as a test session's (tests/conftest.py)."""
    cache = environ.get("BLOCKLAB_TEST_CACHE", DEFAULT_CACHE)
    return {
        **TEST_COMPILE, **environ, **PARENT_MAKE,
        "BLOCKLAB_CACHE": cache, "BLOCKLAB_HOME": str(home),
    }  # fmt: skip


def main(command: Sequence[str]) -> int:
    """Run `command` while the session's builds are made in the background."""
    if not command:
        print("usage: prebuild.py COMMAND [ARG ...]", file=sys.stderr)
        return 2
    root = Path("/var/tmp/blocklab-tests")  # the server user must reach a verify cluster
    root.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="prebuild-", dir=root))
    home.chmod(0o755)
    env = session_env(dict(os.environ), home)
    log = Path(env["BLOCKLAB_CACHE"]) / "logs" / "prebuild.log"
    # ends the builds too; the caller's handler back after (a test calls this in-process)
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with in_background(PREBUILT, log, env):
            done = subprocess.run(list(command), env={**os.environ, NO_PREBUILD: "0"})
            return done.returncode
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

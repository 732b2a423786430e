"""Two blocklab processes at once: the same experiment into the same results (the second
refuses, naming the first), the same experiment into two results directories (each has
its own servers, ports, mounts and loop devices; the shared dataset is made once), and
one build asked for by two processes (built once; a build killed midway is redone)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from faults_helpers import blocklab, env_for, nothing_left, own_home, release_home, stored_runs

from blocklab.paths import Paths, ensure_dir
from blocklab.postgres import build
from blocklab.postgres.installation import Installation

pytestmark = [pytest.mark.build, pytest.mark.root, pytest.mark.faults]

EXPERIMENT = """
[experiment]
name = "at-once"
rounds = 1

[matrix]
postgres = "18"
block_size = 8
wal_block_size = 8
storage = {{ kind = "ext4" }}
scale = 1
workload = "simple-update"
clients = 1
duration = {duration}
warmup = 0
"""


def _spawn(args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "blocklab.cli", *args], env=env, stdout=f, stderr=f
        )


def _wait(p: subprocess.Popen[bytes], out: Path, timeout_s: float = 600) -> str:
    try:
        p.wait(timeout=timeout_s)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out.read_text()


def test_same_experiment_same_results_second_refuses(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    home = own_home(paths, "same")
    exp = home / "x.toml"
    exp.write_text(EXPERIMENT.format(duration=3))
    results = home / "results"
    args = ["run", str(exp), "--results", str(results), "--quiet"]
    env = env_for(home, paths)
    first = _spawn(args, env, home / "first.out")
    try:
        lock = results / ".run-at-once.lock"
        deadline = time.monotonic() + 300
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, (home / "first.out").read_text()
            assert time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.1)
        second = blocklab(*args, env=env)
        assert second.returncode == 75, second.stdout + second.stderr
        assert f"being run by another blocklab process (PID {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        out = _wait(first, home / "first.out")
        assert first.returncode == 0, out
        runs = stored_runs(results)
        assert [(s, n) for _, n, s, _ in runs] == [("ok", 1)], runs
        # the lock went with its process: the same command now runs (nothing left to do)
        third = blocklab(*args, env=env)
        assert third.returncode == 0, third.stdout + third.stderr
        assert stored_runs(results) == runs
        assert nothing_left(home) == {}
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        release_home(home)


def _storage_facts(results: Path) -> dict[str, str]:
    with closing(sqlite3.connect(results / "blocklab.sqlite")) as c:
        (prov,) = c.execute("SELECT provenance_json FROM runs").fetchone()
    data = json.loads(prov)["storage_facts"]["data"]
    return {"mount_point": data["mount_point"], "loop_device": data["loop_device"]}


def test_two_experiments_at_once_share_nothing_wrongly(paths: Paths, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    home = own_home(paths, "twin")  # one home: the same work directory and dataset cache
    exp = home / "x.toml"
    exp.write_text(EXPERIMENT.format(duration=2))
    env = env_for(home, paths)
    procs = []
    try:
        for name in ("a", "b"):
            args = ["run", str(exp), "--results", str(home / f"results-{name}"), "--quiet"]
            procs.append(_spawn(args, env, home / f"{name}.out"))
        outs = [_wait(p, home / f"{n}.out") for p, n in zip(procs, "ab", strict=True)]
        assert [p.returncode for p in procs] == [0, 0], outs
        facts = [_storage_facts(home / f"results-{n}") for n in "ab"]
        assert facts[0]["mount_point"] != facts[1]["mount_point"], facts
        assert facts[0]["loop_device"] != facts[1]["loop_device"], facts
        for n in "ab":
            assert [s for _, _, s, _ in stored_runs(home / f"results-{n}")] == ["ok"]
        # one dataset, made by one of them; the other waited and found it
        made = sum("made;" in o for o in outs)
        found = sum("found;" in o for o in outs)
        assert (made, found) == (1, 1), outs
        assert nothing_left(home) == {}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        release_home(home)


FAKE_CONFIGURE = """#!/bin/sh
# A PostgreSQL tree that "compiles" slowly and installs a real build's binaries.
PACKAGE_VERSION='18.0'
for a in "$@"; do case "$a" in --prefix=*) echo "PREFIX=${a#--prefix=}" > config.mk;; esac; done
"""

# src/backend "compiles" slowly and installs a real build's binaries; every other
# directory of the build's recipe (blocklab.postgres.build.COMPILED ...) has nothing to do
FAKE_BACKEND = """include ../../config.mk
all:
\tsleep {sleep_s}
install:
\techo "$$PPID" >> {counter}
\tmkdir -p $(PREFIX)
\tcp -a {real}/bin {real}/lib {real}/share $(PREFIX)/
generated-headers:
\t@true
"""
NOTHING = "all install install-local generated-headers:\n\t@true\n"


def _fake_tree(root: Path, real: Installation, counter: Path, sleep_s: int) -> Path:
    tree = ensure_dir(root)
    (tree / "configure").write_text(FAKE_CONFIGURE)
    (tree / "configure").chmod(0o755)
    contrib = [f"contrib/{name}" for name in build.CONTRIB]
    for d in {*build.COMPILED, *build.INSTALLED_TOO, "src", *contrib}:
        (ensure_dir(tree / d) / "Makefile").write_text(NOTHING)
    (tree / "src/backend/Makefile").write_text(
        FAKE_BACKEND.format(sleep_s=sleep_s, counter=counter, real=real.prefix)
    )
    return tree


def test_a_build_asked_for_twice_is_built_once(paths: Paths, pg18_8k: Installation) -> None:
    home = own_home(paths, "build")
    env = env_for(home, paths, BLOCKLAB_CACHE=str(home / "cache"))  # a cache of its own
    counter = home / "installs.txt"
    tree = _fake_tree(home / "tree", pg18_8k, counter, sleep_s=3)
    args = ["build", "--pg", "18", "--source", str(tree)]
    procs = [_spawn(args, env, home / f"build{i}.out") for i in range(2)]
    outs = [_wait(p, home / f"build{i}.out") for i, p in enumerate(procs)]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(counter.read_text().splitlines()) == 1, counter.read_text()  # installed once
    assert sum("waiting for another blocklab process" in o for o in outs) == 1, outs
    keys = {ln.split()[1] for o in outs for ln in o.splitlines() if ln.startswith("key ")}
    assert len(keys) == 1, outs
    logs = list((home / "cache" / "builds").glob("*/blocklab-build.log"))
    assert len(logs) == 1, logs


def test_a_build_killed_midway_is_built_again(paths: Paths, pg18_8k: Installation) -> None:
    home = own_home(paths, "rebuild")
    env = env_for(home, paths, BLOCKLAB_CACHE=str(home / "cache"))
    counter = home / "installs.txt"
    tree = _fake_tree(home / "tree", pg18_8k, counter, sleep_s=2)
    args = ("build", "--pg", "18", "--source", str(tree))
    killed = blocklab(*args, env={**env, "BLOCKLAB_KILL_AT": "build+1"})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert not counter.exists()  # killed while compiling
    time.sleep(2.5)  # the orphaned `make` ends on its own
    again = blocklab(*args, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(counter.read_text().splitlines()) == 1

"""blocklab.workloads.execution with real processes: output lands in the raw files, a
driver that outlives its server or its time is ended with its whole process group, and
every driver runs as the server's unprivileged user, never root.

The raw directories are under the test home, not pytest's tmp_path (0700: the driver's
user could not reach it)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blocklab import proc
from blocklab.paths import Paths, ensure_dir
from blocklab.state import State
from blocklab.storage.cleanup import release_all
from blocklab.workloads import execution
from blocklab.workloads.execution import DRIVER_DIR, driver_user, execute, run_driver


@pytest.fixture
def raw(paths: Paths) -> Path:
    """A run's raw directory as the runner makes it: root's, under a reachable home."""
    return ensure_dir(paths.home / "execution" / uuid.uuid4().hex[:8])


def _state(raw: Path) -> State:
    return State(raw / "state.json")


# a "driver" that prints, starts a child in its own process group, and hangs
HANGING = ["sh", "-c", "echo started; echo oops >&2; sleep 300 & echo $! > child.pid; wait"]


def test_exit_code_and_output_in_the_raw_files(raw: Path) -> None:
    res = execute(["sh", "-c", "echo out; echo err >&2; exit 3"], raw, "x",
                  timeout_s=60, server_alive=lambda: True, state=_state(raw))  # fmt: skip
    assert (res.exit_code, res.stdout, res.stderr, res.ended) == (3, "out\n", "err\n", "")
    assert (raw / "x.stdout").read_text() == "out\n"


def test_the_driver_runs_unprivileged_in_its_own_directory(raw: Path) -> None:
    """Never uid 0: the uid /proc showed is the server user's, so is `id -u`'s. The
    driver works in a temporary directory of its own; root copies its regular files (not
    its symlinks) into raw/DRIVER_DIR, and the raw directory stays closed to it."""
    user = driver_user()
    assert user.uid != 0 and pwd.getpwuid(user.uid).pw_name == "blocklab"
    script = (
        f"id -u; pwd; echo data > mine; ln -s /etc/shadow secret; "
        f"touch {raw}/theirs 2>/dev/null || echo refused"
    )
    res = execute(["sh", "-c", script], raw, "x", timeout_s=60, server_alive=lambda: True,
                  state=_state(raw))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert res.uid == user.uid != 0
    uid_said, cwd, refused = res.stdout.split()
    assert int(uid_said) == user.uid and refused == "refused"
    assert not Path(cwd).exists()  # removed after the copy
    assert (raw / DRIVER_DIR / "mine").read_text() == "data\n"
    assert not (raw / DRIVER_DIR / "secret").exists() and not (raw / "theirs").exists()
    assert {p.stat().st_uid for p in (raw, raw / DRIVER_DIR, raw / DRIVER_DIR / "mine")} == {0}
    assert run_driver(["id", "-u"], timeout_s=60).stdout.strip() == str(user.uid)  # loads


def test_a_raw_directory_closed_to_the_driver_still_gets_its_files(raw: Path) -> None:
    closed = ensure_dir(raw / "closed")
    os.chmod(closed, 0o700)
    res = execute(["sh", "-c", "echo x > f"], closed, "x", timeout_s=60,
                  server_alive=lambda: True, state=_state(raw))  # fmt: skip
    assert res.exit_code == 0 and (closed / DRIVER_DIR / "f").read_text() == "x\n"


def test_a_driver_outliving_its_server_is_ended_with_its_group(raw: Path) -> None:
    t0 = time.monotonic()
    res = execute(HANGING, raw, "x", timeout_s=600, server_alive=lambda: False, grace_s=1.0,
                  state=_state(raw))  # fmt: skip
    assert res.exit_code is None and "after the server died" in res.ended
    assert time.monotonic() - t0 < 300  # not the child's sleep, not the timeout
    assert res.stdout == "started\n" and res.stderr == "oops\n"
    child = int((raw / DRIVER_DIR / "child.pid").read_text())  # from its working directory
    deadline = time.monotonic() + 10
    while proc.pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.pid_alive(child)  # the whole group was ended


def test_a_driver_over_its_time_is_ended(raw: Path) -> None:
    res = execute(["sleep", "300"], raw, "x", timeout_s=1, server_alive=lambda: True,
                  state=_state(raw))  # fmt: skip
    assert res.exit_code is None and res.ended.startswith("timed out after 1 s")
    assert os.path.exists(raw / "x.stderr")


def test_the_working_directory_is_in_the_state_while_the_driver_runs(raw: Path) -> None:
    """Recorded before it is made, with the device and inode it got; gone from both the
    file system and the state after."""
    script = f"pwd; cat {raw}/state.json"
    res = execute(["sh", "-c", script], raw, "x", timeout_s=60, server_alive=lambda: True,
                  state=_state(raw))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    cwd, recorded = res.stdout.split("\n", 1)
    (entry,) = json.loads(recorded)
    assert (entry["kind"], entry["ident"], entry["info"]["made"]) == ("tempdir", cwd, True)
    assert entry["owner_pid"] == os.getpid()
    assert not Path(cwd).exists() and _state(raw).entries() == []


@pytest.mark.parametrize("after", ["make_dir", "os.open", "fchmod", "fchown"])
def test_a_ctrl_c_as_the_directory_is_made_leaves_neither_it_nor_its_entry(
    raw: Path, monkeypatch: pytest.MonkeyPatch, after: str
) -> None:
    """A Ctrl-C that lands just after a step of making the driver's directory (make_dir
    returned, the directory opened, its mode or owner set) undoes what was made: no
    directory and no State entry are left for `blocklab cleanup`. Before, one landing
    as make_dir returned left both (made=True)."""
    made: list[Path] = []
    opened: list[int] = []  # the descriptor an interrupted os.open gave: closed here
    real_make = execution.made_dirs.make_dir

    def make_dir(directory: Path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        made.append(directory)
        return real_make(directory, *args, **kwargs)

    def interrupted(real: Callable[..., Any]) -> Callable[..., Any]:
        """`real`, then a KeyboardInterrupt, once (the clean-up's own calls go on)."""
        calls = []

        def step(*args: Any, **kwargs: Any) -> Any:
            got = real(*args, **kwargs)
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return got

        return step

    monkeypatch.setattr(execution.made_dirs, "make_dir", make_dir)
    if after == "make_dir":
        monkeypatch.setattr(execution.made_dirs, "make_dir", interrupted(make_dir))
    else:
        name = after.removeprefix("os.")
        real = getattr(os, name)

        def kept(*args: Any, **kwargs: Any) -> Any:
            got = real(*args, **kwargs)
            if name == "open" and not opened:  # the interrupted call's
                opened.append(got)
            return got

        monkeypatch.setattr(os, name, interrupted(kept))
    state = _state(raw)
    try:
        with pytest.raises(KeyboardInterrupt), execution.driver_dir(raw, driver_user(), state):
            pytest.fail("the directory was made whole")
    finally:
        monkeypatch.undo()
        for fd in opened:
            os.close(fd)
    (work,) = made
    try:
        assert not work.exists() and state.entries() == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


KILLED = """
import os, signal, sys
from pathlib import Path
from blocklab.state import State
from blocklab.workloads.execution import driver_dir, driver_user
with driver_dir(Path(sys.argv[1]), driver_user(), State(Path(sys.argv[2]))) as work:
    (work / "log").write_text("x")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_blocklab_leaves_the_working_directory_to_cleanup(raw: Path) -> None:
    """SIGKILLed while a driver's directory exists: the state still names it, and what
    `blocklab cleanup` (or the next run) releases removes it."""
    state = _state(raw)
    done = subprocess.run([sys.executable, "-c", KILLED, str(raw), str(state.path)])
    assert done.returncode == -signal.SIGKILL
    (entry,) = state.entries()
    work = Path(entry.ident)
    try:
        assert (entry.kind, entry.info["made"]) == ("tempdir", True) and work.is_dir()
        assert work.stat().st_uid == driver_user().uid
        (released,) = release_all(state)
        assert released == f"directory {work}" and not work.exists()
        assert state.entries() == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_driver_that_swaps_its_directory_for_a_symlink_gets_nothing(
    raw: Path, tmp_path: Path
) -> None:
    """The driver's user owns its directory, so it can move it away and leave a symlink
    to a directory of root's under its name. Root then neither copies from nor deletes
    through that symlink: the files come from the directory it made, the canary stays."""
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "canary").write_text("CANARY-SECRET")
    script = f'd=$PWD; echo mine > f; cd /; mv "$d" "$d.moved"; ln -s {secret} "$d"; echo $d'
    res = execute(["sh", "-c", script], raw, "x", timeout_s=60, server_alive=lambda: True,
                  state=_state(raw))  # fmt: skip
    work = Path(res.stdout.strip())
    try:
        assert res.exit_code == 0, res.stderr
        assert sorted(os.listdir(raw / DRIVER_DIR)) == ["f"]  # from the moved directory
        assert (secret / "canary").read_text() == "CANARY-SECRET"
        assert work.is_symlink() and _state(raw).entries() == []  # left alone, forgotten
    finally:
        work.unlink(missing_ok=True)
        shutil.rmtree(f"{work}.moved", ignore_errors=True)

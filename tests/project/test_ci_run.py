""".ci/run's contract, with `make` replaced by a script that replays pytest's recorded
last lines: make test gets an empty build cache of its own, removed afterwards; the
pytest summary is repeated at the end; any failure is exit 1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CI_RUN = Path(__file__).resolve().parents[2] / ".ci" / "run"
PASSED = "======================== 181 passed in 1873.22s (0:31:13) ========================"
FAILED = "============= 1 failed, 180 passed in 1901.50s (0:31:41) ============="
FAKE_MAKE = """#!/bin/sh
{ echo "args=$*"; echo "cache=$BLOCKLAB_TEST_CACHE"; ls -A "$BLOCKLAB_TEST_CACHE" | wc -l
  stat -c %a "$BLOCKLAB_TEST_CACHE"; } > "$FAKE_RECORD"
printf '%s\\n' "$FAKE_OUTPUT"
exit "$FAKE_STATUS"
"""


def _ci_run(
    tmp_path: Path, output: str, status: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "make").write_text(FAKE_MAKE)
    (bin_dir / "make").chmod(0o755)
    record = tmp_path / "record"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_RECORD": str(record),
        "FAKE_OUTPUT": output,
        "FAKE_STATUS": str(status),
        "BLOCKLAB_TEST_CACHE": "/var/lib/blocklab/cache",  # a warm cache CI must not use
    }
    done = subprocess.run(
        ["bash", str(CI_RUN)], env=env, capture_output=True, text=True, timeout=60
    )
    return done, record.read_text().splitlines()


def test_make_test_gets_an_empty_cache_of_its_own_that_is_removed(tmp_path: Path) -> None:
    done, (args, cache, entries, mode) = _ci_run(tmp_path, f"lint ok\n{PASSED}", 0)
    assert done.returncode == 0, done.stdout + done.stderr
    assert args == "args=test"
    assert cache.startswith("cache=/var/tmp/blocklab-ci-cache.")
    assert (entries, mode) == ("0", "755")  # empty, and the server user can reach builds
    assert not Path(cache.removeprefix("cache=")).exists()
    assert done.stdout.splitlines()[-2:] == [f"ci: pytest: {PASSED}", done.stdout.splitlines()[-1]]
    assert done.stdout.splitlines()[-1].startswith("ci: ok after ")


@pytest.mark.parametrize(
    ("output", "status", "said"),
    [
        (f"SKIPPED [1] tests/x.py:3: no memory cgroup controller\n{FAILED}", 2, FAILED),
        ("tests/x.py:1: error: Incompatible types", 2, "no pytest summary"),
        ("pytest printed nothing", 0, "no pytest summary"),
    ],
)
def test_a_failure_is_exit_1_and_says_what_pytest_said(
    tmp_path: Path, output: str, status: int, said: str
) -> None:
    done, record = _ci_run(tmp_path, output, status)
    assert done.returncode == 1, done.stdout + done.stderr
    assert said in done.stdout and "ci: FAILED" in done.stdout
    assert not Path(record[1].removeprefix("cache=")).exists()
    if "SKIPPED" in output:
        assert "ci:   SKIPPED [1] tests/x.py:3: no memory cgroup controller" in done.stdout

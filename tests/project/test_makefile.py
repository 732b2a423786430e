"""The Makefile's set-up asks dpkg what is installed (no stamp file that a stale or copied
/var/lib/blocklab could hold), and `make demo` passes DEMO_ARGS to `blocklab run`."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _make(*args: str) -> str:
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(REPO), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_apt_missing_names_exactly_the_packages_dpkg_lacks() -> None:
    listed = "bash blocklab-no-such-package coreutils"
    assert _make("apt-missing", f"APT_PACKAGES={listed}").split() == ["blocklab-no-such-package"]


def test_every_package_the_makefile_lists_is_installed() -> None:
    assert _make("apt-missing") == ""  # make test ran `make setup` first


def test_demo_passes_demo_args_to_blocklab_run() -> None:
    lines = _make("-n", "demo", "DEMO_ARGS=--rounds 2 --scale 1").splitlines()
    assert lines[-1].endswith("/bin/blocklab run --rounds 2 --scale 1"), lines


def test_the_demo_installs_a_subset_of_what_the_tests_install() -> None:
    """`make demo` installs only the demo's packages (apt-demo); each is one `make test`
    installs too, and the demo's set-up skips go-tpc (tools)."""
    demo = _make("-n", "apt-demo").split("printf '%s\\n' ", 1)[1].split(" | sort", 1)[0].split()
    full = _make("-n", "apt").split("printf '%s\\n' ", 1)[1].split(" | sort", 1)[0].split()
    assert "bison" in demo and "chromium" not in demo and "chromium" in full
    assert set(demo) < set(full)
    assert "go-tpc" not in _make("-n", "demo")

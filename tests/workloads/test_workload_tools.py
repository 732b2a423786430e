"""Locating the workload drivers' programs: versions parsed from their real output, a
missing program or a wrong go-tpc version is a UserError (exit 2) that says `make setup`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.workloads import tools

DATA = Path(__file__).parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]


def test_versions_parse_from_recorded_output() -> None:
    assert tools.parse_sysbench_version((DATA / "sysbench/version.txt").read_text()) == "1.0.20"
    assert tools.parse_go_tpc_version((DATA / "go-tpc/version.txt").read_text()) == "v1.0.12"
    assert tools.parse_go_tpc_version((DATA / "go-tpc/version-dev.txt").read_text()) == "dev"


def test_sysbench_help_lists_the_pgsql_driver() -> None:
    help_text = (DATA / "sysbench/help.txt").read_text()
    assert tools.parse_sysbench_db_drivers(help_text) == ["mysql", "pgsql"]
    assert tools.parse_sysbench_db_drivers("no such section") == []


def test_the_pinned_go_tpc_version_is_the_one_go_mod_requires() -> None:
    go_mod = (REPO / "tools/go-tpc/go.mod").read_text()
    assert re.search(r"^require github.com/pingcap/go-tpc (\S+)$", go_mod, re.M)[1] == (  # type: ignore[index]
        tools.GO_TPC_VERSION
    )


@pytest.mark.parametrize("driver", ["sysbench", "tpcc", "tpch"])
def test_a_missing_program_names_the_driver_and_make_setup(
    driver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tools.TOOLS_BIN_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError) as e:
        tools.locate(driver)
    assert e.value.exit_code == 2
    assert repr(driver) in str(e.value) and "make setup" in str(e.value)


def test_an_unknown_driver_names_the_allowed_ones() -> None:
    with pytest.raises(UserError, match=r"workload.driver: unknown driver 'hammerdb' \(allowed: "):
        tools.locate("hammerdb")


def test_the_installed_drivers_are_found_with_their_versions() -> None:
    """`make setup` installed them (sysbench from Debian, go-tpc into .tools/bin)."""
    assert tools.locate("sysbench").version == "1.0.20"
    located = tools.locate("tpcc")
    assert located.version == tools.GO_TPC_VERSION
    assert located.path == tools.tools_bin() / "go-tpc"

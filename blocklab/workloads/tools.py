"""Where each workload driver's program is, and which version it is.

sysbench comes from Debian (`make setup` installs the package; it must carry its pgsql
driver). go-tpc (the `tpcc` and `tpch` drivers) is built by `make setup` from
tools/go-tpc, whose go.mod pins GO_TPC_VERSION, into the project's .tools/bin
(BLOCKLAB_TOOLS_BIN names another directory). The parsers are tested on output of these
versions, so a go-tpc of another version is refused; sysbench's version is recorded.

`parse_*` functions are pure; `locate()` and `version()` look at the machine.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from blocklab import proc
from blocklab.errors import CommandError, UserError

GO_TPC_VERSION = "v1.0.12"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN_ENV = "BLOCKLAB_TOOLS_BIN"
INSTALL_HINT = "run `make setup` in the blocklab checkout"


@dataclass(frozen=True)
class Tool:
    driver: str  # the workload driver's name in an experiment file
    program: str  # the executable's file name


TOOLS = {
    "sysbench": Tool("sysbench", "sysbench"),
    "tpcc": Tool("tpcc", "go-tpc"),
    "tpch": Tool("tpch", "go-tpc"),
}


@dataclass(frozen=True)
class Located:
    driver: str
    path: Path
    version: str  # recorded with every run


def tools_bin() -> Path:
    """The directory `make setup` builds go-tpc into."""
    return Path(os.environ.get(TOOLS_BIN_ENV) or PROJECT_ROOT / ".tools" / "bin")


def tool_for(driver: str) -> Tool:
    try:
        return TOOLS[driver]
    except KeyError:
        allowed = ", ".join(sorted(TOOLS))
        raise UserError(
            f"workload.driver: unknown driver {driver!r} (allowed: {allowed})"
        ) from None


def locate(driver: str) -> Located:
    """The driver's program, checked to run and to be a version blocklab can parse."""
    tool = tool_for(driver)
    path = find_program(tool)
    if tool.program == "sysbench":
        return Located(driver, path, check_sysbench(path))
    return Located(driver, path, check_go_tpc(path))


def find_program(tool: Tool) -> Path:
    """The project's tool directory first (go-tpc), then PATH."""
    own = tools_bin() / tool.program
    if os.access(own, os.X_OK):
        return own
    found = shutil.which(tool.program)
    if found is None:
        raise UserError(
            f"workload driver {tool.driver!r} needs {tool.program}, which is not installed "
            f"(looked in {tools_bin()} and PATH): {INSTALL_HINT}"
        )
    return Path(found)


def check_sysbench(path: Path) -> str:
    version = parse_sysbench_version(_output(path, "--version"))
    if "pgsql" not in parse_sysbench_db_drivers(_output(path, "--help")):
        raise UserError(
            f"workload driver 'sysbench': {path} was built without its pgsql driver: "
            f"install Debian's sysbench package ({INSTALL_HINT})"
        )
    return version


def check_go_tpc(path: Path) -> str:
    version = parse_go_tpc_version(_output(path, "version"))
    if version != GO_TPC_VERSION:
        raise UserError(
            f"workload drivers 'tpcc' and 'tpch': {path} is go-tpc {version}, blocklab's "
            f"parsers are made for {GO_TPC_VERSION}: {INSTALL_HINT}"
        )
    return version


def _output(path: Path, *args: str) -> str:
    try:
        return proc.run([path, *args], timeout_s=30).stdout
    except (CommandError, OSError) as e:
        raise UserError(f"{path} {' '.join(args)} does not run ({e}): {INSTALL_HINT}") from None


def parse_sysbench_version(text: str) -> str:
    """'sysbench 1.0.20' -> '1.0.20'."""
    m = re.search(r"^sysbench (\S+)", text, re.MULTILINE)
    if m is None:
        raise UserError(f"sysbench --version printed no version: {text.strip()[:200]!r}")
    return m.group(1)


def parse_sysbench_db_drivers(help_text: str) -> list[str]:
    """The names under 'Compiled-in database drivers:' in `sysbench --help`."""
    _, found, rest = help_text.partition("Compiled-in database drivers:")
    if not found:
        return []
    names = []
    for line in rest.splitlines()[1:]:
        m = re.match(r"\s+(\w+) - ", line)
        if m is None:
            break
        names.append(m.group(1))
    return names


def parse_go_tpc_version(text: str) -> str:
    """'Release version: v1.0.12' (from `go-tpc version`) -> 'v1.0.12'."""
    m = re.search(r"^Release version: (\S+)", text, re.MULTILINE)
    if m is None:
        raise UserError(f"go-tpc version printed no release version: {text.strip()[:200]!r}")
    return m.group(1)

"""The command line imports a command's module only when that command is asked for
(blocklab.cli.COMMAND_MODULES): the table must name every command each module defines,
and nothing else, or a command would vanish from `blocklab --help` or fail to load."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import blocklab.commands
from blocklab.cli import COMMAND_MODULES, cli


def test_the_table_names_every_command_of_every_module_and_only_those() -> None:
    defined = {}
    for info in pkgutil.iter_modules(blocklab.commands.__path__):
        module = importlib.import_module(f"blocklab.commands.{info.name}")
        for command in getattr(module, "COMMANDS", []):
            defined[command.name] = info.name
    assert defined == COMMAND_MODULES


def test_each_command_is_found_by_its_name_and_an_unknown_one_is_not() -> None:
    ctx = cli.make_context("blocklab", ["--help"], resilient_parsing=True)
    for name in COMMAND_MODULES:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "nosuch") is None


def _loaded(imports: str, prefixes: tuple[str, ...]) -> str:
    """The modules starting with one of `prefixes` that a new interpreter has loaded after
    running `imports`, printed as a sorted list."""
    code = (
        f"import sys; {imports}; "
        f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_starting_imports_no_command_module_and_no_scipy_stats() -> None:
    assert _loaded("from blocklab import cli", ("blocklab.commands.", "scipy")) == "[]"


def test_help_lists_every_command_and_an_unknown_command_is_exit_2() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = result.output.split("Commands:")[1]
    assert [line.split()[0] for line in listed.strip().splitlines()] == sorted(COMMAND_MODULES)
    bad = CliRunner().invoke(cli, ["nosuch"])
    assert bad.exit_code == 2 and "No such command 'nosuch'" in bad.output


def test_the_commands_modules_leave_scipys_heaviest_parts_until_they_are_used() -> None:
    """scipy.stats, .optimize and .integrate took 0.35 to 0.7 s each to import here;
    they are imported where a drift, a smallest effect or an equivalence power is
    computed, not by every command that might."""
    imports = (
        "import importlib; from blocklab.cli import COMMAND_MODULES; "
        "[importlib.import_module('blocklab.commands.' + m) "
        "for m in set(COMMAND_MODULES.values())]"
    )
    heaviest = ("scipy.stats", "scipy.optimize", "scipy.integrate")
    assert _loaded(imports, heaviest) == "[]"


def test_listing_the_commands_imports_neither_scipy_nor_the_site_generation() -> None:
    """`blocklab --help` loads every command's module for its short help: none of them
    may bring in scipy or the report's generation (blocklab.report.site: a quarter of a
    second here before 2026-12-01); the report command imports it when it runs."""
    code = (
        "import contextlib, io; from blocklab.cli import main; "
        "out = contextlib.redirect_stdout(io.StringIO()); out.__enter__(); "
        "assert main(['--help']) == 0; out.__exit__(None, None, None)"
    )
    assert _loaded(code, ("scipy", "blocklab.report.site", "blocklab.analysis.stats")) == "[]"


def test_the_report_packages_lazy_names_are_its_modules_own() -> None:
    """blocklab.report's names (PEP 562) each load the object of the module that defines
    it, and a name it does not have is an AttributeError, as from any module."""
    import pytest

    import blocklab.report
    from blocklab.report import server, site

    assert sorted(blocklab.report.__all__) == sorted(blocklab.report._MODULE_OF)
    for name in blocklab.report.__all__:
        assert getattr(blocklab.report, name) is getattr(
            {"server": server, "site": site}[blocklab.report._MODULE_OF[name]], name
        )
    with pytest.raises(AttributeError, match="nosuch"):
        _ = blocklab.report.nosuch  # type: ignore[attr-defined]

"""The command line. The only place that prints results and picks exit codes."""

from __future__ import annotations

import importlib
import os
import sys

import click

from blocklab import __version__
from blocklab.console import control_escaped
from blocklab.errors import BlocklabError

OUTPUT_CLOSED = 141  # 128 + SIGPIPE


# command name -> the module of blocklab.commands that defines it (in its COMMANDS): a
# command's module is imported when the command runs or its help is shown, not at every
# start (importing them all took 1.6 s of CPU here, before any command did anything:
# scipy.stats, pydantic models, procrastinate). tests/project/test_cli_lazy.py checks the
# table against the modules' COMMANDS.
COMMAND_MODULES: dict[str, str] = {
    "agent": "fleet", "build": "build", "builds": "build", "cleanup": "cleanup",
    "device": "device", "economics": "economics", "export": "export", "fleet": "fleet",
    "plan": "plan", "report": "report", "run": "run", "selftest": "selftest",
    "serve": "report", "summary": "summary",
}  # fmt: skip


class LazyGroup(click.Group):
    """A group whose commands are imported by name, when asked for (click's documented
    lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is None:
            return None
        commands = importlib.import_module(f"blocklab.commands.{module}").COMMANDS
        return next(c for c in commands if c.name == cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blocklab")
def cli() -> None:
    """blocklab: which storage geometry makes PostgreSQL fastest and cheapest.

    Exit codes: 0 ok; 1 a run or build failed; 2 bad input (nothing was started);
    141 the output was closed by its reader (`| head`).
    """


def main(argv: list[str] | None = None) -> int:
    try:
        # click's own main turns a closed pipe into a silent exit 1 ("a run failed"):
        # make the context and invoke here, so that every exit is picked below
        args = sys.argv[1:] if argv is None else list(argv)
        with cli.make_context("blocklab", args) as ctx:
            code = cli.invoke(ctx)
    except click.exceptions.Exit as e:  # --help, --version, a command's Exit(code)
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return 2 if e.exit_code in (1, 2) else e.exit_code
    except BlocklabError as e:
        click.secho(f"error: {control_escaped(e, keep_newlines=True)}", err=True, fg="red")
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted; what was started has been released", err=True)
        return 130
    except BrokenPipeError:
        return _output_closed()
    return code if isinstance(code, int) else 0


def _output_closed() -> int:
    """stdout's reader went away (`blocklab plan | head`): say so on stderr and exit
    with 141 (128 + SIGPIPE), what a shell reports for a command a closed pipe stopped."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail again
    try:
        click.echo(
            "blocklab: output closed by its reader (a pipe such as | head); stopped", err=True
        )
    except BrokenPipeError:
        pass
    return OUTPUT_CLOSED


if __name__ == "__main__":
    sys.exit(main())

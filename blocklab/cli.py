"""The command line. The only place that prints results and picks exit codes."""

from __future__ import annotations

import os
import sys

import click

from blocklab import __version__
from blocklab.console import control_escaped
from blocklab.errors import BlocklabError

OUTPUT_CLOSED = 141  # 128 + SIGPIPE


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blocklab")
def cli() -> None:
    """blocklab: which storage geometry makes PostgreSQL fastest and cheapest.

    Exit codes: 0 ok; 1 a run or build failed; 2 bad input (nothing was started);
    141 the output was closed by its reader (`| head`).
    """


def _register() -> None:
    from blocklab.commands import (
        build,
        cleanup,
        device,
        economics,
        export,
        fleet,
        plan,
        report,
        run,
        selftest,
        summary,
    )

    for module in (
        build,
        cleanup,
        plan,
        report,
        run,
        summary,
        export,
        selftest,
        economics,
        device,
        fleet,
    ):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


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

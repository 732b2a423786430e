"""The command line. The only place that prints results and picks exit codes."""

from __future__ import annotations

import sys

import click

from blocklab import __version__
from blocklab.console import control_escaped
from blocklab.errors import BlocklabError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blocklab")
def cli() -> None:
    """blocklab: which storage geometry makes PostgreSQL fastest and cheapest.

    Exit codes: 0 ok; 1 a run or build failed; 2 bad input (nothing was started).
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
        # without standalone mode, click returns (not raises) a command's Exit(code)
        code = cli.main(args=argv, prog_name="blocklab", standalone_mode=False)
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
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Options several commands share, defined once."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from blocklab.errors import UserError
from blocklab.store.uri import INSECURE_ENV

if TYPE_CHECKING:  # pydantic models load when a command runs
    from blocklab.experiment_file import Experiment

RESULTS_HELP = (
    "results directory (SQLite) or postgresql://USER@HOST/DB URI "
    "(default: $BLOCKLAB_RESULTS, else $BLOCKLAB_HOME/results)"
)
INSECURE_HELP = "accept a PostgreSQL results database on a remote host over TCP without TLS"

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _insecure(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:  # read where the URI is checked (blocklab.store.uri)
        os.environ[INSECURE_ENV] = "1"


def results_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--results (a directory or a PostgreSQL URI) and --results-insecure."""
    f = click.option(
        "--results-insecure",
        is_flag=True,
        expose_value=False,
        callback=_insecure,
        help=INSECURE_HELP,
    )(f)
    return click.option("--results", help=RESULTS_HELP)(f)


def choice_option(flag: str, choices: Sequence[str], default: str, help: str) -> Decorator:
    """`flag` limited to `choices`, with its default shown in --help."""
    return click.option(
        flag, type=click.Choice(choices), default=default, show_default=True, help=help
    )


# the classes of blocklab.experiment_file.trust.CLASSES, named here so that --help does
# not load the experiment models (a test keeps the two lists equal)
ALLOW_CLASSES = ("commands", "files", "builds", "scripts", "devices", "paths")


def allow_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--allow CLASS[,CLASS] (the owner's grant, blocklab.experiment_file.trust) and
    --allow-command-settings, the older name of --allow commands; the command reads them
    with `granted(allow, allow_command_settings)`."""
    f = click.option(
        "--allow-command-settings",
        is_flag=True,
        help="the same as --allow commands",
    )(f)
    return click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="CLASS[,CLASS]",
        help="what this machine's owner lets an experiment do (refused otherwise, exit 2): "
        + ", ".join(ALLOW_CLASSES)
        + " or all (docs/RELIABILITY.md, the trust boundary)",
    )(f)


def granted(allow: Sequence[str], allow_command_settings: bool) -> frozenset[str]:
    """The classes --allow (and --allow-command-settings) grant; UserError for a typo."""
    from blocklab.experiment_file.trust import parse_allow

    return parse_allow([*allow, *(["commands"] if allow_command_settings else [])])


OVERRIDE_HELP = " (with FILE: replaces a fixed matrix value; stored as another experiment)"


def experiment_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--duration, --scale, --clients (matrix overrides), --cycles and --slices (the
    [design]'s whole checkpoint cycles per run, interleaved slices per round), --until-ci
    and --max-rounds: what `run` and `fleet submit` take about an experiment besides
    --rounds."""
    options = [
        click.option(
            "--duration",
            type=int,
            help="seconds per run" + OVERRIDE_HELP + '; not with [design] checkpoint = "cycles"',
        ),
        click.option(
            "--cycles",
            type=int,
            help='whole checkpoint cycles per run, with [design] checkpoint = "cycles"; '
            "stored as another experiment",
        ),
        click.option(
            "--slices",
            type=int,
            help='slices per variant per round, with [design] kind = "interleaved" (the '
            "demo's design; an even number); stored as another experiment",
        ),
        click.option("--scale", type=int, help="pgbench scale factor" + OVERRIDE_HELP),
        click.option("--clients", type=int, help="pgbench clients" + OVERRIDE_HELP),
        click.option(
            "--until-ci",
            "until_ci",
            type=PERCENT,
            help="add rounds until every comparison's 95 % CI half-width is at most PCT (2 or 2%)",
        ),
        click.option("--max-rounds", type=int, help="with --until-ci: stop after this many rounds"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


class Percent(click.ParamType):
    """A percentage written as 2, 2.5, 2% or "2 %"."""

    name = "PCT"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float | int):
            return float(value)
        text = str(value).strip().removesuffix("%").strip()
        try:
            return float(text)
        except ValueError:
            self.fail(f"'{value}' is not a percentage (examples: 2, 2.5, 2%)", param, ctx)


PERCENT = Percent()


def check_experiment_numbers(until_ci: float | None, **counts: int | None) -> None:
    """Counts (rounds=..., max_rounds=...) at least 1 and --until-ci a percentage, else a
    UserError naming the flag."""
    for name, value in counts.items():
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')}: must be at least 1 (got {value})")
    if until_ci is not None and not 0 < until_ci < 100:
        raise UserError(f"--until-ci: a percentage between 0 and 100 (got {until_ci:g})")


def check_max_rounds(
    max_rounds: int | None, until_ci: float | None, file_pct: float | None
) -> None:
    """--max-rounds without --until-ci (nor [experiment] until_ci_pct): a UserError."""
    if max_rounds is not None and until_ci is None and file_pct is None:
        raise UserError(
            "--max-rounds: caps the rounds --until-ci adds; give --until-ci PCT too (or set "
            "[experiment] until_ci_pct in the file), or use --rounds for a fixed number"
        )


def run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Every flag of `run` that changes what runs: --rounds, the experiment options and
    --time-budget. `plan` takes the same flags to show exactly that run."""
    f = click.option("--time-budget", help="stop adding rounds after this long (e.g. 30m, 2h)")(f)
    f = experiment_options(f)
    return click.option(
        "--rounds", type=int, help="rounds to run (each runs every variant once; A B B A: twice)"
    )(f)


def parse_duration_s(text: str | None, flag: str) -> float | None:
    """'900', '90s', '15m', '2h' in seconds; None for None; a UserError naming `flag`."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError:
        raise UserError(
            f"{flag}: '{text}' is not a duration (examples: 900, 90s, 15m, 2h)"
        ) from None


@dataclass(frozen=True)
class RunFlags:
    """The flags of run_options, checked (UserError naming the flag) and applied the same
    way by `run` and `plan`."""

    rounds: int | None = None
    duration: int | None = None
    scale: int | None = None
    clients: int | None = None
    until_ci: float | None = None
    max_rounds: int | None = None
    time_budget: str | None = None
    cycles: int | None = None
    slices: int | None = None

    def check(self) -> float | None:
        """Every flag valid, else a UserError; the time budget in seconds."""
        check_experiment_numbers(
            self.until_ci,
            rounds=self.rounds,
            duration=self.duration,
            scale=self.scale,
            clients=self.clients,
            max_rounds=self.max_rounds,
            cycles=self.cycles,
            slices=self.slices,
        )
        return parse_duration_s(self.time_budget, "--time-budget")

    def load(self, file: Path | None) -> Experiment:
        """The experiment the flags make of FILE (or the demo), under the name `run`
        stores it as: other numbers make another experiment ('x-s1-d2', 'demo-...-n2')."""
        from blocklab import experiment_file as spec

        if file is None:
            return spec.demo(
                rounds=self.rounds,
                duration_s=self.duration,
                scale=self.scale,
                clients=self.clients,
                cycles=self.cycles,
                slices=self.slices,
            )
        exp = spec.load(file, self.overrides())
        if self.rounds is not None:
            exp = exp.model_copy(update={"rounds": self.rounds})
        return exp

    def overrides(self) -> dict[str, int]:
        """The flags that change FILE's experiment (--scale, --clients, --duration,
        --cycles, --slices), those given: what `run` applies and `fleet submit` queues."""
        given = {
            "scale": self.scale,
            "clients": self.clients,
            "duration": self.duration,
            "cycles": self.cycles,
            "slices": self.slices,
        }
        return {k: v for k, v in given.items() if v is not None}

    def stopping(self, exp: Experiment) -> dict[str, Any]:
        """until_ci_pct, max_rounds, time_budget_s: the flags, else the file's. --max-rounds
        caps adaptive rounds only: without --until-ci (or the file's until_ci_pct) it would
        do nothing, so it is refused."""
        budget_s = self.check()
        check_max_rounds(self.max_rounds, self.until_ci, exp.until_ci_pct)
        return {
            "until_ci_pct": self.until_ci if self.until_ci is not None else exp.until_ci_pct,
            "max_rounds": self.max_rounds if self.max_rounds is not None else exp.max_rounds,
            "time_budget_s": budget_s if budget_s is not None else exp.time_budget_s,
        }


def check_trust(exp: Experiment, grant: frozenset[str], file: Path | None, who: str) -> None:
    """The owner's grant against what the experiment asks for (UserError after the file's
    name, as a parse error is): paths are judged against the file's directory."""
    from blocklab.experiment_file import trust

    base = Path.cwd() if file is None else file.resolve().parent  # None: an agent's job
    try:
        trust.check(exp, grant, base, who=who)
    except UserError as e:
        raise UserError(f"{file}: {e}" if file is not None else str(e)) from e

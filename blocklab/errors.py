"""Error types. Only the CLI turns them into messages and exit codes."""

from __future__ import annotations


class BlocklabError(Exception):
    """Base of every error blocklab raises on purpose."""

    exit_code = 1


class UserError(BlocklabError):
    """Bad input: names the key or flag and the allowed values. Nothing was started."""

    exit_code = 2


class CommandError(BlocklabError):
    """A subprocess failed. Carries the command, its exit code and the tail of its output."""

    def __init__(self, argv: list[str], returncode: int | None, output: str, reason: str = ""):
        self.argv = argv
        self.returncode = returncode
        self.output = output
        self.reason = reason
        tail = "\n".join(output.strip().splitlines()[-20:])
        what = reason or f"exit code {returncode}"
        super().__init__(f"command failed ({what}): {' '.join(argv)}\n{tail}")


class BuildError(BlocklabError):
    """A PostgreSQL build failed; the message names the log."""


class RunError(BlocklabError):
    """A measured run failed; stored as a failure, never as a number."""


class StorageError(BlocklabError):
    """Provisioning or releasing storage failed."""


class BusyError(BlocklabError):
    """Another blocklab process holds what this one needs (the same experiment in the
    same results). Nothing was started; try again when it has ended."""

    exit_code = 75  # EX_TEMPFAIL


class ResultsFullError(BlocklabError):
    """The results directory (the database's own disk) has no space left: the experiment
    stops; every run already stored is kept."""

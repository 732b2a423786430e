"""One door to the results store: `open_store(spec)` picks SQLite for a directory and
PostgreSQL for a postgresql:// or postgres:// URI (blocklab.store.uri)."""

from __future__ import annotations

import os
from pathlib import Path

from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.store.base import ResultsStore
from blocklab.store.uri import FLAG, SCHEMES, is_uri, parse_pg

RESULTS_ENV = "BLOCKLAB_RESULTS"
RAW_DIR_ENV = "BLOCKLAB_RAW_DIR"


def results_spec(flag_value: str | Path | None) -> tuple[str, bool]:
    """What --results names (else $BLOCKLAB_RESULTS, else $BLOCKLAB_HOME/results), and
    whether it came from the command line (a URI there must hold no password)."""
    if flag_value is not None:
        if is_uri(str(flag_value)):
            parse_pg(str(flag_value), from_argv=True)  # refuses a password in argv
        return str(flag_value), True
    env = os.environ.get(RESULTS_ENV)
    return (env, False) if env else (str(Paths.from_env().results), False)


def is_postgres(spec: str) -> bool:
    return is_uri(spec)


def check_results(flag_value: str | Path | None) -> None:
    """A UserError now for a --results (or BLOCKLAB_RESULTS) that cannot work, before
    anything starts or is written."""
    spec, from_argv = results_spec(flag_value)
    if is_postgres(spec):
        parse_pg(spec, from_argv=from_argv)
    else:
        sqlite_dir(spec)


def describe(spec: str) -> str:
    """`spec` for messages: a URI without its password."""
    return parse_pg(spec).display if is_postgres(spec) else spec


def raw_root() -> Path:
    """Where runs of a PostgreSQL results database keep their raw files."""
    env = os.environ.get(RAW_DIR_ENV)
    return Path(env).absolute() if env else Paths.from_env().home / "raw"


def sqlite_dir(spec: str, flag: str = FLAG) -> Path:
    """The results directory `spec` names; a UserError for a URI of another kind."""
    if "://" in spec:
        scheme = spec.split("://", 1)[0]
        raise UserError(
            f"{flag}: '{scheme}://' is not a results store; give a results directory "
            f"(SQLite) or a PostgreSQL URI ({' or '.join(s + '...' for s in SCHEMES)})"
        )
    return Path(spec).absolute()


def open_store(
    spec: str, *, create: bool = True, from_argv: bool = False, flag: str = FLAG
) -> ResultsStore:
    """The results store `spec` names. With create=False a results directory must hold
    a database already (a PostgreSQL database must exist either way)."""
    if is_postgres(spec):
        from blocklab.store.postgres import PostgresStore

        return PostgresStore(parse_pg(spec, flag=flag, from_argv=from_argv), raw_root())
    from blocklab.store.sqlite import ResultsDB

    directory = sqlite_dir(spec, flag)
    if not create and not directory.is_dir():
        raise UserError(f"{flag}: {directory} does not exist")
    return ResultsDB(directory, create=create)


def open_results(flag_value: str | Path | None, *, create: bool = True) -> ResultsStore:
    """The store --results (or its defaults) names."""
    spec, from_argv = results_spec(flag_value)
    return open_store(spec, create=create, from_argv=from_argv)

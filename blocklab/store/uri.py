"""What `--results` names: a results directory (SQLite) or a PostgreSQL URI.

A URI is parsed by libpq (psycopg.conninfo); its password is taken out at once and
only ever handed to psycopg.connect in this process: it is never printed, stored,
put in a child's argv or environment (proc drops PGPASSWORD and BLOCKLAB_RESULTS).
A URI with a password on the command line is refused (`ps` shows argv to everyone):
the password goes in PGPASSFILE (~/.pgpass), PGPASSWORD or BLOCKLAB_RESULTS.
A database reached over TCP to a host other than loopback needs TLS
(sslmode=require, verify-ca or verify-full) unless BLOCKLAB_RESULTS_INSECURE=1
(or --results-insecure) says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from blocklab.errors import UserError

SCHEMES = ("postgresql://", "postgres://")
INSECURE_ENV = "BLOCKLAB_RESULTS_INSECURE"
TLS_MODES = ("require", "verify-ca", "verify-full")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
FLAG = "--results"


@dataclass(frozen=True)
class PgTarget:
    conninfo: str  # without the password
    password: str | None
    display: str  # for messages: the conninfo without the password


def is_uri(spec: str) -> bool:
    return spec.startswith(SCHEMES)


def parse_pg(spec: str, *, flag: str = FLAG, from_argv: bool = False) -> PgTarget:
    """The URI's connection parameters, its password apart; a UserError naming `flag` for
    a URI that does not parse, a password on the command line, or a remote host without TLS."""
    import psycopg.conninfo  # only when a URI is given: the CLI starts without psycopg

    try:
        params = psycopg.conninfo.conninfo_to_dict(spec)
    except psycopg.ProgrammingError:  # the message may quote the URI: do not repeat it
        raise UserError(
            f"{flag}: not a valid PostgreSQL URI (form: postgresql://USER@HOST:PORT/DB"
            "?sslmode=require, or postgresql:///DB?host=/socket/dir)"
        ) from None
    password = params.pop("password", None)
    if password is not None and from_argv:
        raise UserError(
            f"{flag}: the URI holds a password, and every user can read a command line "
            "(ps); give it in PGPASSFILE (~/.pgpass) or PGPASSWORD, or the whole URI in "
            "BLOCKLAB_RESULTS"
        )
    check_transport(params, flag)
    conninfo = psycopg.conninfo.make_conninfo("", **{k: str(v) for k, v in params.items()})
    return PgTarget(
        conninfo, None if password is None else str(password), f"postgresql: {conninfo}"
    )


def _hosts(params: Mapping[str, object]) -> list[str]:
    text = str(params.get("hostaddr") or params.get("host") or os.environ.get("PGHOST") or "")
    return [h.strip() for h in text.split(",")] if text else [""]  # "": libpq's socket


def is_local(host: str) -> bool:
    return host == "" or host.startswith(("/", "@")) or host.lower() in LOOPBACK


def check_transport(params: Mapping[str, object], flag: str) -> None:
    """A non-loopback TCP host needs sslmode require/verify-*, unless told otherwise."""
    remote = [h for h in _hosts(params) if not is_local(h)]
    sslmode = str(params.get("sslmode") or os.environ.get("PGSSLMODE") or "prefer")
    if not remote or sslmode in TLS_MODES or os.environ.get(INSECURE_ENV) == "1":
        return
    raise UserError(
        f"{flag}: host {', '.join(remote)} is reached over TCP without TLS "
        f"(sslmode={sslmode}); add ?sslmode=require (or verify-ca, verify-full), use a "
        f"unix socket or loopback, or accept plain TCP with --results-insecure "
        f"({INSECURE_ENV}=1)"
    )

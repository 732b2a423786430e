"""matrix.settings: PostgreSQL settings (GUCs) written to every variant's server; a list
varies one setting, and each varied setting is a dimension of its own ("settings.NAME")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from blocklab.experiment_file.dimensions import Dimension, Option, unique, values
from blocklab.experiment_file.values import fail, guc_value, table

GUC_RE = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?")  # whole names (fullmatch)
# Directives that read another configuration file: an included file sets anything,
# blocklab's reserved settings too, and its contents are not what the experiment shows.
INCLUDES = ("include", "include_if_exists", "include_dir")
RESERVED = (
    "port",
    "listen_addresses",
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
)

# Settings with which the server runs a shell command or loads a shared library of the
# value's choosing (PostgreSQL's documentation: "Archiving", "Archive Recovery",
# "Shared Library Preloading", "Other Defaults", "SSL", JIT "Pluggable JIT Providers").
# Through a fleet queue whoever can submit an experiment could run code on every agent,
# so they are refused unless the experiment says `[experiment] allow_commands = true`
# (the file asks) and the command running it was started with --allow commands (the
# machine's owner grants: blocklab.experiment_file.trust).
# ssl_passphrase_command_supports_reload only says when the command runs: harmless.
COMMAND_SETTINGS = (
    "archive_command",  # shell command per WAL segment
    "archive_library",  # library that archives (PostgreSQL 15+)
    "restore_command",  # shell command in archive recovery
    "archive_cleanup_command",  # shell command at every restartpoint
    "recovery_end_command",  # shell command at the end of recovery
    "ssl_passphrase_command",  # shell command for the SSL key's passphrase
    "shared_preload_libraries",  # libraries loaded by the postmaster
    "local_preload_libraries",  # libraries loaded by every backend
    "session_preload_libraries",  # libraries loaded by every backend (superuser's list)
    "dynamic_library_path",  # where the libraries above are looked for
    "jit_provider",  # library loaded as the JIT provider
    "extension_control_path",  # where extensions (and their libraries) are found (18+)
    "oauth_validator_libraries",  # libraries that validate OAuth tokens (18+)
)
# Settings that name a file or directory on the server's host: the server writes there
# (log_directory + log_filename append to any file the server user can write;
# external_pid_file, stats_temp_directory of PostgreSQL 13/14) or reads it (ssl_*_file,
# krb_server_keyfile). Refused unless the owner allows "files" (blocklab.experiment_file.trust).
FILE_SETTINGS = (
    "log_directory",
    "log_filename",
    "external_pid_file",
    "krb_server_keyfile",
    "stats_temp_directory",
    "ssl_cert_file",
    "ssl_key_file",
    "ssl_ca_file",
    "ssl_crl_file",
    "ssl_crl_dir",
    "ssl_dh_params_file",
)
# The same families by name, so that a setting a later PostgreSQL adds is caught too.
COMMAND_SUFFIXES = ("_command", "_library", "_libraries")
FILE_SUFFIXES = ("_file", "_filename", "_keyfile", "_directory", "_directories", "_dir")
HARMLESS = ("ssl_passphrase_command_supports_reload",)
ALLOW_KEY = "experiment.allow_commands"
ALLOW_FLAG = "--allow commands"


def _empty(value: str) -> bool:
    return value.strip().strip("'\"").strip() == ""


def is_command_setting(name: str) -> bool:
    """A setting with which the server runs a command or loads a library (by name)."""
    base = name.rsplit(".", 1)[-1]
    if name in HARMLESS:
        return False
    return name in COMMAND_SETTINGS or base.endswith(COMMAND_SUFFIXES)


def is_file_setting(name: str) -> bool:
    """A setting that names a file or directory on the server's host (by name)."""
    base = name.rsplit(".", 1)[-1]
    return name in FILE_SETTINGS or (not is_command_setting(name) and base.endswith(FILE_SUFFIXES))


def runs_commands(name: str, value: str) -> bool:
    """True when the setting `name = value` makes the server run a command or load a
    library (an empty value, '' or "", runs nothing)."""
    return is_command_setting(name) and not _empty(value)


def names_files(name: str, value: str) -> bool:
    """True when the setting `name = value` names a file or directory of the host."""
    return is_file_setting(name) and not _empty(value)


def command_settings(settings: Iterable[tuple[str, str]]) -> list[str]:
    """The names among `settings` (name, value) that run commands, sorted, once each."""
    return sorted({n for n, v in settings if runs_commands(n, v)})


def check_allowed(names: list[str], allowed_by_file: bool) -> None:
    """UserError naming the first setting that runs commands unless the file allows it."""
    if names and not allowed_by_file:
        raise fail(
            f"matrix.settings.{names[0]}",
            "runs a shell command or loads a shared library on the server's host; refused "
            f"unless the experiment sets {ALLOW_KEY} = true and it is run with {ALLOW_FLAG}",
            f"settings other than {', '.join(COMMAND_SETTINGS)}",
        )


def read(raw: Any, base: Path) -> list[Dimension]:
    return [_one(name, value) for name, value in table(raw, "matrix.settings").items()]


def _one(name: str, raw_value: Any) -> Dimension:
    path = f"matrix.settings.{name}"
    if not GUC_RE.fullmatch(name):
        raise fail(path, "not a setting name", "lower-case PostgreSQL GUC names")
    if name in INCLUDES:
        raise fail(
            path,
            "reads another configuration file, which could set anything (blocklab's own "
            "settings too); refused",
            "the settings themselves, in matrix.settings",
        )
    if name in RESERVED:
        raise fail(path, "blocklab sets this itself (private socket, data directory)")
    key = f"settings.{name}"
    opts = [
        Option(val, {key: val}, val)
        for val in (guc_value(v, p) for v, p in values(raw_value, path))
    ]
    return Dimension(
        key,
        unique(opts, path),
        lambda value: {key: value},
        labels={key: lambda v: f"{name}={v}"},
        selector_values={key: guc_value},
    )


def flatten(selector: dict[str, Any], path: str) -> dict[str, Any]:
    """A selector's nested settings table as "settings.NAME" keys."""
    out = {k: v for k, v in selector.items() if k != "settings"}
    if "settings" in selector:
        for name, v in table(selector["settings"], f"{path}.settings").items():
            out[f"settings.{name}"] = v
    return out

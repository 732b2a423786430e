"""What a build, its PostgreSQL version and this kernel can do with the I/O settings:
io_method, io_workers, io_combine_limit, io_max_combine_limit, wal_compression and the
initdb-time data checksums. Checked by `plan` and `run` (blocklab.execution.preflight)
before anything starts, so that `io_method = "io_uring"` in a build without liburing
is exit 2 naming the key, the value and why, not a server that fails to start mid-run.

    BuildAbility(major, features, catalogue)   what is known of one build
    refusals(settings, data_checksums, ability, io_uring_refusal)
                                               why each asked value cannot run (pure)
    io_uring_refusal(disabled_text, release)   the kernel's io_uring, from its sysctl (pure)
    read_io_uring_refusal()                    the same for this machine (reads /proc)

The build's own catalogue decides when the build exists (pg_settings: is the setting
there, its enumvals, min_val and max_val, its context); before that, the PostgreSQL
version and the libraries the build will be configured with
(blocklab.postgres.build.configured_features) do.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from blocklab.postgres.settings_policy import Catalogue

IO_URING_DISABLED = Path("/proc/sys/kernel/io_uring_disabled")
# Since which major a setting exists (PostgreSQL's release notes).
SINCE_MAJOR = {
    "io_method": 18,
    "io_workers": 18,
    "io_max_combine_limit": 18,
    "io_combine_limit": 17,
}
IO_METHODS = ("sync", "worker", "io_uring")  # PostgreSQL 18's, when no catalogue says
# Values that need a library configured into the build.
LIBRARY_FOR = {
    ("io_method", "io_uring"): "liburing",
    ("wal_compression", "lz4"): "lz4",
    ("wal_compression", "zstd"): "zstd",
}
COMPRESSION_SINCE_MAJOR = 15  # wal_compression = lz4 | zstd
WAL_COMPRESSIONS = ("off", "on", "pglz", "lz4", "zstd", "true", "false", "yes", "no", "1", "0")
# The kernel's io_uring: since 5.1; kernel.io_uring_disabled since 6.6.
IO_URING_SINCE = (5, 1)
IO_URING_SYSCTL_SINCE = (6, 6)
SYSCTL_FIX = "kernel.io_uring_disabled=0"


@dataclass(frozen=True)
class BuildAbility:
    """One build as plan sees it: the major version, the optional libraries configured
    in (None: unknown) and its settings catalogue (None: not built yet)."""

    major: int
    features: tuple[str, ...] | None
    catalogue: Catalogue | None = None
    label: str = ""  # for messages: "PostgreSQL 18.1 (build pg18.1-bs8k-...)"

    def named(self) -> str:
        return self.label or f"PostgreSQL {self.major}"


def refusals(settings: dict[str, str], ability: BuildAbility, io_uring: str) -> list[str]:
    """One message per setting the build, version or kernel cannot run ("key = value:
    why"); `io_uring` is the kernel's refusal ("" when usable). Data checksums are
    initdb's (matrix.data_checksums: every major blocklab builds has both; the setting
    data_checksums is read-only and refused here)."""
    out = []
    for name, value in settings.items():
        why = _refusal(name, str(value), ability, io_uring)
        if why:
            out.append(f"matrix.settings.{name} = {value!r}: {why}")
    return out


def _refusal(name: str, value: str, ability: BuildAbility, io_uring: str) -> str:
    cat = ability.catalogue
    internal = cat is not None and name in cat.gucs and cat.gucs[name].context == "internal"
    if name == "data_checksums" or internal:
        where = "matrix.data_checksums (initdb)" if name == "data_checksums" else "the build"
        return f"read-only in the server; set it with {where}"
    if name in SINCE_MAJOR or name == "wal_compression":
        missing = _missing(name, ability)
        if missing:
            return missing
    if name == "io_method":
        why = _enum(name, value, ability, IO_METHODS)
        if not why and io_uring and value.lower() == "io_uring":
            why = f"the kernel cannot: {io_uring}"
        return why
    if name == "wal_compression":
        return _compression(value, ability)
    if name == "io_workers" and cat and name in cat.gucs:
        return _in_range(value, *cat.gucs[name].limits())
    return ""


def _missing(name: str, ability: BuildAbility) -> str:
    """The setting does not exist in this build or version ("" when it does)."""
    cat = ability.catalogue
    if cat is not None:
        return "" if name in cat.gucs else f"{ability.named()} has no setting {name}"
    since = SINCE_MAJOR.get(name)
    if since and 0 < ability.major < since:
        return f"{name} exists from PostgreSQL {since}; this is PostgreSQL {ability.major}"
    return ""


def _enum(name: str, value: str, ability: BuildAbility, known: tuple[str, ...]) -> str:
    """The value is not one this build accepts (its enumvals, else `known`)."""
    cat = ability.catalogue
    allowed = cat.gucs[name].allowed_values() if cat and name in cat.gucs else None
    lacks = _library_missing(name, value, ability)
    if allowed is not None:
        if value.lower() in allowed:
            return ""
        return (lacks + "; " if lacks else "") + f"{ability.named()} accepts {', '.join(allowed)}"
    if value.lower() not in known:
        return f"allowed: {', '.join(known)}"
    return lacks


def _library_missing(name: str, value: str, ability: BuildAbility) -> str:
    needed = LIBRARY_FOR.get((name, value.lower()))
    if needed is None or ability.features is None or needed in ability.features:
        return ""
    return f"{ability.named()} was built without {needed} (configure --with-{needed})"


def _compression(value: str, ability: BuildAbility) -> str:
    v = value.lower()
    if ("wal_compression", v) in LIBRARY_FOR and 0 < ability.major < COMPRESSION_SINCE_MAJOR:
        return f"{v} exists from PostgreSQL {COMPRESSION_SINCE_MAJOR}; this is {ability.named()}"
    return _enum("wal_compression", v, ability, WAL_COMPRESSIONS)


def _in_range(value: str, low: int | None, high: int | None) -> str:
    if not re.fullmatch(r"\s*-?\d+\s*", value):
        return "a whole number"
    n = int(value)
    if (low is not None and n < low) or (high is not None and n > high):
        return f"outside this build's range {low} to {high}"
    return ""


# --- the kernel --------------------------------------------------------------------------
def _release(release: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def io_uring_refusal(disabled_text: str | None, release: str) -> str:
    """Why this kernel cannot give the server io_uring ("" if it can), from
    kernel.io_uring_disabled (None: the file is missing) and the kernel release (pure).
    1 allows only members of kernel.io_uring_group; the server runs as the unprivileged
    blocklab user, so 1 is a refusal too."""
    version = _release(release)
    if version < IO_URING_SINCE:
        return f"kernel {release} predates io_uring (5.1)"
    if disabled_text is None:
        if version >= IO_URING_SYSCTL_SINCE:
            return f"kernel {release} has no io_uring ({IO_URING_DISABLED} is missing)"
        return ""
    state = disabled_text.strip()
    if state == "0":
        return ""
    if state == "1":
        return (
            f"{IO_URING_DISABLED} is 1: only kernel.io_uring_group may use io_uring, and the "
            f"server runs as the unprivileged blocklab user (sysctl {SYSCTL_FIX})"
        )
    return f"{IO_URING_DISABLED} is {state}: io_uring is disabled (sysctl {SYSCTL_FIX})"


def read_io_uring_refusal() -> str:
    """io_uring_refusal for this machine."""
    try:
        text: str | None = IO_URING_DISABLED.read_text()
    except FileNotFoundError:
        text = None
    return io_uring_refusal(text, os.uname().release)

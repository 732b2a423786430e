"""A user's queries file, split into named statements (pure).

One statement per `;` outside quotes, dollar quotes and comments; a `-- name: NAME` line
before a statement names it (a name is letters, digits, `_` and `-`), otherwise it is
`q1`, `q2`, ... by position. Statements are sent to the server one at a time through
psycopg (blocklab.workloads.queries_client), never to psql: a backslash line is not a
meta-command there, and the file is refused if it holds one, so that nobody believes it
ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blocklab.errors import UserError

MAX_STATEMENTS = 200
MAX_FILE_BYTES = 100_000  # the texts travel in the client's argv (a few kB each)
NAME_LINE = re.compile(r"^\s*--\s*name:\s*(?P<name>\S+)\s*$", re.IGNORECASE)
NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_DOLLAR = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


@dataclass(frozen=True)
class Statement:
    name: str
    text: str  # without its `;`


def split(text: str) -> list[str]:
    """The statements of `text`, each with its leading comments, without the `;`; empty
    ones (only space and comments) dropped."""
    out, start, i, n = [], 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end != -1 and text[end + 1 : end + 2] == c:  # a doubled quote
                end = text.find(c, end + 2)
            i = n if end == -1 else end + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif c == "$" and (m := _DOLLAR.match(text, i)) is not None:
            end = text.find(m.group(), m.end())
            i = n if end == -1 else end + len(m.group())
        elif c == ";":
            out.append(text[start:i])
            start = i = i + 1
        else:
            i += 1
    out.append(text[start:])
    return [s.strip() for s in out if _has_code(s)]


def _has_code(chunk: str) -> bool:
    without = re.sub(r"/\*.*?\*/", "", chunk, flags=re.DOTALL)
    return any(line.strip() and not line.strip().startswith("--") for line in without.splitlines())


def read(text: str, key: str) -> list[Statement]:
    """The named statements of a queries file; UserError naming `key` for an empty file,
    a backslash meta-command, a bad or repeated name, too many statements."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise UserError(f"{key}: the file is over {MAX_FILE_BYTES} bytes; allowed: up to that")
    out: list[Statement] = []
    for i, chunk in enumerate(split(text)):
        name = _name_of(chunk, key) or f"q{i + 1}"
        body = "\n".join(ln for ln in chunk.splitlines() if not NAME_LINE.match(ln)).strip()
        if re.search(r"^\s*\\", body, re.MULTILINE):
            raise UserError(
                f"{key}: statement {name!r} holds a backslash line (a psql meta-command); "
                "allowed: SQL statements only, separated by ;"
            )
        if name in {s.name for s in out}:
            raise UserError(f"{key}: the name {name!r} is given twice; allowed: distinct names")
        out.append(Statement(name, body))
    if not out:
        raise UserError(f"{key}: no statement; allowed: SQL statements separated by ;")
    if len(out) > MAX_STATEMENTS:
        raise UserError(f"{key}: {len(out)} statements; allowed: up to {MAX_STATEMENTS}")
    return out


def _name_of(chunk: str, key: str) -> str | None:
    names = [m["name"] for ln in chunk.splitlines() if (m := NAME_LINE.match(ln))]
    if not names:
        return None
    if len(names) > 1 or not NAME.match(names[0]):
        raise UserError(
            f"{key}: bad name line(s) {names!r}; allowed: one `-- name: NAME` per statement, "
            "NAME of letters, digits, _ and - (up to 40)"
        )
    return names[0]

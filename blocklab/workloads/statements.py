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
NAME_LINE = re.compile(r"^\s*--\s*name:\s*(?P<name>.*?)\s*$", re.IGNORECASE)
NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_DOLLAR = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


@dataclass(frozen=True)
class Statement:
    name: str
    text: str  # without its `;`


def mask(text: str) -> str:
    """`text` with every character inside a quote, a dollar quote or a comment replaced
    by a space (line breaks kept): what is left is code, at the same positions."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        end = _skip(text, i)
        if end == i:
            i += 1
            continue
        for k in range(i, end):
            if out[k] != "\n":
                out[k] = " "
        i = end
    return "".join(out)


def _skip(text: str, i: int) -> int:
    """The end of the quote, dollar quote or comment that begins at `i` (`i`: none)."""
    n, c = len(text), text[i]
    if c in "'\"":
        end = text.find(c, i + 1)
        while end != -1 and text[end + 1 : end + 2] == c:  # a doubled quote
            end = text.find(c, end + 2)
        return n if end == -1 else end + 1
    if text.startswith("--", i):
        end = text.find("\n", i)
        return n if end == -1 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return n if end == -1 else end + 2
    if c == "$" and (m := _DOLLAR.match(text, i)) is not None:
        end = text.find(m.group(), m.end())
        return n if end == -1 else end + len(m.group())
    return i


def split(text: str) -> list[str]:
    """The statements of `text` (one per `;` of code), each with its leading comments,
    without the `;`; empty ones (only space and comments) dropped."""
    code = mask(text)
    cuts = [-1] + [i for i, c in enumerate(code) if c == ";"] + [len(text)]
    chunks = [(text[a + 1 : b], code[a + 1 : b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    return [t.strip() for t, c in chunks if c.strip()]


def read(text: str, key: str) -> list[Statement]:
    """The named statements of a queries file; UserError naming `key` for an empty file,
    a backslash meta-command, a bad or repeated name, too many statements."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise UserError(f"{key}: the file is over {MAX_FILE_BYTES} bytes; allowed: up to that")
    out: list[Statement] = []
    for i, chunk in enumerate(split(text)):
        name = _name_of(chunk, key) or f"q{i + 1}"
        lines = [ln for ln in chunk.splitlines() if not NAME_LINE.match(ln)]
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the comments before a statement: not sent
        body = "\n".join(lines).strip()
        if "\\" in mask(body):
            raise UserError(
                f"{key}: statement {name!r} holds a backslash outside quotes (a psql "
                "meta-command); allowed: SQL statements only, separated by ;"
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

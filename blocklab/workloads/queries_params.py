"""Parameters of a statement (issue 32): a `-- params: FILE.csv` line before a statement
that uses $1, $2, ... runs it once per row of the CSV, each row's values as its
arguments (pure, apart from reading the CSV).

    -- name: customer_orders
    -- params: customers.csv
    SELECT id, placed_at FROM orders WHERE customer_id = $1 ORDER BY placed_at DESC LIMIT $2;

customers.csv: a header line (the columns' names, for the reader), then one row of values
per call, as many columns as the statement's highest $N (psql's `\\copy (SELECT ...) TO
'customers.csv' CSV HEADER` makes one from the database itself). A value is text; the
server gives it the type the statement's context asks for ($1 compared with an integer
column: an integer), as for any untyped literal. There is no NULL: an empty field is the
empty string.

Chosen over a `\\set`-like header (`-- set: id = 1, 2, 3`): sample values come from the
database in their hundreds, a CSV holds several columns per call (a customer and a date
range that belong together, not their cross product), and Python's csv reader handles
quotes and commas inside values; a header of values would need its own quoting rules.

The values never enter the SQL text: the statement is prepared once per pass (`PREPARE
"blocklab_NAME" AS <statement>`, as written) and each row runs as `EXPLAIN (ANALYZE,
BUFFERS, FORMAT JSON) EXECUTE "blocklab_NAME"(<literals>)`, each value a SQL string
literal made by `literal` (quotes doubled; a value with a backslash as an E'' literal
with the backslash doubled, right whatever standard_conforming_strings says). psql has no
bind parameters for a `-c` string, and the statements never pass through psql's script
reader (where :'var' would quote), so the literal is the only way in, and `literal` is
tested against a real server's reading of it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import UserError
from blocklab.workloads import statements

PARAMS_LINE = re.compile(r"^\s*--\s*params:\s*(?P<file>.*?)\s*$", re.IGNORECASE)
PLACEHOLDER = re.compile(r"(?<![\w$])\$(\d+)")  # not in an identifier such as a$1
MAX_ROWS = 1000
MAX_CSV_BYTES = 1_000_000


@dataclass(frozen=True)
class Params:
    file: str  # as the `-- params:` line names it
    columns: tuple[str, ...]  # the header line
    rows: tuple[tuple[str, ...], ...]  # one per call, a value per $N


def literal(value: str) -> str:
    """`value` as a SQL string literal; ValueError for a NUL (no PostgreSQL text holds one)."""
    if "\0" in value:
        raise ValueError("a NUL character cannot be sent in a SQL literal")
    quoted = value.replace("'", "''")
    if "\\" in value:
        return "E'" + quoted.replace("\\", "\\\\") + "'"
    return f"'{quoted}'"


def placeholders(text: str) -> int:
    """The highest $N of a statement's code (quotes, dollar quotes, comments skipped)."""
    code = statements.mask(text)
    return max((int(n) for n in PLACEHOLDER.findall(code)), default=0)


def params_files(text: str, key: str) -> list[str | None]:
    """Per statement of the queries file (statements.read's order), its `-- params:` file."""
    out: list[str | None] = []
    for chunk in statements.split(text):
        files = [m["file"] for ln in chunk.splitlines() if (m := PARAMS_LINE.match(ln))]
        if len(files) > 1 or (files and not files[0]):
            raise UserError(f"{key}: bad params line(s) {files!r}; allowed: one `-- params: "
                            "FILE.csv` per statement")  # fmt: skip
        out.append(files[0] if files else None)
    return out


def read_all(
    text: str, stmts: Sequence[statements.Statement], base: Path, key: str
) -> dict[str, Params]:
    """Statement name -> its parameters, read and checked against its $N (UserError
    naming the file, the line and the statement)."""
    out: dict[str, Params] = {}
    for stmt, file in zip(stmts, params_files(text, key), strict=True):
        wanted = placeholders(stmt.text)
        if file is None:
            if wanted:
                raise UserError(
                    f"{key}: statement {stmt.name!r} uses ${wanted} but has no "
                    "`-- params: FILE.csv` line; allowed: one, with its values"
                )
            continue
        out[stmt.name] = read_csv(base, file, stmt.name, wanted, key)
    return out


def read_csv(base: Path, file: str, name: str, wanted: int, key: str) -> Params:
    """The CSV beside the queries file (`base`: its directory, which it may not leave)."""
    where = f"{key}: statement {name!r}: params {file}"
    path = (base / file).resolve()
    if not path.is_relative_to(base.resolve()):
        raise UserError(f"{where}: outside the queries file's directory; allowed: a CSV in it")
    if not wanted:
        raise UserError(f"{where}: the statement has no $1; allowed: params for $1, $2, ...")
    try:
        if path.stat().st_size > MAX_CSV_BYTES:
            raise UserError(f"{where}: over {MAX_CSV_BYTES} bytes; allowed: up to that")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise UserError(f"{where}: {why}; allowed: a readable CSV file") from None
    return parse_csv(text, where, wanted, file)


def parse_csv(text: str, where: str, wanted: int, file: str) -> Params:
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise UserError(f"{where}: {e}; allowed: a CSV file") from None
    if len(lines) < 2:
        raise UserError(f"{where}: no row of values; allowed: a header line, then rows")
    for number, row in enumerate(lines, start=1):
        if len(row) != wanted:
            raise UserError(f"{where}, line {number}: {len(row)} column(s); allowed: {wanted} "
                            f"(the statement's $1..${wanted})")  # fmt: skip
        if any("\0" in v for v in row):
            raise UserError(f"{where}, line {number}: a NUL character; allowed: text without")
    if len(lines) - 1 > MAX_ROWS:
        raise UserError(f"{where}: {len(lines) - 1} rows; allowed: up to {MAX_ROWS}")
    return Params(file, tuple(lines[0]), tuple(tuple(r) for r in lines[1:]))


def prepared_name(name: str) -> str:
    """The prepared statement's quoted identifier (a name is letters, digits, _ and -)."""
    assert statements.NAME.match(name)
    return f'"blocklab_{name}"'


def prepare_sql(stmt: statements.Statement) -> str:
    return f"PREPARE {prepared_name(stmt.name)} AS {stmt.text}"


def execute_sql(stmt: statements.Statement, row: Sequence[str]) -> str:
    return f"EXECUTE {prepared_name(stmt.name)}({', '.join(literal(v) for v in row)})"

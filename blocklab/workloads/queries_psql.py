"""The queries driver's run: one psql, as the server's unprivileged OS user, connected
as the workload role (blocklab.workloads.role), never a superuser; its argv and its
output, parsed (pure).

Each statement, pass after pass, in the file's order, is one `-c` of psql:
`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) <statement>` between a BEGIN and a ROLLBACK (a
statement that writes leaves the data as the snapshot made it, for the next pass and the
next run). psql sends a `-c` string to the server as it is: no meta-command, no
variable is read from it (psql reads only a `-c` that begins with a backslash as a
meta-command, and a statement never does: blocklab.workloads.statements refuses
backslash lines and the string begins with EXPLAIN). `ON_ERROR_STOP=0`: a failing
statement is that statement's failure and the others go on.

A statement with params (blocklab.workloads.queries_params) is prepared once per pass and
runs once per row of its CSV, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE
"blocklab_NAME"(<literals>)` between BEGIN and ROLLBACK, with plan_cache_mode =
force_custom_plan (each call planned for its values, as the statement with those values
written in would be); every row's time is kept, and the statement's time is the
arithmetic mean over rows and passes: the server time one call costs on average over
the values given, the quantity that adds up to the time the application spends.

Before each statement (each row) psql prints MARKER NAME PASS [ROW] on stdout (`\\echo`)
and on stderr (`\\warn`), so that the plan that follows on stdout and the error that
follows on stderr belong to it. The statement's time is the server's: "Planning Time" +
"Execution Time" of its plan, in ms (no rows travel to the client; EXPLAIN ANALYZE's
per-node clocks cost the same on every variant).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blocklab.workloads import queries_params
from blocklab.workloads.base import Endpoint
from blocklab.workloads.queries_params import Params
from blocklab.workloads.statements import Statement

MARKER = "@@blocklab-statement"
EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
MAX_ARGV_BYTES = 1_000_000  # the statements x passes travel in psql's argv
_MARK = re.compile(rf"^{MARKER} (?P<name>\S+) (?P<pass>\d+)(?: (?P<row>\d+))?$", re.MULTILINE)


def argv_bytes(
    stmts: Sequence[Statement], passes: int, params: Mapping[str, Params] | None = None
) -> int:
    per_call = len(EXPLAIN) + 120
    total = 0
    for s in stmts:
        rows = (params or {}).get(s.name)
        if rows is None:
            total += len(s.text.encode()) + per_call
        else:
            total += len(s.text.encode()) + sum(
                per_call + len(queries_params.execute_sql(s, r).encode()) for r in rows.rows
            )
    return passes * total


def argv(
    psql: str,
    endpoint: Endpoint,
    stmts: Sequence[Statement],
    passes: int,
    timeout_ms: int,
    params: Mapping[str, Params] | None = None,
) -> list[str]:
    """psql's argv: every statement `passes` times (a statement with params once per row
    of its CSV, as EXECUTE of its prepared statement: blocklab.workloads.queries_params)."""
    params = params or {}
    out = [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=0",
           "-h", endpoint.socket_dir, "-p", str(endpoint.port), "-U", endpoint.user,
           "-d", endpoint.dbname, "-c", "SHOW block_size"]  # fmt: skip
    if params:  # each EXECUTE planned for its values, as a statement with literals would be
        out += ["-c", "SET plan_cache_mode = force_custom_plan"]
    for p in range(1, passes + 1):
        for s in stmts:
            if s.name not in params:
                out += _call(f"{s.name} {p}", EXPLAIN + s.text, timeout_ms)
                continue
            for r, row in enumerate(params[s.name].rows, start=1):
                sql = EXPLAIN + queries_params.execute_sql(s, row)
                first = queries_params.prepare_sql(s) if r == 1 else ""
                out += _call(f"{s.name} {p} {r}", sql, timeout_ms, before=first)
            out += ["-c", f"DEALLOCATE {queries_params.prepared_name(s.name)}"]
    return out


def _call(mark: str, sql: str, timeout_ms: int, before: str = "") -> list[str]:
    """The marker on both outputs, then `sql` between BEGIN and ROLLBACK."""
    out = ["-c", f"\\echo {MARKER} {mark}", "-c", f"\\warn {MARKER} {mark}"]
    out += ["-c", before] if before else []
    out += ["-c", "BEGIN"]
    if timeout_ms:
        out += ["-c", f"SET LOCAL statement_timeout = {int(timeout_ms)}"]
    return [*out, "-c", sql, "-c", "ROLLBACK"]


def shown(argv: Sequence[str]) -> str:
    """The argv in a line: psql's options, then what it runs for each statement."""
    head = argv[: argv.index("SHOW block_size") + 1]
    marks = [a.split()[2:] for a in argv if a.startswith(f"\\echo {MARKER} ")]
    distinct = list(dict.fromkeys(m[0] for m in marks))
    passes = max((int(m[1]) for m in marks), default=0)
    with_rows = list(dict.fromkeys(m[0] for m in marks if len(m) > 2))
    rows = (
        f"; {', '.join(with_rows)}: once per row of its params CSV, as EXECUTE of its "
        "prepared statement"
        if with_rows
        else ""
    )
    return (
        f"{shlex.join(head)} then, {passes} pass(es) of {len(distinct)} statement(s) "
        f"({', '.join(distinct)}), each: -c BEGIN -c '{EXPLAIN}<statement>' -c ROLLBACK{rows}"
    )


@dataclass
class Outcome:
    """What psql printed for one statement over the passes."""

    name: str
    durations_ms: list[float] = field(default_factory=list)
    shared_hit_bytes: list[int] = field(default_factory=list)
    shared_read_bytes: list[int] = field(default_factory=list)
    plan: Any = None
    error: str = ""
    row_durations_ms: dict[int, list[float]] = field(default_factory=dict)  # params: row -> ms


def _segments(text: str) -> dict[tuple[str, int, int], str]:
    """(name, pass, row) -> what follows its marker, up to the next marker (row 0: a
    statement without params)."""
    marks = list(_MARK.finditer(text))
    out = {}
    ends = [m.start() for m in marks[1:]] + [len(text)]
    for m, end in zip(marks, ends, strict=False):  # no marker: nothing
        out[(m["name"], int(m["pass"]), int(m["row"] or 0))] = text[m.end() : end].strip()
    return out


def block_size_bytes(stdout: str) -> int | None:
    first = stdout.split(MARKER, 1)[0].strip().splitlines()
    return int(first[0]) if first and first[0].strip().isdigit() else None


def outcomes(stdout: str, stderr: str) -> list[Outcome]:
    """Each statement's times, buffer bytes and last plan, or its first error (the
    server's message line), in the order psql ran them (its markers say which)."""
    plans, errors = _segments(stdout), _segments(stderr)
    block = block_size_bytes(stdout) or 0
    by_name: dict[str, Outcome] = {}
    for (name, p, row), text in plans.items():
        o = by_name.setdefault(name, Outcome(name))
        doc = _plan(text)
        if doc is None:
            where = f"pass {p}" + (f", params row {row}" if row else "")
            first = _first_error(errors.get((name, p, row), ""))
            o.error = o.error or (f"{where}: {first}" if row and first else first)
            o.error = o.error or f"{where}: no plan"
            continue
        top = doc[0]
        ms = float(top.get("Planning Time", 0.0)) + float(top["Execution Time"])
        o.durations_ms.append(ms)
        if row:
            o.row_durations_ms.setdefault(row, []).append(ms)
        o.shared_hit_bytes.append(int(top["Plan"].get("Shared Hit Blocks", 0)) * block)
        o.shared_read_bytes.append(int(top["Plan"].get("Shared Read Blocks", 0)) * block)
        o.plan = doc
    return list(by_name.values())


def _plan(text: str) -> Any:
    try:
        doc = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    ok = isinstance(doc, list) and doc and isinstance(doc[0], dict) and "Execution Time" in doc[0]
    return doc if ok else None


def _first_error(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("ERROR:", "FATAL:", "psql:")):
            return re.sub(r"^psql:[^:]*:(\d+:)? ", "", line)
    return text.strip().splitlines()[0] if text.strip() else ""


def document(stdout: str, stderr: str) -> dict[str, Any]:
    """The run's queries file (the TPC-H-like driver's layout, plus failures)."""
    found = outcomes(stdout, stderr)
    kept = [o for o in found if not o.error]
    return {
        "block_size_bytes": block_size_bytes(stdout),
        "queries": [
            {
                "query": o.name,
                "durations_ms": o.durations_ms,
                "plan": o.plan,
                "shared_hit_bytes": o.shared_hit_bytes,
                "shared_read_bytes": o.shared_read_bytes,
                **({"params_rows_ms": o.row_durations_ms} if o.row_durations_ms else {}),
            }
            for o in kept
        ],
        "failed": {o.name: o.error for o in found if o.error},
    }

"""What the sysbench and go-tpc drivers share: reading a workload table's keys (pure),
the verdict of an execution, and the sizing arithmetic of a loaded table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from blocklab.errors import UserError
from blocklab.workloads.base import WorkloadResult

PAGE_HEADER_BYTES = 24
LINE_POINTER_BYTES = 4
TUPLE_HEADER_BYTES = 24  # 23, MAXALIGNed


def fail(path: str, problem: str, allowed: str) -> UserError:
    """The error blocklab.experiment_file.values makes (that package is not imported here: the spec
    imports the drivers)."""
    return UserError(f"{path}: {problem}; allowed: {allowed}")


class Keys:
    """A workload table's keys, read one by one with the key path in every error."""

    def __init__(self, table: Mapping[str, Any], path: str, allowed: tuple[str, ...]):
        for key in table:
            if key not in ("driver", *allowed):
                raise fail(f"{path}.{key}", "unknown key", ", ".join(("driver", *allowed)))
        self.table, self.path = table, path

    def integer(self, key: str, default: int | None, lo: int, hi: int) -> int | None:
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{self.path}.{key}", f"expected an integer, got {value!r}", f"{lo}..{hi}")
        if not lo <= value <= hi:
            raise fail(f"{self.path}.{key}", f"{value} is out of range", f"{lo}..{hi}")
        return value

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str) or value not in allowed:
            raise fail(f"{self.path}.{key}", f"{value!r} is not known", ", ".join(allowed))
        return value


def verdict(
    program: str, exit_code: int | None, result: WorkloadResult, *, server_alive: bool
) -> str:
    """Why an execution is not a result: the server died, a non-zero exit code (a
    timeout is None), the failure the parser found; "" when it is a result."""
    if not server_alive:
        return f"the server died during the run ({program} exit code {exit_code})"
    if exit_code is None:
        return f"{program} did not finish"
    if exit_code != 0:
        first = f": {result.errors[0]}" if result.errors else ""
        return f"{program} exited with code {exit_code}{first}"
    failure = result.report.get("failure")
    if failure:
        return str(failure)
    if result.throughput is None:
        return f"{program} reported no throughput"
    return ""


def table_bytes(rows: int, row_bytes: int, block_size_bytes: int, fillfactor: int) -> int:
    """Heap bytes of `rows` rows of `row_bytes` (with line pointer) loaded at fillfactor."""
    reserved = block_size_bytes * (100 - fillfactor) // 100
    per_page = max(1, (block_size_bytes - PAGE_HEADER_BYTES - reserved) // row_bytes)
    return math.ceil(rows / per_page) * block_size_bytes


def row_bytes(data_bytes: int) -> int:
    """A row's bytes on the page: header + data, MAXALIGNed, + its line pointer."""
    return 8 * math.ceil((TUPLE_HEADER_BYTES + data_bytes) / 8) + LINE_POINTER_BYTES


def btree_bytes(rows: int, key_bytes: int, block_size_bytes: int) -> int:
    """A freshly built B-tree's bytes: entries of 8-byte header + key, 90 % full leaves,
    about 1 % more for inner pages."""
    entry = 8 * math.ceil((8 + key_bytes) / 8) + LINE_POINTER_BYTES
    per_leaf = max(2, (block_size_bytes - 40) * 90 // 100 // entry)
    return math.ceil(math.ceil(rows / per_leaf) * 1.01 + 1) * block_size_bytes

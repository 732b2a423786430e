"""The record of what blocklab created and has not yet released.

Every server, mount, loop device and cgroup is added here *before* it is created and
removed after it is released, so that `blocklab cleanup` can release what a killed
blocklab left behind. The file is JSON, guarded by an flock.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = ("server", "mount", "loop", "cgroup", "tempdir")


@dataclass(frozen=True)
class Entry:
    kind: str
    ident: str
    info: dict[str, Any]
    owner_pid: int
    created_at: float


class State:
    def __init__(self, path: Path):
        self.path = path

    @contextmanager
    def _locked(self) -> Iterator[list[dict[str, Any]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_suffix(".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                entries = json.loads(self.path.read_text()) if self.path.exists() else []
                before = json.dumps(entries)
                yield entries
                if json.dumps(entries) != before:
                    tmp = self.path.with_suffix(".tmp")
                    tmp.write_text(json.dumps(entries, indent=1))
                    os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def add(self, kind: str, ident: str, **info: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown state kind {kind!r}")
        with self._locked() as entries:
            entries[:] = [e for e in entries if not (e["kind"] == kind and e["ident"] == ident)]
            entries.append(
                {
                    "kind": kind,
                    "ident": ident,
                    "info": info,
                    "owner_pid": os.getpid(),
                    "created_at": time.time(),
                }
            )

    def update(self, kind: str, ident: str, **info: Any) -> None:
        with self._locked() as entries:
            for e in entries:
                if e["kind"] == kind and e["ident"] == ident:
                    e["info"].update(info)

    def remove(self, kind: str, ident: str) -> None:
        with self._locked() as entries:
            entries[:] = [e for e in entries if not (e["kind"] == kind and e["ident"] == ident)]

    def entries(self) -> list[Entry]:
        with self._locked() as entries:
            return [
                Entry(
                    e["kind"],
                    e["ident"],
                    dict(e["info"]),
                    int(e["owner_pid"]),
                    float(e["created_at"]),
                )
                for e in entries
            ]

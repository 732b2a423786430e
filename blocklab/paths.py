"""Where blocklab keeps things.

BLOCKLAB_HOME (default /var/lib/blocklab as root, else ~/.local/share/blocklab) holds:
  cache/    builds and sources, shared by every experiment (BLOCKLAB_CACHE overrides)
  work/     data directories, loop-device images, mount points, sockets
  state.json  what blocklab has created and not yet released (see blocklab.state)
  results/  the default results directory (--results or BLOCKLAB_RESULTS override)
Every directory is world-traversable: the unprivileged server user must reach builds
and data directories.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def _default_home() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/blocklab")
    return Path.home() / ".local" / "share" / "blocklab"


@dataclass(frozen=True)
class Paths:
    home: Path
    cache: Path
    results: Path

    @classmethod
    def from_env(cls, results: Path | None = None) -> Paths:
        home = Path(os.environ.get("BLOCKLAB_HOME") or _default_home())
        cache = Path(os.environ.get("BLOCKLAB_CACHE") or home / "cache")
        res = results or Path(os.environ.get("BLOCKLAB_RESULTS") or home / "results")
        return cls(home=home.absolute(), cache=cache.absolute(), results=res.absolute())

    @property
    def builds(self) -> Path:
        return self.cache / "builds"

    @property
    def sources(self) -> Path:
        return self.cache / "sources"

    @property
    def work(self) -> Path:
        return self.home / "work"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"


def ensure_dir(path: Path, mode: int = 0o755) -> Path:
    """mkdir -p, then make the directory and its new parents traversable by others."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    for m in missing:
        os.chmod(m, mode)
    return path


def tree_size_bytes(path: Path) -> int:
    """The bytes of every regular file under `path` (symlinks are not followed or counted)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                total += os.stat(p).st_size
    return total

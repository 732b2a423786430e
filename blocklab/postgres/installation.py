"""A usable PostgreSQL installation: a build from blocklab's cache, or system binaries.

Everything downstream (cluster, workloads, probes) takes an `Installation`; only
blocklab.postgres.build knows how one is made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_NAME = "blocklab-build.json"
# Optional libraries blocklab configures into its builds (blocklab.postgres.build; their
# Debian -dev packages are in the Makefile's APT_PACKAGES).
FEATURES = ("lz4", "zstd", "liburing")


def major_of(version: str) -> int:
    """18 for "18.1", "18beta2" or "18"; 0 when the version is unknown."""
    digits = re.match(r"\d+", version)
    return int(digits.group(0)) if digits else 0


def features_of(argv: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The optional libraries a configure argv turns on (pure): the last of
    --with-NAME / --without-NAME wins, as in configure."""
    found: dict[str, bool] = {}
    for arg in argv:
        for name in FEATURES:
            if arg == f"--with-{name}":
                found[name] = True
            elif arg == f"--without-{name}":
                found[name] = False
    return tuple(name for name in FEATURES if found.get(name))


@dataclass(frozen=True)
class Installation:
    prefix: Path  # has bin/, lib/, share/
    key: str  # build key, or "system-<major>"
    version: str  # e.g. "18.1"
    block_size_bytes: int
    wal_block_size_bytes: int
    segsize_gb: int = 1
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def major(self) -> int:
        return major_of(self.version)

    @property
    def features(self) -> tuple[str, ...] | None:
        """The optional libraries configured in (FEATURES): the manifest's "features", or
        what its recorded configure argv turned on (builds made before "features" was
        recorded); None when nothing says (system binaries)."""
        if "features" in self.manifest:
            return tuple(str(f) for f in self.manifest["features"])
        argv = self.manifest.get("configure_argv")
        return features_of(argv) if isinstance(argv, list) else None

    def bin(self, name: str) -> Path:
        return self.prefix / "bin" / name

    @classmethod
    def from_manifest(cls, prefix: Path) -> Installation:
        data = json.loads((prefix / MANIFEST_NAME).read_text())
        return cls(
            prefix=prefix,
            key=data["key"],
            version=data["version"],
            block_size_bytes=int(data["block_size_bytes"]),
            wal_block_size_bytes=int(data["wal_block_size_bytes"]),
            segsize_gb=int(data.get("segsize_gb", 1)),
            manifest=data,
        )

    @classmethod
    def system(cls, major: int = 15) -> Installation:
        """Debian's packaged binaries (8 kB pages, 8 kB WAL blocks)."""
        prefix = Path(f"/usr/lib/postgresql/{major}")
        return cls(
            prefix=prefix,
            key=f"system-{major}",
            version=str(major),
            block_size_bytes=8192,
            wal_block_size_bytes=8192,
            manifest={"source": "debian-binary-package", "prefix": str(prefix)},
        )

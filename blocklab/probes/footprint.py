"""The data volume's footprint on a drive that compresses each 4 KiB logical block.

After a run (server stopped, outside the measured window) on a loop-device file system:
sync, fstrim the file system (the loop device turns discards into holes in its backing
image), then read every allocated 4 KiB block of the image (SEEK_DATA/SEEK_HOLE skip the
holes) and compress each block on its own with lz4 and zstd, as a drive with transparent
compression would. A block that does not shrink is counted at 4 KiB (a drive stores it
raw). On `dir` storage there is no image of the data volume's own, and a real device
compresses (or not) inside itself: the metrics are missing there, with the reason.

Metrics (bytes): footprint_allocated_bytes (the image's allocated blocks: what a normal
drive stores), footprint_lz4_bytes and footprint_zstd_bytes (what a compressing drive
stores), footprint_logical_bytes (the relations: table_bytes + index_bytes after the run).
The volume holds the whole data directory, pg_wal too unless it has a volume of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lz4.block
import zstandard

from blocklab import proc

BLOCK_BYTES = 4096
ALGORITHMS = ("lz4", "zstd")
ZSTD_LEVEL = 3  # zstd's default
METRICS = (
    "footprint_logical_bytes",
    "footprint_allocated_bytes",
    "footprint_lz4_bytes",
    "footprint_zstd_bytes",
)
LOOP_KINDS = ("ext4", "xfs", "btrfs")
OFF_REASON = "off: the experiment's design.footprint = false"
# What the step costs, for the plan and its ETA. bench/bench_footprint.py reads and
# compresses a 64 MiB image (half random, half zeros) with compress_blocks(image_blocks()):
# 220-460 MB/s on the 2-core development machine under load, page-cached (one zstd
# compressor per block, before: 70-107 MB/s). The estimate takes 150 MB/s, below the
# measured range, for an image partly read from disk; plus sync and fstrim.
READ_COMPRESS_MB_PER_S = 150.0
SYNC_TRIM_S = 2.0


@dataclass(frozen=True)
class Footprint:
    allocated_bytes: int
    compressed_bytes: Mapping[str, int]  # algorithm -> bytes


class Compressors:
    """One lz4 and one zstd compressor for a whole measurement. A zstandard
    ZstdCompressor keeps its context between compress() calls (zstd's manual: re-using a
    context is a speed optimisation; the output is the same bytes); making one per 4 KiB
    block cost most of the time. lz4.block.compress keeps no state between calls."""

    def __init__(self) -> None:
        self._zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL)

    def size(self, block: bytes, algorithm: str) -> int:
        """Bytes one block takes on a compressing drive: compressed, or raw if smaller."""
        if algorithm == "lz4":
            size = len(lz4.block.compress(block, store_size=False))
        elif algorithm == "zstd":
            size = len(self._zstd.compress(block))
        else:
            raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
        return min(size, len(block))


def compressed_size(block: bytes, algorithm: str) -> int:
    """Bytes one block takes on a compressing drive: compressed, or raw if that is smaller."""
    return Compressors().size(block, algorithm)


def compress_blocks(blocks: Iterable[bytes]) -> Footprint:
    """Allocated and compressed bytes of a sequence of blocks (pure)."""
    allocated = 0
    compressed = dict.fromkeys(ALGORITHMS, 0)
    compressors = Compressors()
    for block in blocks:
        allocated += len(block)
        for algorithm in ALGORITHMS:
            compressed[algorithm] += compressors.size(block, algorithm)
    return Footprint(allocated, compressed)


def data_extents(fd: int) -> Iterator[tuple[int, int]]:
    """(start, end) of every allocated region of an open file, widened to whole blocks."""
    size = os.fstat(fd).st_size
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start // BLOCK_BYTES * BLOCK_BYTES, min(size, -(-end // BLOCK_BYTES) * BLOCK_BYTES)
        offset = end


def image_blocks(image: Path) -> Iterator[bytes]:
    """Every allocated 4 KiB block of a (sparse) image file."""
    fd = os.open(image, os.O_RDONLY)
    try:
        for start, end in data_extents(fd):
            os.lseek(fd, start, os.SEEK_SET)
            pos = start
            while pos < end:
                chunk = os.read(fd, min(end - pos, 256 * BLOCK_BYTES))
                if not chunk:
                    break
                for i in range(0, len(chunk), BLOCK_BYTES):
                    yield chunk[i : i + BLOCK_BYTES]
                pos += len(chunk)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def estimate_s(image_bytes: int) -> float:
    """Seconds the step takes after one run that reads `image_bytes` of the image."""
    return SYNC_TRIM_S + image_bytes / (READ_COMPRESS_MB_PER_S * 1e6)


def measured_kind(kind: str) -> bool:
    """Whether a data volume of this storage kind has a loop image to measure."""
    return kind in LOOP_KINDS


def missing_reason(data_facts: Mapping[str, Any]) -> str | None:
    """Why the footprint cannot be measured on this storage (None when it can)."""
    kind = data_facts.get("kind")
    if kind == "dir":
        return "kind 'dir': the data directory has no loop image of its own to read"
    if kind == "device":
        return "kind 'device': a real drive's physical footprint is the drive's own"
    if kind not in LOOP_KINDS or not data_facts.get("image_path"):
        return f"storage kind {kind!r} has no loop image"
    return None


def measure(
    data_facts: Mapping[str, Any], run_metrics: Mapping[str, float | None]
) -> dict[str, Any]:
    """Trim, then read and compress the data volume's image. Returns {"metrics": ...,
    "facts": ...} or {"missing": {metric: reason}} (I/O: fstrim and the image)."""
    reason = missing_reason(data_facts)
    if reason is not None:
        return {"missing": dict.fromkeys(METRICS, reason)}
    image, mount_point = Path(data_facts["image_path"]), data_facts["mount_point"]
    os.sync()
    trim = proc.run(["fstrim", "-v", mount_point], timeout_s=600)
    fp = compress_blocks(image_blocks(image))
    metrics: dict[str, float | None] = {
        "footprint_logical_bytes": logical_bytes(run_metrics),
        "footprint_allocated_bytes": float(fp.allocated_bytes),
    }
    metrics.update({f"footprint_{a}_bytes": float(b) for a, b in fp.compressed_bytes.items()})
    facts = {
        "image": str(image),
        "fstrim": trim.stdout.strip(),
        "block_bytes": BLOCK_BYTES,
        "zstd_level": ZSTD_LEVEL,
        "lz4": "lz4.block, no size header",
        "image_st_blocks_bytes": image.stat().st_blocks * 512,
    }
    return {"metrics": metrics, "facts": facts}


def logical_bytes(run_metrics: Mapping[str, float | None]) -> float | None:
    """The relations' bytes (table + index, as the probes measured them after the run)."""
    table, index = run_metrics.get("table_bytes"), run_metrics.get("index_bytes")
    return None if table is None or index is None else table + index

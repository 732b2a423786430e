"""The footprint on a compressing drive: known data against lz4/zstd themselves, the
storage kinds where it is missing, and real pgbench tables on a real loop device."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import lz4.block
import pytest
import zstandard

from blocklab import proc
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.probes import footprint
from blocklab.state import State
from blocklab.storage import provision
from blocklab.storage.cleanup import release_all

B = footprint.BLOCK_BYTES
MIB = 1024 * 1024


def _expected(block: bytes) -> dict[str, int]:
    lz = len(lz4.block.compress(block, store_size=False))
    zs = len(zstandard.ZstdCompressor(level=3).compress(block))
    return {"lz4": min(lz, B), "zstd": min(zs, B)}


def test_image_of_known_data(tmp_path: Path) -> None:
    zeros, rand = bytes(B), os.urandom(B)
    pattern = (b"blocklab" * (B // 8))[:B]
    image = tmp_path / "img"
    with open(image, "wb") as f:  # zeros, random, pattern, then a 1 MiB hole, then random
        f.write(zeros + rand + pattern)
        f.seek(3 * B + MIB)
        f.write(rand)
        f.truncate(3 * B + 2 * MIB)  # and a hole at the end
    fp = footprint.compress_blocks(footprint.image_blocks(image))
    assert fp.allocated_bytes == 4 * B  # the holes are skipped
    want = {a: 0 for a in footprint.ALGORITHMS}
    for block in (zeros, rand, pattern, rand):
        for a, n in _expected(block).items():
            want[a] += n
    assert dict(fp.compressed_bytes) == want
    assert _expected(rand) == {"lz4": B, "zstd": B}  # random data is stored raw
    assert _expected(zeros)["lz4"] < 64 and _expected(pattern)["zstd"] < 64


def test_one_zstd_compressor_per_measurement_gives_the_same_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = []
    real = zstandard.ZstdCompressor

    def counting(*args: object, **kwargs: object) -> zstandard.ZstdCompressor:
        made.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    blocks = [os.urandom(B), bytes(B), (b"blocklab" * (B // 8))[:B]] * 50
    monkeypatch.setattr(zstandard, "ZstdCompressor", counting)
    fp = footprint.compress_blocks(blocks)
    assert len(made) == 1  # not one per block
    monkeypatch.undo()
    want = sum(_expected(b)["zstd"] for b in blocks)
    assert fp.compressed_bytes["zstd"] == want and fp.allocated_bytes == 150 * B


def test_missing_on_dir_and_device() -> None:
    for kind, words in (("dir", "no loop image"), ("device", "real drive")):
        out = footprint.measure({"kind": kind}, {})
        assert set(out["missing"]) == set(footprint.METRICS)
        assert all(words in reason for reason in out["missing"].values())


def test_logical_bytes_needs_both() -> None:
    assert footprint.logical_bytes({"table_bytes": 10.0, "index_bytes": 5.0}) == 15.0
    assert footprint.logical_bytes({"table_bytes": 10.0}) is None


# -- real -------------------------------------------------------------------------------------


@pytest.fixture
def state(paths: Paths) -> Iterator[State]:
    st = State(paths.home / f"state-{uuid.uuid4().hex[:8]}.json")
    yield st
    assert release_all(st, only_dead_owners=False) == [] and st.entries() == []


def _accounts(inst: Installation, c: Cluster, fillfactor: int) -> footprint.Footprint:
    args = ["-i", "-s", "2", "-q", "-F", str(fillfactor), "postgres"]
    proc.run([inst.bin("pgbench"), *c.conn_args(), *args], user=c.user)
    c.psql("CHECKPOINT")
    rel = c.psql("SELECT pg_relation_filepath('pgbench_accounts')").strip()
    return footprint.compress_blocks(footprint.image_blocks(c.data_dir / rel))


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root")
def test_fillfactor_50_compresses_to_much_less_than_twice(
    paths: Paths, state: State, pg15_system: Installation
) -> None:
    req = StorageRequest(kind="ext4")
    name = "fp" + uuid.uuid4().hex[:6]
    with provision(req, name=name, paths=paths, state=state, min_size_bytes=128 * MIB) as prov:
        base = prov.data_dir.parent
        c = Cluster(
            pg15_system,
            prov.data_dir,
            socket_dir=base / "sock",
            user=server_user(),
            state=state,
            log_path=base / "server.log",
        )
        try:
            c.initdb(data_checksums=False)
            c.write_settings({"shared_buffers": "16MB"})
            c.start()
            full = _accounts(pg15_system, c, 100)
            half = _accounts(pg15_system, c, 50)
        finally:
            c.stop()
        measured = footprint.measure(prov.facts["data"], {"table_bytes": 1.0, "index_bytes": 2.0})
    assert half.allocated_bytes / full.allocated_bytes > 1.9  # twice the pages
    for a in footprint.ALGORITHMS:
        ratio = half.compressed_bytes[a] / full.compressed_bytes[a]
        assert ratio < 1.5, (a, ratio)  # the empty half of each page compresses away
        assert full.compressed_bytes[a] < 0.8 * full.allocated_bytes
    m = measured["metrics"]
    assert m["footprint_logical_bytes"] == 3.0
    # the volume holds the fillfactor-50 table (the first was dropped, and trimmed away)
    assert half.allocated_bytes <= m["footprint_allocated_bytes"] < half.allocated_bytes * 8
    assert m["footprint_lz4_bytes"] < m["footprint_allocated_bytes"]
    assert "trimmed" in measured["facts"]["fstrim"]

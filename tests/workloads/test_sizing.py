"""The storage size estimate (blocklab.workloads.sizing): pure arithmetic checked against real
`pgbench -i` data directories, and `blocklab plan` refusing a storage too small for it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab.errors import UserError
from blocklab.model import DatasetRequest, StorageRequest, Variant
from blocklab.paths import Paths
from blocklab.postgres.installation import Installation
from blocklab.workloads import dataset, pages, sizing

MIB = 1024 * 1024
GIB = 1024 * MIB


# -- the arithmetic ---------------------------------------------------------------------
def test_pgbench_accounts_pages_match_postgresql() -> None:
    # pg_relation_size('pgbench_accounts') / 8192 at scale 1 and 10 on 8 kB pages
    assert pages.heap_pages(100_000, pages.ACCOUNT_ROW_BYTES, 8192, 100) == 1640
    assert pages.heap_pages(1_000_000, pages.ACCOUNT_ROW_BYTES, 8192, 100) == 16394
    assert pages.btree_pages(100_000, 8192) == 276  # pgbench_accounts_pkey, 2208 kB


def test_fillfactor_and_page_size_change_the_tables() -> None:
    full = pages.pgbench_tables_bytes(10, 100, 8192)
    assert pages.heap_pages(1_000_000, pages.ACCOUNT_ROW_BYTES, 8192, 75) == 21740  # 46 a page
    assert pages.pgbench_tables_bytes(10, 75, 8192) > full * 1.25
    # smaller pages waste a little more per page, never less
    assert pages.pgbench_tables_bytes(10, 100, 2048) >= full
    assert pages.pgbench_tables_bytes(20, 100, 8192) > 1.9 * full


def variant(settings: dict[str, str] | None = None, **storage: object) -> Variant:
    return Variant(
        storage=StorageRequest.model_validate(storage),
        dataset=DatasetRequest(scale=1),
        settings=tuple(sorted((settings or {}).items())),
    )


def test_wal_follows_max_wal_size_and_the_version_default() -> None:
    default = sizing.variant_needs(variant()).data.bytes
    small = sizing.variant_needs(variant({"max_wal_size": "256MB"})).data.bytes
    large = sizing.variant_needs(variant({"max_wal_size": "4GB"})).data.bytes
    assert small < default < large
    assert large - default == int(3 * GIB * 1.5)
    assert sizing.variant_needs(variant({"max_wal_size": "256"})).data.bytes == small  # MB
    kept = sizing.variant_needs(variant({"wal_keep_size": "1GB"})).data.bytes
    assert kept - default == GIB


def test_wal_on_its_own_volume_is_not_counted_on_the_data_volume() -> None:
    together = sizing.variant_needs(variant(kind="ext4"))
    apart = sizing.variant_needs(variant(kind="ext4", wal={"kind": "ext4"}))
    assert together.wal is None and apart.wal is not None
    assert apart.data.bytes + apart.wal.bytes == together.data.bytes
    assert apart.data.bytes < 200 * MIB  # scale 1: no room kept for 1 GB of WAL
    assert "max_wal_size 1024 MB" in apart.wal.how and "pg_wal" not in apart.data.how


def test_bad_max_wal_size_names_the_setting() -> None:
    with pytest.raises(UserError, match=r"matrix.settings.max_wal_size: 'lots'"):
        sizing.variant_needs(variant({"max_wal_size": "lots"}))


def test_a_shared_storage_is_sized_for_its_largest_variant() -> None:
    small = variant()
    big = Variant(dataset=DatasetRequest(scale=50))
    needs = sizing.needs_by_storage([small, big])
    assert needs == {small.storage: sizing.variant_needs(big)}


# -- against real data directories ------------------------------------------------------
@pytest.mark.build
@pytest.mark.parametrize("scale", [1, 10])
@pytest.mark.parametrize("build", ["pg18_4k", "pg18_8k"])
def test_estimate_covers_a_real_dataset(
    build: str, scale: int, paths: Paths, request: pytest.FixtureRequest
) -> None:
    inst: Installation = request.getfixturevalue(build)
    cluster = scratch_cluster(paths, inst, "sizing")
    key = f"sizing-{uuid.uuid4().hex[:8]}"
    try:
        snap = dataset.create(
            cluster,
            DatasetRequest(scale=scale),
            paths=paths,
            key=key,
            wal_segsize_mb=16,
            data_checksums=False,
        )
        wal_bytes = dataset.tree_size_bytes(snap.data / "pg_wal")
        data_bytes = dataset.tree_size_bytes(snap.data) - wal_bytes
    finally:
        remove_cluster(cluster)
        shutil.rmtree(dataset.snapshot_root(paths, key), ignore_errors=True)
    at_rest = sizing.CLUSTER_BYTES + pages.pgbench_tables_bytes(scale, 100, inst.block_size_bytes)
    estimate = sizing.data_need(scale, 100, inst.block_size_bytes, wal=None).bytes
    print(f"{build} scale {scale}: data {data_bytes} B (estimate at rest {at_rest} B)")
    assert data_bytes <= at_rest < 3 * data_bytes
    assert data_bytes <= estimate < 3 * data_bytes
    assert wal_bytes <= sizing.wal_need(sizing.DEFAULT_MAX_WAL_SIZE_BYTES, 16 * MIB).bytes


# -- plan time ----------------------------------------------------------------------------
EXPERIMENT = """
[experiment]
name = "small-storage"
[matrix]
scale = {scale}
storage = {storage}
[matrix.settings]
max_wal_size = "{max_wal_size}"
"""


def plan(tmp_path: Path, **values: object) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "exp.toml"
    f.write_text(EXPERIMENT.format(**values))
    env = {**os.environ, "BLOCKLAB_HOME": str(tmp_path / "home")}
    env["BLOCKLAB_CACHE"] = str(tmp_path / "cache")  # empty: a build would show here
    return subprocess.run(
        # --allow paths: a dir storage outside the file's directory is the owner's to grant
        [sys.executable, "-m", "blocklab.cli", "plan", str(f), "--allow", "paths"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="ext4 storage needs root")
@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"scale": 10, "storage": '{kind = "ext4", size_mb = 1024}', "max_wal_size": "1GB"},
            "matrix.storage.size_mb: 1024 MB is less than the",
        ),
        (
            {"scale": 1, "storage": '{kind = "ext4", size_mb = 512}', "max_wal_size": "1GB"},
            "max_wal_size 1024 MB x 1.5",
        ),
        (
            {
                "scale": 1,
                "storage": '{kind = "ext4", size_mb = 256, wal = {kind = "ext4", size_mb = 512}}',
                "max_wal_size": "1GB",
            },
            "matrix.storage.wal.size_mb: 512 MB is less than the",
        ),
    ],
)
def test_plan_refuses_a_storage_too_small(
    tmp_path: Path, values: dict[str, object], message: str
) -> None:
    r = plan(tmp_path, **values)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "max_wal_size" in r.stderr
    assert not (tmp_path / "cache" / "builds").exists()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="ext4 storage needs root")
def test_plan_accepts_a_small_data_volume_when_wal_has_its_own(tmp_path: Path) -> None:
    storage = '{kind = "ext4", size_mb = 256, wal = {kind = "ext4", size_mb = 512}}'
    r = plan(tmp_path, scale=1, storage=storage, max_wal_size="128MB")
    assert r.returncode == 0, r.stderr


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a small file system needs a loop device")
def test_plan_refuses_a_directory_without_the_free_space(tmp_path: Path, paths: Paths) -> None:
    from blocklab.state import State
    from blocklab.storage import provision

    state = State(paths.home / f"state-{uuid.uuid4().hex[:8]}.json")
    small = StorageRequest(kind="ext4", size_mb=64)
    with provision(small, name=f"t{uuid.uuid4().hex[:8]}", paths=paths, state=state,
                   min_size_bytes=0) as prov:  # fmt: skip
        storage = f'{{kind = "dir", path = "{prov.data_dir}/pg"}}'
        r = plan(tmp_path, scale=1, storage=storage, max_wal_size="1GB")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"matrix.storage.path: {prov.data_dir} has " in r.stderr
    assert "bytes free, less than the" in r.stderr and "max_wal_size" in r.stderr
    assert state.entries() == []

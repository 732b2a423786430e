"""The settings that shape what a dataset's load stores (model.LOAD_SETTINGS): the load
runs with the variant's values of them, and variants that differ in them do not share a
dataset; variants that differ in any other setting still do."""

from __future__ import annotations

import shutil
import uuid

import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab.model import LOAD_SETTINGS, DatasetRequest, Variant
from blocklab.paths import Paths
from blocklab.postgres.installation import Installation
from blocklab.workloads import dataset


def _variant(**settings: str) -> Variant:
    return Variant(settings=tuple(settings.items()))


def test_only_the_load_settings_part_datasets() -> None:
    plain = _variant(work_mem="64MB").dataset_key("pg18-abc")
    assert _variant().dataset_key("pg18-abc") == plain  # a run's setting: one dataset
    lz4 = _variant(default_toast_compression="lz4", work_mem="64MB")
    assert lz4.load_settings() == {"default_toast_compression": "lz4"}
    keys = {
        plain,
        lz4.dataset_key("pg18-abc"),
        _variant(default_toast_compression="pglz").dataset_key("pg18-abc"),
        _variant(default_statistics_target="1000").dataset_key("pg18-abc"),
    }
    assert len(keys) == 4
    assert LOAD_SETTINGS == {"default_toast_compression", "default_statistics_target"}


def test_a_variant_without_load_settings_keeps_the_dataset_key_it_had() -> None:
    # computed by the code before load settings existed: a user's datasets stay valid
    assert Variant().dataset_key("pg18-abc") == "13d520bf9215"


@pytest.mark.build
def test_the_load_runs_with_the_variants_load_settings(pg18_8k: Installation, paths: Paths) -> None:
    """pgbench -i's VACUUM ANALYZE keeps statistics of default_statistics_target: 7 gives
    a histogram of at most 8 bounds (PostgreSQL's default, 100, gives 101)."""
    cluster = scratch_cluster(paths, pg18_8k, "load-settings")
    key = f"load-settings-{uuid.uuid4().hex[:8]}"
    settings = {"default_statistics_target": "7", "default_toast_compression": "lz4"}
    try:
        snap = dataset.create(
            cluster,
            DatasetRequest(scale=1),
            paths=paths,
            key=key,
            wal_segsize_mb=16,
            data_checksums=False,
            settings=settings,
        )
        assert snap.settings == settings and dataset.load(paths, key) == snap
        cluster.write_settings({})  # the runs' settings: PostgreSQL's defaults
        cluster.start()
        bounds = cluster.psql(
            "SELECT array_length(histogram_bounds, 1) FROM pg_stats"
            " WHERE tablename = 'pgbench_accounts' AND attname = 'aid'"
        )
        toast = cluster.psql("SHOW default_toast_compression")
    finally:
        remove_cluster(cluster)
        shutil.rmtree(dataset.snapshot_root(paths, key), ignore_errors=True)
    assert 2 <= int(bounds) <= 8, bounds
    assert toast.strip() == "pglz"  # what the load ran with is not left to the runs

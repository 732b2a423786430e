"""postgresql.conf gets exactly the settings asked for: a value with quotes, backslashes
or a would-be second line is either refused (UserError, nothing written or started) or
escaped so that a real PostgreSQL 18 server reads back exactly that one value."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import remove_cluster, scratch_cluster

from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.postgres.cluster import SETTINGS_FILE, Cluster, check_setting_value, quote_setting
from blocklab.postgres.installation import Installation

INJECTIONS = [
    "on'\nshared_preload_libraries='x",
    "'a'\nshared_preload_libraries = 'x'\nz='b'",
    "x\rshared_preload_libraries='x'",
    "x\x00",
]
# Legal on one line, hostile to a naive quoter: each must come back from SHOW unchanged.
TRICKY = [
    "it's",
    "'a' shared_preload_libraries='x' 'b'",
    "back\\slash",
    "ends with a backslash\\",
    "'quoted\\'",
    "<script>window.__pwned=1</script>",
    "# not a comment",
]


@pytest.fixture(scope="module")
def cluster(paths: Paths, pg18_8k: Installation) -> Iterator[Cluster]:
    c = scratch_cluster(paths, pg18_8k, "test-settings-injection")
    try:
        c.initdb(data_checksums=False)
        yield c
    finally:
        remove_cluster(c)


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_line_breaking_value_is_refused_before_anything_is_written(
    cluster: Cluster, value: str
) -> None:
    conf = cluster.data_dir / "postgresql.conf"
    before = conf.read_bytes()
    ours = cluster.data_dir / SETTINGS_FILE
    ours_before = ours.read_bytes() if ours.exists() else None
    with pytest.raises(UserError, match="settings.application_name"):
        cluster.write_settings({"application_name": value})
    assert conf.read_bytes() == before
    assert (ours.read_bytes() if ours.exists() else None) == ours_before
    assert not cluster.alive()


def test_tricky_values_reach_the_server_as_exactly_one_setting_each(cluster: Cluster) -> None:
    """The running server parses blocklab.conf afresh for pg_file_settings: each value is
    the one and only entry of its setting there, unchanged, and nothing else appears."""
    cluster.write_settings({})
    cluster.start()
    try:
        for value in TRICKY:
            if value.startswith("'") and quote_setting(value) == value:
                continue  # already one quoted conf string: written as given
            cluster.write_settings({"cluster_name": value})
            written = (cluster.data_dir / SETTINGS_FILE).read_text()
            rows = cluster.psql(
                "SELECT coalesce(name, 'PARSE ERROR: ' || error) || '=' || coalesce(setting, '') "
                f"FROM pg_file_settings WHERE sourcefile LIKE '%{SETTINGS_FILE}' "
                "AND (name IS NULL OR name IN ('cluster_name', 'shared_preload_libraries', 'z'))"
            ).splitlines()
            assert rows == [f"cluster_name={value}"], (value, written)
    finally:
        cluster.stop()


def test_check_setting_value_names_the_setting() -> None:
    with pytest.raises(UserError, match=r"settings\.work_mem: .*'\\n'"):
        check_setting_value("work_mem", "1MB\nfsync = off")
    check_setting_value("work_mem", "it's fine")

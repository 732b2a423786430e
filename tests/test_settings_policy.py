"""The settings policy: same numbers (native) or same bytes (bytes) in every build."""

from __future__ import annotations

import pytest

from blocklab import settings_policy as sp

KB = 1024


def bytes_policy(settings: dict[str, str], bs_kb: int, wal_kb: int, **kw: int) -> dict[str, str]:
    return sp.convert(
        settings, "bytes", block_size_bytes=bs_kb * KB, wal_block_size_bytes=wal_kb * KB, **kw
    ).settings


def in_bytes(name: str, value: str, bs_kb: int, wal_kb: int) -> int:
    """What PostgreSQL would make of `value` in a build with these sizes."""
    spec = sp.PAGE_SETTINGS.get(name)
    unit = (bs_kb if spec is None or spec.unit == "page" else wal_kb) * KB
    n = sp.value_bytes(value, unit)
    assert n is not None, (name, value)
    return n


def test_native_passes_everything_through() -> None:
    s = {"bgwriter_lru_maxpages": "100", "shared_buffers": "16384", "wal_buffers": "-1"}
    out = sp.convert(s, "native", block_size_bytes=4096, wal_block_size_bytes=4096).settings
    assert out == s and out is not s


def test_bytes_gives_every_build_the_same_bytes() -> None:
    given = {
        "bgwriter_lru_maxpages": "200",
        "checkpoint_flush_after": "16",
        "effective_cache_size": "65536",
        "temp_buffers": "2048",
        "shared_buffers": "32768",  # pages of the 8 kB reference = 256 MB
        "wal_writer_flush_after": "64",  # WAL blocks of the reference = 512 kB
        "work_mem": "64MB",
        "random_page_cost": "1.1",
    }
    builds = [(2, 8), (4, 4), (4, 8), (8, 8), (16, 16), (32, 8)]
    results = {b: bytes_policy(given, *b) for b in builds}
    for name in sp.PAGE_SETTINGS:
        if name not in results[(8, 8)]:
            continue
        volumes = {b: in_bytes(name, results[b][name], *b) for b in builds}
        assert len(set(volumes.values())) == 1, (name, volumes)
    ref = results[(8, 8)]
    assert in_bytes("shared_buffers", ref["shared_buffers"], 8, 8) == 256 * 1024 * KB
    assert results[(4, 4)]["bgwriter_lru_maxpages"] == "400"
    assert results[(16, 16)]["bgwriter_lru_maxpages"] == "100"
    assert results[(4, 8)]["effective_cache_size"] == "524288kB"
    for b in builds:  # settings that are not page counts are untouched
        assert results[b]["work_mem"] == "64MB"
        assert results[b]["random_page_cost"] == "1.1"


def test_bytes_materialises_page_count_defaults() -> None:
    out = bytes_policy({}, 4, 4)
    assert out["bgwriter_lru_maxpages"] == "200"  # 100 x 8 kB = 800 kB = 200 x 4 kB
    assert out["checkpoint_flush_after"] == "256kB"
    assert out["bgwriter_flush_after"] == "512kB"
    assert out["effective_cache_size"] == "4194304kB"
    assert out["temp_buffers"] == "8192kB"
    # defaults that are already byte-constant are not written
    for name in ("shared_buffers", "wal_writer_flush_after", "min_parallel_table_scan_size"):
        assert name not in out
    assert "backend_flush_after" not in out


def test_values_with_units_are_left_alone() -> None:
    out = bytes_policy({"effective_cache_size": "2GB", "temp_buffers": "16MB"}, 4, 4)
    assert out["effective_cache_size"] == "2GB" and out["temp_buffers"] == "16MB"


@pytest.mark.parametrize(
    "shared,bs,wal,seg,expected",
    [
        # 128 MB / 8 kB = 16384 pages; / 32 = 512 WAL blocks of 8 kB = 4 MB
        (128 * 1024 * KB, 8 * KB, 8 * KB, 16 * 1024 * KB, 4 * 1024 * KB),
        # 4 kB pages: 32768 pages / 32 = 1024 blocks of 8 kB = 8 MB: the bug in the thread
        (128 * 1024 * KB, 4 * KB, 8 * KB, 16 * 1024 * KB, 8 * 1024 * KB),
        # 4 kB WAL blocks, 8 kB pages: 512 blocks of 4 kB = 2 MB
        (128 * 1024 * KB, 8 * KB, 4 * KB, 16 * 1024 * KB, 2 * 1024 * KB),
        # capped at one segment: 4 GB / 8 kB / 32 = 16384 > 2048 blocks = 16 MB
        (4 * 1024 * 1024 * KB, 8 * KB, 8 * KB, 16 * 1024 * KB, 16 * 1024 * KB),
        # at least 8 blocks: 1 MB / 8 kB / 32 = 4 -> 8 blocks = 64 kB
        (1024 * KB, 8 * KB, 8 * KB, 16 * 1024 * KB, 64 * KB),
    ],
)
def test_auto_wal_buffers_follows_xlogchoosenumbuffers(
    shared: int, bs: int, wal: int, seg: int, expected: int
) -> None:
    assert sp.auto_wal_buffers_bytes(shared, bs, wal, seg) == expected


def test_bytes_sets_wal_buffers_to_the_references_auto_tuning() -> None:
    for bs, wal in [(4, 4), (4, 8), (8, 4), (8, 8), (16, 16)]:
        assert bytes_policy({}, bs, wal)["wal_buffers"] == "4096kB"
    assert bytes_policy({"shared_buffers": "1GB"}, 4, 4)["wal_buffers"] == "16384kB"
    # a 4 kB-page, 8 kB-WAL reference auto-tunes 128 MB / 4 kB / 32 = 1024 x 8 kB = 8 MB
    assert bytes_policy({}, 8, 8, reference_block_size_bytes=4096)["wal_buffers"] == "8192kB"
    # explicit values: plain numbers are reference WAL blocks, units are bytes
    assert bytes_policy({"wal_buffers": "256"}, 4, 4)["wal_buffers"] == "2048kB"
    assert bytes_policy({"wal_buffers": "16MB"}, 4, 4)["wal_buffers"] == "16MB"


def test_flush_after_is_capped_at_postgres_limit_with_a_note() -> None:
    conv = sp.convert(
        {"checkpoint_flush_after": "256"},  # 256 x 8 kB = 2 MB
        "bytes",
        block_size_bytes=2 * KB,
        wal_block_size_bytes=8 * KB,
    )
    assert conv.settings["checkpoint_flush_after"] == "512kB"  # 256 x 2 kB
    assert any("checkpoint_flush_after" in n and "capped" in n for n in conv.notes)


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="native, bytes"):
        sp.convert({}, "pages", block_size_bytes=8192, wal_block_size_bytes=8192)


# --- against real servers: what pg_settings reports ---------------------------------------

PG_UNIT_BYTES = {"B": 1, "kB": KB, "MB": KB * KB, "4kB": 4 * KB, "8kB": 8 * KB, "16kB": 16 * KB}


def _readback(paths, inst, settings: dict[str, str]) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    from helpers import running_cluster

    with running_cluster(paths, inst, "test-policy", settings) as c:
        return c.settings_readback()


def _volume(name: str, row: dict[str, str], block_size_bytes: int) -> int:
    if not row.get("unit"):  # bgwriter_lru_maxpages: a plain count of pages
        return int(row["setting"]) * block_size_bytes
    return int(row["setting"]) * PG_UNIT_BYTES[row["unit"]]


@pytest.mark.build
def test_bytes_policy_gives_equal_bytes_in_pg_settings(paths, pg18_4k, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    given = {"bgwriter_lru_maxpages": "100", "temp_buffers": "2048", "shared_buffers": "128MB"}
    names = [*(n for n in sp.PAGE_SETTINGS if n != "min_parallel_index_scan_size"), "wal_buffers"]
    seen: dict[str, list[dict[str, int]]] = {"bytes": [], "native": []}
    for policy in ("bytes", "native"):
        for inst in (pg18_4k, pg18_8k):
            conf = sp.convert(
                given,
                policy,
                block_size_bytes=inst.block_size_bytes,
                wal_block_size_bytes=inst.wal_block_size_bytes,
            ).settings
            rows = _readback(paths, inst, conf)
            seen[policy].append({n: _volume(n, rows[n], inst.block_size_bytes) for n in names})
    four, eight = seen["bytes"]
    assert four == eight, {n: (four[n], eight[n]) for n in names if four[n] != eight[n]}
    assert eight["wal_buffers"] == 4 * 1024 * KB and eight["bgwriter_lru_maxpages"] == 800 * KB
    n4, n8 = seen["native"]  # the contrast: same numbers, different bytes
    assert n4["bgwriter_lru_maxpages"] * 2 == n8["bgwriter_lru_maxpages"]
    assert n4["checkpoint_flush_after"] * 2 == n8["checkpoint_flush_after"]
    assert n4["temp_buffers"] * 2 == n8["temp_buffers"]

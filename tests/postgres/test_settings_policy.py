"""The settings policy: same numbers (native) or same bytes (bytes) in every build.

The pure tests replay the settings catalogues blocklab recorded from the real PG 18 builds
(tests/data/settings); the `build` tests read the catalogues of the builds themselves and
what their servers make of the converted settings.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
from helpers import recorded_catalogue

from blocklab.postgres import settings_catalogue
from blocklab.postgres import settings_policy as sp

KB = 1024
CAT = {4: recorded_catalogue(4), 8: recorded_catalogue(8)}  # PG 18, page = WAL block size
SLRU = (
    "commit_timestamp_buffers", "multixact_member_buffers", "multixact_offset_buffers",
    "notify_buffers", "serializable_buffers", "subtransaction_buffers", "transaction_buffers",
)  # fmt: skip
PG18_NEW = ("io_combine_limit", "io_max_combine_limit", *SLRU)


def bytes_policy(settings: dict[str, str], build_kb: int, ref_kb: int = 8) -> sp.Conversion:
    return sp.convert(settings, "bytes", catalogue=CAT[build_kb], reference=CAT[ref_kb])


def in_bytes(name: str, value: str, build_kb: int) -> int:
    """What PostgreSQL would make of `value` in the build: a plain number counts its units."""
    n = sp.value_bytes(value, CAT[build_kb].page_settings().get(name, build_kb * KB))
    assert n is not None, (name, value)
    return n


def effective_bytes(name: str, written: dict[str, str], build_kb: int) -> int:
    """The bytes the server gets: what is written, else the build's own default."""
    if name in written:
        return in_bytes(name, written[name], build_kb)
    default = CAT[build_kb].gucs[name].default_units()
    assert default is not None
    return default * CAT[build_kb].page_settings()[name]


def test_the_catalogue_says_which_settings_count_pages() -> None:
    four = CAT[4].page_settings()
    for name in (*PG18_NEW, "shared_buffers", "temp_buffers", "bgwriter_lru_maxpages"):
        assert four[name] == 4 * KB, name
    assert CAT[8].page_settings()["io_combine_limit"] == 8 * KB
    for name in ("work_mem", "segment_size", "wal_buffers", "effective_io_concurrency"):
        assert name not in four  # bytes, internal, converted by its own rule, not pages


def test_a_setting_the_catalogue_counts_in_pages_is_converted_without_a_list() -> None:
    extra = sp.Guc("future_pages", unit="8kB", min_val="0", max_val="1000", boot_val="10")
    ref = dataclasses.replace(CAT[8], gucs={**CAT[8].gucs, "future_pages": extra})
    own = dataclasses.replace(
        CAT[4], gucs={**CAT[4].gucs, "future_pages": dataclasses.replace(extra, unit="4kB")}
    )
    out = sp.convert({}, "bytes", catalogue=own, reference=ref).settings
    assert out["future_pages"] == "80kB"  # the reference's 10 x 8 kB


def test_native_passes_everything_through() -> None:
    s = {"bgwriter_lru_maxpages": "100", "shared_buffers": "16384", "wal_buffers": "-1"}
    out = sp.convert(s, "native").settings
    assert out == s and out is not s


def test_io_combine_limit_and_slru_buffers_keep_the_references_bytes() -> None:
    given = {"io_combine_limit": "16", "io_max_combine_limit": "32", "transaction_buffers": "64"}
    four = bytes_policy(given, 4).settings  # the 8 kB reference's pages, in a 4 kB build
    assert four["io_combine_limit"] == "128kB"
    assert four["io_max_combine_limit"] == "256kB"
    assert four["transaction_buffers"] == "512kB"
    eight = bytes_policy({"io_combine_limit": "32", "notify_buffers": "32"}, 8, ref_kb=4)
    assert eight.settings["io_combine_limit"] == "128kB"
    assert not [n for n in eight.notes if "io_combine_limit" in n]
    assert in_bytes("notify_buffers", eight.settings["notify_buffers"], 8) == 128 * KB


def test_bytes_gives_every_build_the_same_bytes() -> None:
    given = {
        "bgwriter_lru_maxpages": "200",
        "checkpoint_flush_after": "16",
        "effective_cache_size": "65536",
        "temp_buffers": "2048",
        "shared_buffers": "32768",  # pages of the 8 kB reference = 256 MB
        "wal_writer_flush_after": "64",  # WAL blocks of the reference = 512 kB
        "io_combine_limit": "8",
        "serializable_buffers": "64",
        "work_mem": "64MB",
        "random_page_cost": "1.1",
    }
    results = {kb: bytes_policy(given, kb).settings for kb in (4, 8)}
    for name in CAT[8].page_settings():
        volumes = {kb: effective_bytes(name, results[kb], kb) for kb in (4, 8)}
        assert volumes[4] == volumes[8], (name, volumes)
    assert in_bytes("shared_buffers", results[8]["shared_buffers"], 8) == 256 * 1024 * KB
    assert results[4]["bgwriter_lru_maxpages"] == "400"
    assert results[4]["effective_cache_size"] == "524288kB"
    for kb in (4, 8):  # settings that are not page counts are untouched
        assert results[kb]["work_mem"] == "64MB"
        assert results[kb]["random_page_cost"] == "1.1"


def test_bytes_materialises_defaults_that_differ_in_bytes() -> None:
    out = bytes_policy({}, 4).settings
    assert out["bgwriter_lru_maxpages"] == "200"  # 100 x 8 kB = 800 kB = 200 x 4 kB
    assert out["checkpoint_flush_after"] == "256kB"
    assert out["bgwriter_flush_after"] == "512kB"
    assert out["effective_cache_size"] == "4194304kB"
    assert out["temp_buffers"] == "8192kB"
    assert out["notify_buffers"] == "128kB"  # 16 SLRU pages
    assert out["max_notify_queue_pages"] == "2097152"  # unitless: a count of pages
    # defaults that are already the same bytes, or auto-tuned (0), or off, are not written
    for name in (
        "shared_buffers",  # initdb writes 128MB at any page size
        "wal_writer_flush_after",
        "min_parallel_table_scan_size",
        "io_combine_limit",  # 128 kB / BLCKSZ
        "transaction_buffers",  # 0 = a share of shared_buffers
        "backend_flush_after",  # 0 = off
    ):
        assert name not in out, name
    assert bytes_policy({}, 8).settings == {"wal_buffers": "4096kB"}  # the reference itself


def test_values_with_units_are_left_alone() -> None:
    out = bytes_policy({"effective_cache_size": "2GB", "temp_buffers": "16MB"}, 4).settings
    assert out["effective_cache_size"] == "2GB" and out["temp_buffers"] == "16MB"


def test_values_beyond_the_builds_limits_are_clamped_with_a_note() -> None:
    conv = bytes_policy({"io_combine_limit": "128"}, 4)  # 1 MB; at most 128 x 4 kB here
    assert conv.settings["io_combine_limit"] == "512kB"
    assert any("io_combine_limit" in n and "clamped to 512kB" in n for n in conv.notes)
    conv = bytes_policy({"checkpoint_flush_after": "2MB"}, 4)  # at most 256 pages = 1 MB
    assert conv.settings["checkpoint_flush_after"] == "1024kB"
    conv = bytes_policy({}, 8, ref_kb=4)  # 16 x 4 kB SLRU pages: below the minimum of 16
    assert conv.settings["notify_buffers"] == "128kB"
    assert any("notify_buffers" in n and "minimum" in n for n in conv.notes)


def test_a_count_that_is_not_whole_pages_is_rounded_with_a_note() -> None:
    conv = bytes_policy({"bgwriter_lru_maxpages": "101"}, 8, ref_kb=4)  # 404 kB
    assert conv.settings["bgwriter_lru_maxpages"] in ("50", "51")
    assert any("bgwriter_lru_maxpages" in n and "whole number" in n for n in conv.notes)


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
    for kb in (4, 8):
        assert bytes_policy({}, kb).settings["wal_buffers"] == "4096kB"
    assert bytes_policy({"shared_buffers": "1GB"}, 4).settings["wal_buffers"] == "16384kB"
    # a 4 kB reference auto-tunes 128 MB / 4 kB / 32 = 1024 x 4 kB = 4 MB
    assert bytes_policy({}, 8, ref_kb=4).settings["wal_buffers"] == "4096kB"
    # explicit values: plain numbers are reference WAL blocks, units are bytes
    assert bytes_policy({"wal_buffers": "256"}, 4).settings["wal_buffers"] == "2048kB"
    assert bytes_policy({"wal_buffers": "16MB"}, 4).settings["wal_buffers"] == "16MB"


def test_unknown_policy_is_rejected_and_bytes_needs_catalogues() -> None:
    with pytest.raises(ValueError, match="native, bytes"):
        sp.convert({}, "pages")
    with pytest.raises(ValueError, match="catalogues"):
        sp.convert({}, "bytes", catalogue=CAT[4])


def sixteen_kb_catalogue() -> sp.Catalogue:
    """The 8 kB catalogue as a 16 kB build would show it: its page and WAL block units."""
    gucs = {
        n: dataclasses.replace(g, unit="16kB") if g.unit == "8kB" else g
        for n, g in CAT[8].gucs.items()
    }
    return dataclasses.replace(
        CAT[8], block_size_bytes=16 * KB, wal_block_size_bytes=16 * KB, gucs=gucs
    )


def test_slru_buffers_are_rounded_to_a_multiple_of_16_with_the_bytes_said() -> None:
    conv = sp.convert(
        {"transaction_buffers": "48"}, "bytes", catalogue=sixteen_kb_catalogue(), reference=CAT[8]
    )
    assert conv.settings["transaction_buffers"] == "512kB"  # 32 x 16 kB, not 24
    (note,) = [n for n in conv.notes if n.startswith("transaction_buffers")]
    assert "-> 32 at 16 kB" in note
    assert "24 rounded up to a multiple of 16 (PostgreSQL requires it)" in note
    assert "512 kB instead of 384 kB" in note


@pytest.mark.parametrize("build_kb,ref_kb", [(4, 8), (8, 4), (16, 8), (16, 4)])
def test_every_converted_value_is_one_postgresql_accepts(build_kb: int, ref_kb: int) -> None:
    own = sixteen_kb_catalogue() if build_kb == 16 else CAT[build_kb]
    for value in ("0", "1", "8", "17", "24", "40", "48", "100", "1000", "300000", "64MB"):
        given = dict.fromkeys((*SLRU, "io_combine_limit", "bgwriter_lru_maxpages"), value)
        given["wal_buffers"] = value
        conv = sp.convert(given, "bytes", catalogue=own, reference=CAT[ref_kb])
        for name, written in conv.settings.items():
            guc = own.gucs[name]
            unit = own.wal_block_size_bytes if name == "wal_buffers" else own.page_settings()[name]
            nbytes = sp.value_bytes(written, unit if not guc.unit else 1)  # unitless: a count
            assert nbytes is not None and nbytes % unit == 0, (name, value, written)
            units = nbytes // unit
            low, high = guc.limits()
            if name == "wal_buffers":
                low = 4
            assert low is not None and high is not None
            assert low <= units <= high, (name, value, written)
            if name in SLRU:
                assert units % 16 == 0, (name, value, written)


def test_wal_buffers_is_whole_wal_blocks_of_the_build_and_at_least_4() -> None:
    own = sixteen_kb_catalogue()
    conv = sp.convert({"wal_buffers": "3"}, "bytes", catalogue=own, reference=CAT[8])
    assert conv.settings["wal_buffers"] == "64kB"  # 24 kB: 2 blocks of 16 kB, raised to 4
    (note,) = [n for n in conv.notes if n.startswith("wal_buffers")]
    assert "wal_buffers 3" in note and "minimum" in note
    assert "64 kB instead of 24 kB (not equal in bytes)" in note
    conv = sp.convert({"wal_buffers": "40kB"}, "bytes", catalogue=own, reference=CAT[8])
    assert conv.settings["wal_buffers"] == "64kB"
    assert any(n.startswith("wal_buffers 40kB") and "whole number" in n for n in conv.notes)
    same = sp.convert({"wal_buffers": "256"}, "bytes", catalogue=own, reference=CAT[8])
    assert same.settings["wal_buffers"] == "2048kB"
    assert not [n for n in same.notes if n.startswith("wal_buffers")]


# --- against real builds: their catalogues and what pg_settings reports ---------------------

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
def test_a_real_4k_builds_catalogue_counts_io_combine_limit_and_slru_in_pages(
    paths, pg18_4k
) -> None:  # type: ignore[no-untyped-def]
    cat = settings_catalogue.load(pg18_4k, paths)
    assert (pg18_4k.prefix / settings_catalogue.CATALOGUE_NAME).is_file()  # kept beside it
    for name in PG18_NEW:
        assert cat.gucs[name].unit == "4kB", name
        assert cat.page_settings()[name] == 4 * KB, name
    assert cat.gucs["io_combine_limit"].max_val == "128"


@pytest.mark.build
def test_verification_keeps_the_catalogue_beside_the_build(paths, pg18_8k, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from blocklab.model import BuildRequest
    from blocklab.postgres import build

    prefix = Path("/var/tmp/blocklab-tests") / f"verify-{os.getpid()}-{tmp_path.name}"
    prefix.mkdir(parents=True)
    try:  # the real binaries, verified into a prefix of its own (the cache is shared)
        (prefix / "bin").symlink_to(pg18_8k.prefix / "bin")
        inst = dataclasses.replace(pg18_8k, prefix=prefix)
        build.verify(inst, BuildRequest(pg="18"), paths)
        cat = settings_catalogue.stored(inst)
        assert cat is not None and cat.page_settings()["io_combine_limit"] == 8 * KB
        assert cat.gucs["shared_buffers"].source == "configuration file"  # initdb's 128MB
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


@pytest.mark.build
def test_a_4k_reference_converted_to_8k_halves_page_counts_in_pg_settings(
    paths, pg18_4k, pg18_8k
) -> None:  # type: ignore[no-untyped-def]
    ref = settings_catalogue.load(pg18_4k, paths)
    own = settings_catalogue.load(pg18_8k, paths)
    given = {"io_combine_limit": "32", "transaction_buffers": "64", "temp_buffers": "2048"}
    conf = sp.convert(given, "bytes", catalogue=own, reference=ref).settings
    at_ref = _readback(paths, pg18_4k, given)
    at_8k = _readback(paths, pg18_8k, conf)
    for name in (*given, "bgwriter_lru_maxpages", "checkpoint_flush_after"):
        assert int(at_8k[name]["setting"]) * 2 == int(at_ref[name]["setting"]), name
    assert (
        at_8k["io_combine_limit"]["setting"] == "16" and at_8k["io_combine_limit"]["unit"] == "8kB"
    )


@pytest.mark.build
def test_bytes_policy_gives_equal_bytes_in_pg_settings(paths, pg18_4k, pg18_8k, pg18_wal4k) -> None:  # type: ignore[no-untyped-def]
    """4 kB pages and (another build) 4 kB WAL blocks against the 8/8 reference."""
    given = {"bgwriter_lru_maxpages": "100", "temp_buffers": "2048", "shared_buffers": "128MB"}
    given |= {"io_combine_limit": "16", "notify_buffers": "32"}
    builds = (pg18_4k, pg18_8k, pg18_wal4k)
    cats = {i.key: settings_catalogue.load(i, paths) for i in builds}
    ref = cats[pg18_8k.key]
    names = [*(n for n in ref.page_settings() if n != "max_notify_queue_pages")]
    seen: dict[str, list[dict[str, int]]] = {"bytes": [], "native": []}
    for policy in ("bytes", "native"):
        for inst in builds:
            conf = sp.convert(given, policy, catalogue=cats[inst.key], reference=ref).settings
            rows = _readback(paths, inst, conf)
            seen[policy].append(
                {n: _volume(n, rows[n], inst.block_size_bytes) for n in [*names, "wal_buffers"]}
            )
    four, eight, wal4 = seen["bytes"]
    assert four == eight, {n: (four[n], eight[n]) for n in four if four[n] != eight[n]}
    assert wal4 == eight, {n: (wal4[n], eight[n]) for n in wal4 if wal4[n] != eight[n]}
    assert eight["wal_buffers"] == 4 * 1024 * KB and eight["bgwriter_lru_maxpages"] == 800 * KB
    assert four["io_combine_limit"] == 128 * KB
    n4, n8, _ = seen["native"]  # the contrast: same numbers, different bytes
    assert n4["bgwriter_lru_maxpages"] * 2 == n8["bgwriter_lru_maxpages"]
    assert n4["checkpoint_flush_after"] * 2 == n8["checkpoint_flush_after"]
    assert n4["io_combine_limit"] * 2 == n8["io_combine_limit"]


@pytest.mark.build
def test_every_converted_slru_configuration_starts(paths, pg18_4k, pg18_8k) -> None:  # type: ignore[no-untyped-def]
    """The values the bytes policy writes are values the server accepts: 48 SLRU pages of
    4 kB are 24 of 8 kB, which PostgreSQL refuses; the policy writes 32 and the server
    starts, in both directions, with explicit wal_buffers that are not whole WAL blocks."""
    given = dict.fromkeys(SLRU, "48") | {"wal_buffers": "3", "io_combine_limit": "40"}
    cats = {i.block_size_bytes: settings_catalogue.load(i, paths) for i in (pg18_4k, pg18_8k)}
    for inst, ref in ((pg18_8k, 4096), (pg18_4k, 8192)):
        own = cats[inst.block_size_bytes]
        conf = sp.convert(given, "bytes", catalogue=own, reference=cats[ref]).settings
        rows = _readback(paths, inst, conf)  # raises if the server does not start
        for name in SLRU:
            assert int(rows[name]["setting"]) % 16 == 0, (inst.key, name, rows[name])
        assert int(rows["wal_buffers"]["setting"]) >= 4

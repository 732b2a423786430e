"""The room a restored dump takes, at plan time (issue 32): read from what pg_restore
prints of the shipped example's dump (tests/data/own_database: `pg_restore --list`, the
post-data section and an excerpt of the data section, recorded from the archive
examples/own-database/make_dump.py made with PG 18.6), and checked against that dump's
real restore; a measured restore preferred to the estimate; the size-only guess when no
pg_restore can read the dump."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blocklab.model import DatasetRequest
from blocklab.paths import Paths
from blocklab.workloads import dump, dump_room, dump_size

DATA = Path(__file__).parents[1] / "data" / "own_database"
# the example's whole data section, read with dump_size.read_data from
# `pg_restore --data-only -f - app.dump` (PG 18.6); the excerpt below has its first rows
EXAMPLE_TABLES = {
    "public.customers": dump_size.TableData(10_000, 327_788),
    "public.order_lines": dump_size.TableData(300_000, 4_300_635),
    "public.orders": dump_size.TableData(100_000, 4_027_835),
    "public.products": dump_size.TableData(2_000, 69_111),
}
# tables and indexes (main fork, free space and visibility maps) after pg_restore and
# VACUUM (FREEZE, ANALYZE) of that dump into PG 18.6 builds, summed over
# pg_total_relation_size of the 4 tables (the RELATIONS_SQL figure of a snapshot)
MEASURED_BYTES = {4096: 43_139_072, 8192: 42_975_232}
ARCHIVE_BYTES = 2_195_849  # the example's app.dump


def _example() -> dump_size.Contents:
    return dump_size.Contents(
        dump_size.count_entries((DATA / "app_dump.list").read_text()),
        EXAMPLE_TABLES,
        dump_size.read_indexes((DATA / "app_dump_post_data.sql").read_text()),
    )


def test_a_listing_counts_entries_by_kind() -> None:
    entries = dump_size.count_entries((DATA / "app_dump.list").read_text())
    assert entries == {"TABLE": 4, "TABLE DATA": 4, "CONSTRAINT": 4, "INDEX": 4,
                       "FK CONSTRAINT": 3}  # fmt: skip


def test_the_post_data_section_gives_each_index_and_key_its_table() -> None:
    found = dump_size.read_indexes((DATA / "app_dump_post_data.sql").read_text())
    assert sorted(found) == [
        ("customers_country", "public.customers"),
        ("customers_pkey", "public.customers"),
        ("order_lines_pkey", "public.order_lines"),
        ("order_lines_product", "public.order_lines"),
        ("orders_customer_placed", "public.orders"),
        ("orders_pkey", "public.orders"),
        ("orders_placed", "public.orders"),
        ("products_pkey", "public.products"),
    ]  # the three foreign keys make no index


def test_the_data_section_gives_rows_and_text_bytes_per_table() -> None:
    with open(DATA / "app_dump_data_excerpt.txt", "rb") as f:
        tables = dump_size.read_data(f)
    assert set(tables) == set(EXAMPLE_TABLES)
    assert all(t.rows == 3 for t in tables.values())
    # "1\tcustomer 1\tfr\t2016-09-11\n" and the next two, counted by hand
    assert tables["public.customers"].text_bytes == 27 + 27 + 27
    assert tables["public.order_lines"].text_bytes == len("1\t1\t49\t3\n") * 3 + 1


def test_the_example_estimate_covers_its_real_restore_without_overstating_it() -> None:
    for block_size, measured in MEASURED_BYTES.items():
        nbytes, basis = dump_size.estimate(_example(), 100, None, block_size)
        assert 1.0 <= nbytes / measured <= 1.25, (block_size, nbytes / measured)
        assert basis.startswith("estimated from the dump: 4 tables, 412,000 rows, 8.3 MB")
    # the archive's size times 5, what the plan assumed before, was a quarter of it
    assert ARCHIVE_BYTES * 5 / MEASURED_BYTES[8192] < 0.3
    # half-full heap pages take about twice the heap's room; indexes keep theirs
    full, _ = dump_size.estimate(_example(), 100, None, 8192)
    half, _ = dump_size.estimate(_example(), 50, None, 8192)
    row = dump_size.ROW_OVERHEAD_BYTES
    heap = sum(t.text_bytes + t.rows * row for t in EXAMPLE_TABLES.values())
    assert half - full == pytest.approx(heap, rel=0.01)


def test_an_index_on_a_table_without_data_counts_the_largest_table() -> None:
    contents = dump_size.Contents({}, EXAMPLE_TABLES, (("mv_idx", "public.some_view"),))
    nbytes, _ = dump_size.estimate(contents, 100, 100, 8192)
    heap, _ = dump_size.estimate(dump_size.Contents({}, EXAMPLE_TABLES, ()), 100, 100, 8192)
    assert nbytes - heap == 300_000 * dump_size.INDEX_ENTRY_BYTES + 2 * 8192


def _dataset(dump_file: Path) -> DatasetRequest:
    options = {"dump": str(dump_file), "dump_sha256": "ab" * 32}
    return DatasetRequest(driver="queries", options=tuple(options.items()))


def test_a_measured_restore_is_the_basis_once_there_is_one(tmp_path: Path) -> None:
    paths = Paths(home=tmp_path, cache=tmp_path / "cache", results=tmp_path / "results")
    archive = tmp_path / "app.dump"
    archive.write_bytes(b"PGDMP" + bytes(1000))
    ds = _dataset(archive)
    for name, nbytes, complete in (("a", 40_000_000, True), ("b", 41_000_000, True),
                                   ("c", 90_000_000, False)):  # fmt: skip
        snap = paths.work / "datasets" / name
        snap.mkdir(parents=True)
        relations = [{"name": "t", "kind": "table", "bytes": nbytes - 1000},
                     {"name": "t_pkey", "kind": "index", "bytes": 1000}]  # fmt: skip
        meta = {"driver": "queries", "options": dict(ds.options), "fillfactor": 100,
                "index_fillfactor": None, "relations": relations}  # fmt: skip
        (snap / "meta.json").write_text(json.dumps(meta))
        if complete:
            (snap / "COMPLETE").write_text("x\n")
    nbytes, basis = dump_room.room(ds, 8192, paths)
    assert nbytes == 41_000_000  # the largest complete one; an incomplete one is garbage
    assert basis.startswith("measured when the dataset was restored (2 restore(s)")
    other = ds.model_copy(update={"fillfactor": 90})  # another dataset: not measured yet
    assert dump_room.room(other, 8192, paths)[1].startswith("guessed from the dump's size")


def test_without_a_cached_build_the_room_is_guessed_from_the_archive_size(tmp_path: Path) -> None:
    paths = Paths(home=tmp_path, cache=tmp_path / "cache", results=tmp_path / "results")
    archive = tmp_path / "app.dump"
    archive.write_bytes(b"PGDMP" + bytes(995))
    nbytes, basis = dump_room.room(_dataset(archive), 8192, paths)
    assert nbytes == 1000 * dump_size.RESTORED_PER_ARCHIVE_BYTE
    assert "guessed from the dump's size alone: 0.0 MB x 20" in basis


def test_an_archive_the_cached_pg_restore_cannot_read_is_guessed_and_says_why(  # type: ignore[no-untyped-def]
    paths: Paths, pg18_8k, tmp_path: Path
) -> None:
    """A real build's pg_restore on a stand-in archive (pg_dump's magic, then zeros): the
    plan still has a figure, and its basis names pg_restore's refusal."""
    archive = tmp_path / "app.dump"
    archive.write_bytes(b"PGDMP" + bytes(995))
    sha = dump.inspect(archive, "matrix.dataset.dump")[1]  # as the plan takes it
    ds = DatasetRequest(driver="queries", options=(("dump", str(archive)), ("dump_sha256", sha)))
    mine = Paths(home=tmp_path / "home", cache=paths.cache, results=tmp_path / "results")
    nbytes, basis = dump_room.room(ds, 8192, mine)
    assert nbytes == 1000 * dump_size.RESTORED_PER_ARCHIVE_BYTE
    assert "guessed from the dump's size alone" in basis
    assert "; pg_restore 18" in basis and "cannot read it: " in basis, basis
    assert not (mine.work / "datasets" / f"dump-{sha[:16]}.json").exists()  # nothing kept

"""Experiment files: expansion into variants, labels, references, excludes, paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import recorded_catalogue

from blocklab import experiment_file as spec
from blocklab.errors import UserError

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))


def load_example(path: Path, tmp_path: Path) -> spec.Experiment:
    """An example as a user loads it. own-database-pagesize's dump is made by its script
    (examples/own-database/make_dump.py, a server), not kept in git: where it is missing,
    the file is loaded from a copy beside a stand-in archive (pg_dump's magic bytes; the
    parse reads no more)."""
    dump = path.parent / "own-database" / "app.dump"
    if path.stem != "own-database-pagesize" or dump.exists():
        return spec.load(path)
    staged = tmp_path / "examples"
    (staged / "own-database").mkdir(parents=True, exist_ok=True)
    (staged / path.name).write_text(path.read_text())
    for name in ("queries.sql", "customer_ids.csv"):  # the queries and their params
        text = (path.parent / "own-database" / name).read_text()
        (staged / "own-database" / name).write_text(text)
    (staged / "own-database" / "app.dump").write_bytes(b"PGDMP" + bytes(507))
    return spec.load(staged / path.name)


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_there_is_one_example_per_seed_design() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"page-size", "wal-block-clients", "fillfactor", "fs-block-size"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_load_and_validate(path: Path, tmp_path: Path) -> None:
    exp = load_example(path, tmp_path)
    variants = exp.variants()
    assert len(variants) >= 2
    labels = [v.label for v in variants]
    assert len(set(labels)) == len(labels) and all(labels)
    assert len({v.variant_id for v in variants}) == len(variants)
    assert exp.reference_id() in {v.variant_id for v in variants}
    for v in variants:
        assert exp.reference_for(v) in {r for r in exp.reference_ids()}
        assert v.workload.duration_s <= 60 and v.dataset.scale <= 20  # small and short
    json.dumps(exp.to_json())


def test_page_size_example_matches_seed_000() -> None:
    exp = spec.load(next(p for p in EXAMPLES if p.stem == "page-size"))
    vs = exp.variants()
    assert [v.build.block_size_kb for v in vs] == [2, 4, 8]
    assert all(v.workload.builtin == "simple-update" for v in vs)
    assert all(v.workload.query_mode == "prepared" for v in vs)
    assert exp.variant(exp.reference_id()).label == "bs=8k"
    assert [exp.dims(v) for v in vs] == [{"block_size_kb": b} for b in (2, 4, 8)]


def test_grouped_reference_per_client_count() -> None:
    exp = spec.load(next(p for p in EXAMPLES if p.stem == "wal-block-clients"))
    for v in exp.variants():
        ref = exp.variant(exp.reference_for(v))
        assert ref.build.wal_block_size_kb == 8
        assert ref.workload.clients == v.workload.clients
    assert len(exp.reference_ids()) == 4
    script = exp.variants()[0].workload.scripts[0]
    assert Path(script).is_absolute() and Path(script).exists()  # resolved next to the file


def test_fs_example_crosses_db_block_fs_block_and_fs() -> None:
    exp = spec.load(next(p for p in EXAMPLES if p.stem == "fs-block-size"))
    cells = {(v.build.block_size_kb, v.storage.kind, v.storage.block_size) for v in exp.variants()}
    assert len(cells) == 8
    dims = exp.dims(exp.variants()[0])
    assert {"block_size_kb", "fs", "fs_block_size", "storage"} <= set(dims)
    assert exp.variant(exp.reference_id()).label == "bs=8k ext4-4k-noatime"


def test_labels_name_only_the_dimensions_that_vary(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        """
[experiment]
name = "m"
reference = { block_size = 8, clients = 1, "settings.shared_buffers" = "128MB" }
[matrix]
block_size = [4, 8]
wal_block_size = 8
clients = [1, 4]
fillfactor = 90
[matrix.settings]
shared_buffers = ["128MB", "1GB"]
work_mem = "4MB"
""",
    )
    exp = spec.load(f)
    labels = [v.label for v in exp.variants()]
    assert "bs=4k c=1 shared_buffers=128MB" in labels and len(labels) == 8
    v = exp.variants()[0]
    assert exp.dims(v) == {"block_size_kb": 4, "clients": 1, "settings.shared_buffers": "128MB"}
    assert dict(v.settings) == {"shared_buffers": "128MB", "work_mem": "4MB"}
    assert v.dataset.fillfactor == 90
    assert exp.variant(exp.reference_id()).label == "bs=8k c=1 shared_buffers=128MB"


def test_exclude_rules_drop_combinations(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        """
[experiment]
name = "ex"
reference = { block_size = 8, clients = 1 }
[matrix]
block_size = [2, 4, 8]
clients = [1, 5, 10]
[[exclude]]
block_size = 2
clients = [5, 10]
[[exclude]]
block_size_kb = 4
clients = 10
""",
    )
    labels = [v.label for v in spec.load(f).variants()]
    assert labels == ["bs=2k c=1", "bs=4k c=1", "bs=4k c=5", "bs=8k c=1", "bs=8k c=5", "bs=8k c=10"]


def test_reference_by_label_and_single_variant(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        '[experiment]\nname = "l"\nreference = "bs=4k"\n[matrix]\nblock_size = [4, 8]\n',
    )
    exp = spec.load(f)
    assert exp.variant(exp.reference_id()).label == "bs=4k"
    one = spec.load(write(tmp_path, '[experiment]\nname = "one"\n', "one.toml"))
    assert len(one.variants()) == 1 and one.reference_id() == one.variants()[0].variant_id
    assert one.variants()[0].label == "bs=8k wal=8k"


def test_storage_table_maps_onto_storage_request(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        """
[experiment]
name = "st"
reference = { fs_block_size = "4k" }
[matrix]
scale = 1
settings = { max_wal_size = "128MB" }  # the WAL storage holds 376 MB with headroom
[matrix.storage]
kind = "xfs"
block_size = [1024, "4k"]
size_mb = 512
mount_options = ["noatime"]
memory_limit = "1GiB"
wal = { kind = "ext4", block_size = 4096, size_mb = 400 }
""",
    )
    exp = spec.load(f)
    s = [v.storage for v in exp.variants()]
    assert [x.block_size for x in s] == [1024, 4096]
    assert s[0].memory_limit_bytes == 1024**3 and s[0].mount_options == ("noatime",)
    assert s[0].wal is not None and s[0].wal.kind == "ext4" and s[0].wal.block_size == 4096
    assert exp.variants()[1].label.startswith("xfs-4k-noatime+wal-ext4-4k+mem1G")


def test_postgres_workload_and_time_forms(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text("SELECT 1;\n")
    (tmp_path / "fix.patch").write_text("")
    f = write(
        tmp_path,
        """
[experiment]
name = "pw"
reference = { workload = "select-only" }
[matrix]
postgres = { version = 18, patches = ["fix.patch"] }
workload = ["select-only", { scripts = ["a.sql@3"], query_mode = "simple" }]
duration = "2min"
warmup = "5s"
threads = 8
clients = 2
""",
    )
    exp = spec.load(f)
    a, b = exp.variants()
    assert a.build.pg == "18" and a.build.patches == (str(tmp_path / "fix.patch"),)
    assert b.workload.scripts == (str(tmp_path / "a.sql") + "@3",)
    assert b.workload.builtin is None and b.workload.query_mode == "simple"
    assert a.workload.duration_s == 120 and a.workload.warmup_s == 5
    assert a.workload.threads == 2  # capped at clients
    assert b.label == "a@3 M=simple"


def test_seed_default_is_derived_from_the_name_and_json_is_stable(tmp_path: Path) -> None:
    text = (
        '[experiment]\nname = "s"\nreference = { block_size = 8 }\n[matrix]\nblock_size = [4, 8]\n'
    )
    a = spec.load(write(tmp_path, text, "a.toml"))
    b = spec.load(write(tmp_path, text, "b.toml"))
    assert a.seed == b.seed == spec.default_seed("s")
    assert a.to_json() == b.to_json()
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)
    c = spec.load(write(tmp_path, text.replace("[4, 8]", "[2, 8]"), "c.toml"))
    assert c.to_json()["variants"] != a.to_json()["variants"]


def test_bytes_policy_effective_settings_follow_the_reference(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        '[experiment]\nname = "b"\nreference = { block_size = 8 }\nsettings_policy = "bytes"\n'
        "[matrix]\nblock_size = [4, 8]\nwal_block_size = [4, 8]\n[matrix.settings]\n"
        "bgwriter_lru_maxpages = 50\nio_combine_limit = 8\n"
        "[[exclude]]\nblock_size = 4\nwal_block_size = 8\n"
        "[[exclude]]\nblock_size = 8\nwal_block_size = 4\n",
    )
    exp = spec.load(f)
    four, eight = exp.variants()
    assert dict(four.settings) == {"bgwriter_lru_maxpages": "50", "io_combine_limit": "8"}
    assert four.settings_policy == "bytes"
    recorded = {4: recorded_catalogue(4), 8: recorded_catalogue(8)}  # real PG 18 builds

    def catalogue_of(req):  # type: ignore[no-untyped-def]
        return recorded[req.block_size_kb]

    converted = exp.effective_settings(four, catalogue_of)
    assert converted is not None
    assert converted.settings["bgwriter_lru_maxpages"] == "100"
    assert converted.settings["io_combine_limit"] == "64kB"  # 8 pages of the 8 kB reference
    at_ref = exp.effective_settings(eight, catalogue_of)
    assert at_ref is not None and at_ref.settings["bgwriter_lru_maxpages"] == "50"
    # before the builds exist their catalogues are unknown, and so is the conversion
    assert exp.effective_settings(four, lambda _req: None) is None


def test_demo_is_small_and_compares_4k_with_8k() -> None:
    exp = spec.demo()
    assert [v.build.block_size_kb for v in exp.variants()] == [4, 8]
    assert all(v.build.wal_block_size_kb == 8 and v.build.pg == "18" for v in exp.variants())
    assert exp.variant(exp.reference_id()).build.block_size_kb == 8
    w = exp.variants()[0].workload
    assert (w.builtin, w.query_mode, w.clients) == ("simple-update", "prepared", 4)
    # the demo interleaves slices with aligned checkpoints: no whole cycles, so no --cycles
    rd = exp.run_design
    assert (rd.kind, rd.checkpoint, rd.slices, rd.slice_s) == ("interleaved", "aligned", 4, 5)
    assert exp.name == "demo-page-size-interleaved" and exp.rounds % 2 == 0
    short = spec.demo(rounds=2, scale=1, clients=2)
    assert short.rounds == 2
    assert short.variants()[0].dataset.scale == 1
    with pytest.raises(UserError, match="--cycles"):
        spec.demo(cycles=2)
    with pytest.raises(UserError, match="matrix.clients"):
        spec.demo(clients=0)


def test_size_and_time_parsers() -> None:
    assert spec.parse_size("4k", "x") == 4096 and spec.parse_size("1GiB", "x") == 1024**3
    assert spec.parse_size("512MB", "x") == 512 * 1024**2 and spec.parse_size(8192, "x") == 8192
    assert spec.parse_seconds("1h", "x", 1) == 3600 and spec.parse_seconds(7, "x", 1) == 7
    for bad in ("4 parsecs", "", True):
        with pytest.raises(UserError):
            spec.parse_size(bad, "x")


BAD_SPECS = sorted((Path(__file__).parents[1] / "bad_specs").glob("*.toml"))


def test_parsing_asks_nothing_of_the_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No subprocess and no root while a file is parsed: loop-device storages, a real
    device and the machine's room are checked by `plan` and `run` (spec.check_machine)."""
    import subprocess

    from blocklab import proc

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"parsing started a process: {args}")

    for target, name in ((proc, "run"), (proc, "spawn"), (subprocess, "Popen")):
        monkeypatch.setattr(target, name, refuse)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    kinds = {v.storage.kind for p in EXAMPLES for v in load_example(p, tmp_path).variants()}
    assert {"ext4", "xfs"} <= kinds  # every example loads, root-only kinds too
    for path in BAD_SPECS:
        with pytest.raises(UserError):
            spec.load(path)
    spec.demo()


def test_fleet_hosts_assign_variants_with_their_references(tmp_path: Path) -> None:
    body = (
        '[experiment]\nname = "f"\nreference = { block_size = 8 }\n'
        "[matrix]\nblock_size = [4, 8, 16]\nclients = [1, 2]\n"
    )
    plain = spec.load(write(tmp_path, body, "plain.toml"))
    exp = spec.load(
        write(tmp_path, body + "[fleet.hosts]\nsmall = { block_size = 4, clients = 1 }\n"
              "big = { block_size = [16] }\n")
    )  # fmt: skip
    labels = lambda host: [v.label for v in exp.variants_on(host)]  # noqa: E731
    # a host's selection and the reference of each (a pair never spans hosts)
    assert labels("small") == ["bs=4k c=1", "bs=8k c=1"]
    assert labels("big") == ["bs=8k c=1", "bs=8k c=2", "bs=16k c=1", "bs=16k c=2"]
    assert len(labels("elsewhere")) == 6  # a host the table does not name runs them all
    assert exp.unplaced(["small", "big"]) == ["bs=4k c=2"]
    assert exp.unplaced(["small", "elsewhere"]) == []
    # the table is part of the experiment's identity only when present
    assert "fleet_hosts" not in plain.to_json() and set(exp.to_json()["fleet_hosts"]) == {
        "small",
        "big",
    }
    assert plain.variants_on("any") == plain.variants()

"""Device profiles: fio's JSON parser on recorded real output, the store's migration, bad
input, and fio on a real loop device at tiny sizes."""

from __future__ import annotations

import json
import os
import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from blocklab import proc
from blocklab.cli import main
from blocklab.economics import device_store, fio
from blocklab.economics.device_profile import parse_size
from blocklab.errors import UserError
from blocklab.paths import Paths
from blocklab.store import SCHEMA_VERSION, ResultsDB
from blocklab.store.sqlite import MIGRATIONS

DATA = Path(__file__).parents[1] / "data" / "fio"


def test_parse_recorded_randread() -> None:
    r = fio.parse((DATA / "randread-4k-qd1.json").read_text(), "randread")
    assert r.iops == pytest.approx(3096.951524)
    assert r.bw_bytes_per_s == 12685113
    assert r.lat_mean_us == pytest.approx(299.393681782)
    assert r.lat_p50_us == pytest.approx(61.696)
    assert r.lat_p99_us == pytest.approx(4685.824)
    assert r.lat_p999_us == pytest.approx(8716.288)
    assert r.runtime_s == pytest.approx(2.001)
    assert r.version == "fio-3.33"


def test_parse_takes_the_write_side_for_writes() -> None:
    text = (DATA / "randwrite-8k-qd32.json").read_text()
    r = fio.parse(text, "randwrite")
    side = json.loads(text)["jobs"][0]["write"]
    assert r.iops == pytest.approx(side["iops"]) and r.iops > 0
    assert r.bw_bytes_per_s == side["bw_bytes"]
    with pytest.raises(ValueError, match="no I/O"):
        fio.parse(text, "randread")  # the read side of a write job is empty


def test_parse_skips_warnings_and_rejects_garbage() -> None:
    text = "fio: some warning\n" + (DATA / "read-8k-qd32.json").read_text()
    assert fio.parse(text, "read").iops > 0
    with pytest.raises(ValueError, match="no JSON"):
        fio.parse("fio: engine libfoo not loadable\n", "read")
    bad = json.loads((DATA / "read-8k-qd32.json").read_text())
    bad["jobs"][0]["error"] = 5
    with pytest.raises(ValueError, match="job error 5"):
        fio.parse(json.dumps(bad), "read")


def test_command_is_direct_and_time_based() -> None:
    argv = fio.command(fio.Point("randread", 8192, 32), "/x/f", size_bytes=2**26, runtime_s=3)
    wanted = ["--direct=1", "--rw=randread", "--bs=8192", "--iodepth=32", "--time_based"]
    wanted += ["--runtime=3s", "--output-format=json", "--filename=/x/f", "--size=67108864"]
    assert set(wanted) <= set(argv)


def test_grid_and_lists() -> None:
    pts = fio.grid(["randread", "write"], [4, 8], [1, 32])
    assert len(pts) == 8 and pts[0] == fio.Point("randread", 4096, 1)
    assert fio.parse_list("4k, 8,4", "--sizes", fio.REQUEST_SIZES_KB) == [4, 8]
    with pytest.raises(UserError, match="--sizes: '3' is not allowed; use one or more of 1k, 2k"):
        fio.parse_list("3", "--sizes", fio.REQUEST_SIZES_KB, "k")
    with pytest.raises(UserError, match="--depths: '7'.* 1, 32"):
        fio.parse_list("7", "--depths", fio.DEPTHS)


def test_parse_size() -> None:
    assert parse_size("64M") == 64 * 2**20
    assert parse_size("1GiB") == 2**30
    with pytest.raises(UserError, match="--size"):
        parse_size("12k")


def test_a_version_1_database_is_upgraded(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "blocklab.sqlite")
    conn.executescript(resources.files("blocklab.store").joinpath("schema.sql").read_text())
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.commit()
    conn.close()
    with ResultsDB(tmp_path) as db:
        versions = [r[0] for r in db.conn.execute("SELECT version FROM schema_version")]
        assert versions == [1, *sorted(MIGRATIONS)] and SCHEMA_VERSION == max(MIGRATIONS)
        assert device_store.profiles(db) == []
    with ResultsDB(tmp_path) as db:  # opening again adds nothing
        count = db.conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        assert count == 1 + len(MIGRATIONS)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sizes", "3"], "--sizes: '3' is not allowed"),
        (["--depths", "64"], "--depths: '64' is not allowed"),
        (["--patterns", "randrw"], "--patterns: 'randrw'"),
        (["--runtime", "0"], "--runtime"),
        (["--device", "/dev/null"], "pass --yes"),
        (["--device", "/etc/hostname", "--yes"], "not a block device"),
        (["--path", "/nonexistent"], "--path: /nonexistent is not an existing directory"),
        (["--storage", "ext4"], "--storage: names a storage of --experiment"),
    ],
)
def test_bad_input_exits_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["device", "profile", "--results", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "blocklab.sqlite").exists()


def test_fio_missing_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["device", "profile", "--results", str(tmp_path)]) == 2
    assert "apt-get install -y fio" in capsys.readouterr().err


def test_unknown_profile_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ResultsDB(tmp_path).close()
    assert main(["device", "show", "nope", "--results", str(tmp_path)]) == 2
    assert "no device profile 'nope'" in capsys.readouterr().err


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mounts need root")
def test_profile_on_a_loop_device(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    res = paths.home / "fio-results"
    argv = [
        "device",
        "profile",
        "--name",
        "loop",
        "--results",
        str(res),
        "--runtime",
        "1",
        "--size",
        "16M",
        "--sizes",
        "4,8",
        "--depths",
        "1,32",
        "--patterns",
        "randread,randwrite",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[8/8] randwrite 8k qd32" in out and "ETA" in out
    with ResultsDB(res) as db:
        head = device_store.profile(db, "loop")
        pts = device_store.points(db, head["id"])
        target = json.loads(head["target_json"])
    assert head["state"] == "done" and target["kind"] == "ext4"
    assert target["facts"]["data"]["loop_direct_io"] is True
    assert len(pts) == 8
    for p in pts:
        assert p["status"] == "ok" and p["iops"] > 0 and p["bw_bytes_per_s"] > 0
        assert p["lat_p50_us"] > 0 and p["lat_p999_us"] >= p["lat_p99_us"] >= p["lat_p50_us"]
        raw = json.loads(p["fio_json"])
        assert raw["jobs"][0]["job options"]["bs"] == str(p["request_bytes"])
    assert str(paths.home) not in proc.run(["losetup", "-a"]).stdout
    assert main(argv) == 2  # the name is taken
    assert "exists" in capsys.readouterr().err
    assert (
        main(
            [
                "economics",
                "--profile",
                "loop",
                "--results",
                str(res),
                "--ram-price-per-gb",
                "3",
                "--device-price",
                "100",
            ]
        )
        == 0
    )
    assert "RAM-loop" in capsys.readouterr().out


def _store_recorded(results: Path) -> None:
    """A profile whose points replay the recorded real fio output."""
    with ResultsDB(results) as db:
        head = device_store.ProfileHead(
            "rec", "2026-01-01T00:00:00Z", {}, {}, "fio-3.33", "libaio", 2, 2**26
        )
        pid = device_store.create(db, head)
        for f in sorted(DATA.glob("*.json")):
            pattern, kb, qd = f.stem.split("-")
            point = fio.Point(pattern, int(kb.removesuffix("k")) * 1024, int(qd[2:]))
            text = f.read_text()
            result = fio.parse(text, pattern)
            device_store.record_point(
                db, pid, point, result=result, reason="", command=[], raw_json=text
            )
        device_store.record_point(
            db,
            pid,
            fio.Point("write", 4096, 1),
            result=None,
            reason="fio exit code 1",
            command=[],
            raw_json="",
        )


def test_report_has_a_device_page_linked_from_the_index(tmp_path: Path) -> None:
    from blocklab.report import build_site

    res = tmp_path / "results"
    _store_recorded(res)
    build_site(res, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    page = (tmp_path / "site" / "devices.html").read_text()
    assert 'href="devices.html"' in index
    assert "IOPS against request size" in page and "write 4k qd1: fio exit code 1" in page
    data = json.loads(page.split('id="page-data">')[1].split("</script>")[0])
    (prof,) = data["profiles"]
    assert {line["name"] for line in prof["lines"]} == {
        "randread qd1",
        "randwrite qd32",
        "read qd32",
    }
    (row,) = prof["economics"]  # random reads at 4 kB, queue depth 1, at the stated prices
    assert row["break_even_s"] == pytest.approx(256 / 3096.951524 * 100 / (3 / 1024))

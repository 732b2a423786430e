"""The Five-Minute Rule calculator against hand-computed cases, and `blocklab economics`."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.cli import main
from blocklab.economics import rule as economics
from blocklab.economics.inputs import parse_iops, parse_page_sizes, prices_from_toml
from blocklab.economics.rule import GIB, Device
from blocklab.errors import UserError


def test_pages_per_mb_counts_mib() -> None:
    assert economics.pages_per_mb(4096) == 256
    assert economics.pages_per_mb(8192) == 128
    assert economics.pages_per_mb(1024) == 1024


def test_break_even_by_hand_4k_flash() -> None:
    # 4 kB page: 256 pages/MB; 40,000 IOPS; 100 per drive; RAM 3 per GB = 3/1024 per MB.
    # (256 / 40000) s/page... = 0.0064; 100 / (3/1024) = 34,133.33; product = 218.453 s.
    t = economics.break_even_seconds(4096, 40_000, 100, 3 / 1024)
    assert t == pytest.approx(218.4533, rel=1e-5)


def test_break_even_gray_graefe_1997() -> None:
    # Gray & Graefe 1997: 8 KB pages (128 per MB), 64 accesses/s per disk, 2000 per disk,
    # 15 per MB of RAM: 128/64 x 2000/15 = 2 x 133.33 = 266.7 s, "about five minutes".
    assert economics.break_even_seconds(8192, 64, 2000, 15) == pytest.approx(266.667, rel=1e-5)


def test_break_even_graefe_2007_ram_disk() -> None:
    # Graefe 2007, RAM-disk: 4 KB pages (256/MB), 83 IOPS, 80 per disk, 0.047 per MB RAM:
    # 256/83 = 3.08434; 80/0.047 = 1702.128; product 5249.96 s (about 90 minutes).
    assert economics.break_even_seconds(4096, 83, 80, 0.047) == pytest.approx(5249.96, rel=1e-5)


def test_table_has_ram_and_device_device_tiers() -> None:
    flash = Device("flash", {4096: 40_000, 8192: 30_000}, 999, capacity_bytes=32 * GIB)
    disk = Device("disk", {4096: 83, 8192: 82}, 80, capacity_bytes=1024 * GIB)
    rows = economics.table(3, [disk, flash], [4096, 8192])
    tiers = [(r.tier, r.page_bytes) for r in rows]
    assert tiers == [
        ("RAM-disk", 4096),
        ("RAM-disk", 8192),
        ("RAM-flash", 4096),
        ("RAM-flash", 8192),
        ("flash-disk", 4096),  # the dearer per MB (flash) is the upper tier
        ("flash-disk", 8192),
    ]
    fd4 = rows[4]
    # flash per MB: 999 / 32768 = 0.0304871; 256/83 x 80/0.0304871 = 8093.6 s
    assert fd4.upper_price_per_mb == pytest.approx(999 / 32768)
    assert fd4.break_even_s == pytest.approx(256 / 83 * 80 / (999 / 32768))
    assert fd4.break_even_s == pytest.approx(8093.6, rel=1e-4)


def test_verdict_separates_the_readings() -> None:
    dev = Device("ssd", {4096: 40_000, 8192: 30_000}, 100)
    rows = economics.table(3, [dev], [4096, 8192])
    assert [round(r.break_even_s, 2) for r in rows] == [218.45, 145.64]
    (v,) = economics.verdicts(rows)
    assert v.shortest.page_bytes == 8192  # fewer pages per MB outweighs 25 % fewer IOPS
    assert v.most_iops.page_bytes == 4096
    assert v.smallest.page_bytes == 4096


def test_equal_iops_favours_the_larger_page() -> None:
    # A disk whose IOPS barely depend on the request size (seed 001: 400 at 4 and 8 kB).
    rows = economics.table(3, [Device("hdd", {4096: 400, 8192: 400}, 100)], [4096, 8192])
    assert rows[1].break_even_s == pytest.approx(rows[0].break_even_s / 2)
    assert economics.verdicts(rows)[0].shortest.page_bytes == 8192


def test_bad_numbers_are_user_errors() -> None:
    with pytest.raises(UserError, match="IOPS"):
        economics.break_even_seconds(4096, 0, 100, 1)
    with pytest.raises(UserError, match="--ram-price-per-gb"):
        economics.table(-1, [Device("d", {4096: 1}, 1)], [4096])


def test_parse_iops_and_sizes() -> None:
    assert parse_iops("4k=40000, 8kB=30000.5") == {4096: 40000.0, 8192: 30000.5}
    assert parse_page_sizes("8,4k") == [4096, 8192]
    for bad, what in (
        ("4k", "SIZE=IOPS"),
        ("3k=10", "one of 1k, 2k"),
        ("4k=x", "not a number"),
        ("4k=-5", "positive"),
        ("", "no SIZE=IOPS"),
    ):
        with pytest.raises(UserError, match=what):
            parse_iops(bad)


def test_price_file_keys_are_checked() -> None:
    assert prices_from_toml({"prices": {"ram_price_per_gb": 3, "device_price": 0}}, "f") == {
        "ram_price_per_gb": 3.0,
        "device_price": 0.0,
    }
    with pytest.raises(UserError, match="unknown key 'ram'; allowed: ram_price_per_gb"):
        prices_from_toml({"ram": 3}, "f")
    with pytest.raises(UserError, match="device_price: must be zero or more"):
        prices_from_toml({"device_price": -1}, "f")


def test_cli_prints_inputs_formula_and_answer(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["economics", "--iops", "4k=40000,8k=30000", "--ram-price-per-gb", "3"]
    assert main([*argv, "--device-price", "100"]) == 0
    out = capsys.readouterr().out
    assert "PagesPerMBofRAM / AccessesPerSecondPerDisk" in out
    assert "1 MiB / page size" in out
    assert "RAM: 3 per GB" in out
    # one number style (blocklab.units.fmt_number): 3 significant digits, separators
    assert "218 s (3.64 min)" in out and "146 s (2.43 min)" in out
    assert "IOPS 4k=40,000, 8k=30,000" in out
    assert "RAM-device1: favoured page size 8 kB" in out
    assert "How to read it" in out


def test_cli_prices_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prices.toml"
    f.write_text("[prices]\nram_price_per_gb = 3\ndevice_price = 100\n")
    assert main(["economics", "--iops", "4k=40000", "--prices", str(f)]) == 0
    assert "218 s (3.64 min)" in capsys.readouterr().out  # one number style


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--iops", "4k=1", "--device-price", "-5", "--ram-price-per-gb", "3"], "--device-price"),
        (["--iops", "4k", "--device-price", "5", "--ram-price-per-gb", "3"], "--iops"),
        (["--iops", "4k=1", "--device-price", "5"], "--ram-price-per-gb"),
        (["--device-price", "5", "--ram-price-per-gb", "3"], "--profile / --iops"),
        (["--iops", "4k=1", "--device-price", "5", "--ram-price-per-gb", "0"], "positive"),
        (
            [
                "--iops",
                "4k=1",
                "--iops2",
                "4k=1",
                "--device-price",
                "5",
                "--device2-price",
                "1",
                "--ram-price-per-gb",
                "3",
            ],
            "capacit",
        ),
        (
            [
                "--iops",
                "4k=1",
                "--device-price",
                "5",
                "--ram-price-per-gb",
                "3",
                "--page-sizes",
                "8",
            ],
            "--page-sizes",
        ),
    ],
)
def test_cli_bad_input_exits_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["economics", *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_unknown_profile_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from blocklab.store import ResultsDB

    ResultsDB(tmp_path).close()
    argv = ["economics", "--profile", "nope", "--device-price", "5", "--ram-price-per-gb", "3"]
    assert main([*argv, "--results", str(tmp_path)]) == 2
    assert "no device profile 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5249.96, "5,250 s (1.46 h)"),
        (406870.2, "406,870 s (4.71 days)"),
        (59.5, "59.5 s"),
        (300.0, "300 s (5 min)"),
    ],
)
def test_intervals_print_in_the_terminals_number_style(seconds: float, text: str) -> None:
    from blocklab.economics.report import format_interval

    assert format_interval(seconds) == text


def test_the_table_prints_every_number_in_one_style() -> None:
    from blocklab.economics.report import render

    graefe = Device("d", price=80, iops_by_size={4096: 83.0})  # 5,249.96 s, as above
    dear = Device("e", price=6200, iops_by_size={4096: 40_000.0})
    rows = economics.table(0.047 * 1024, [graefe, dear], [4096])
    out = render(rows, [graefe, dear], 0.047 * 1024, {"d": "--iops", "e": "--iops"})
    assert "5,250 s (1.46 h)" in out and "6,200 per drive" in out and "4k=40,000" in out
    assert "6200" not in out and "5250" not in out and "40000" not in out

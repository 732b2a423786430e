"""Pure parts of blocklab.storage: stat, mountinfo, blkid and cmdline parsing, options."""

from __future__ import annotations

import pytest

from blocklab.errors import UserError
from blocklab.storage.cgroup import own_v1_path
from blocklab.storage.cleanup import cmdline_runs_on, parse_cmdline
from blocklab.storage.devices import DeviceStat, parse_mountinfo, parse_stat
from blocklab.storage.kinds import (
    FsSpec,
    check_mkfs_options,
    check_mount_options,
    image_size_bytes,
    mkfs_argv,
)
from blocklab.storage.safety import parse_blkid_export

# A /sys/block/loop0/stat line as kernel 6.18 writes it (17 fields; padding removed).
STAT = "120 3 9000 40 300 10 65536 200 0 180 260 2 0 16 1 7 5\n"


def test_parse_stat_converts_sectors_to_bytes() -> None:
    s = parse_stat("loop0", STAT)
    assert (s.read_ios, s.read_bytes) == (120, 9000 * 512)
    assert (s.write_ios, s.write_bytes) == (300, 65536 * 512)
    assert s.busy_ms == 180
    assert s.discard_bytes == 16 * 512
    assert s.flush_ios == 7


def test_parse_stat_old_kernel_has_11_fields() -> None:
    s = parse_stat("sda", "1 0 8 0 2 0 16 0 0 3 3")
    assert (s.read_bytes, s.write_bytes, s.busy_ms, s.flush_ios) == (4096, 8192, 3, 0)
    with pytest.raises(ValueError):
        parse_stat("sda", "1 2 3")


def test_delta_is_later_minus_earlier() -> None:
    a = DeviceStat("loop1", 100, 1000, 1, 2, 5, taken_at_s=10.0)
    b = DeviceStat("loop1", 612, 9192, 3, 7, 9, taken_at_s=12.5)
    d = b.delta(a)
    assert (d.read_bytes, d.write_bytes, d.read_ios, d.write_ios, d.busy_ms) == (512, 8192, 2, 5, 4)
    assert d.taken_at_s == 2.5
    assert d.as_metrics()["device_write_bytes"] == 8192
    with pytest.raises(ValueError):
        b.delta(DeviceStat("loop2", 0, 0, 0, 0, 0))


def test_parse_mountinfo_decodes_spaces() -> None:
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
        "90 27 7:3 / /var/tmp/a\\040b rw,noatime - xfs /dev/loop3 rw,logbsize=32k\n"
    )
    ms = parse_mountinfo(text)
    assert [m.mount_point for m in ms] == ["/", "/var/tmp/a b"]
    assert ms[1].devnum == "7:3" and ms[1].fstype == "xfs" and ms[1].source == "/dev/loop3"
    assert "noatime" in ms[1].options.split(",") and "logbsize=32k" in ms[1].options


def test_blkid_signature() -> None:
    ours = parse_blkid_export("DEVNAME=/dev/loop3\nLABEL=blocklab\nTYPE=ext4\nUSAGE=filesystem\n")
    assert ours.made_by_blocklab and not ours.empty
    other = parse_blkid_export("DEVNAME=/dev/sdb\nLABEL=backup\nTYPE=xfs\n")
    assert not other.made_by_blocklab and not other.empty
    table = parse_blkid_export("DEVNAME=/dev/sdb\nPTUUID=ab\nPTTYPE=gpt\n")
    assert not table.made_by_blocklab and not table.empty
    assert parse_blkid_export("").empty


def test_cmdline_match_guards_against_pid_reuse() -> None:
    argv = parse_cmdline(b"/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/x/data\0")
    assert cmdline_runs_on(argv, "/var/lib/x/data")
    assert cmdline_runs_on(argv, "/var/lib/x/data/")
    assert not cmdline_runs_on(argv, "/var/lib/x/other")
    assert not cmdline_runs_on(["sleep", "-D", "/var/lib/x/data"], "/var/lib/x/data")
    assert cmdline_runs_on(["/opt/pg/bin/postgres", "-D/var/lib/x/data"], "/var/lib/x/data")
    assert not cmdline_runs_on([], "/var/lib/x/data")


def test_own_v1_path() -> None:
    text = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n"
    assert own_v1_path(text) == "/process_api/abc"
    assert own_v1_path("0::/user.slice\n") == "/"


@pytest.mark.parametrize(
    ("fstype", "options", "message"),
    [
        ("ext4", ("data=unordered",), "unknown ext4 mount option 'data=unordered'"),
        ("ext4", ("data=journal", "data=writeback"), "more than one data= mode"),
        ("xfs", ("nobarrier",), "xfs dropped barrier/nobarrier"),
        ("btrfs", ("compress=gzip",), "unknown btrfs mount option"),
    ],
)
def test_mount_options_refused(fstype: str, options: tuple[str, ...], message: str) -> None:
    with pytest.raises(UserError, match="storage.mount_options") as e:
        check_mount_options(fstype, options, "storage.mount_options")
    assert message in str(e.value)


def test_mount_options_accepted() -> None:
    check_mount_options("ext4", ("noatime", "data=journal", "nobarrier", "commit=30"), "k")
    check_mount_options("xfs", ("noatime", "logbsize=256k", "logbufs=8"), "k")
    check_mount_options("btrfs", ("nodatacow", "compress=zstd:3", "compress-force=lzo"), "k")


def test_mkfs_options() -> None:
    check_mkfs_options("ext4", ("-O", "^has_journal", "-E", "lazy_itable_init=0"), "k")
    with pytest.raises(UserError, match="-b is set by blocklab"):
        check_mkfs_options("ext4", ("-b", "8192"), "storage.mkfs_options")
    with pytest.raises(UserError, match="neither a flag"):
        check_mkfs_options("xfs", ("oops",), "storage.mkfs_options")


def test_mkfs_argv_labels_and_block_size() -> None:
    assert mkfs_argv(FsSpec("xfs", 16384, (), ("-m", "crc=1")), "/dev/loop2") == [
        "mkfs.xfs", "-f", "-q", "-L", "blocklab", "-b", "size=16384", "-m", "crc=1", "/dev/loop2"
    ]  # fmt: skip
    assert mkfs_argv(FsSpec("btrfs", 4096, (), ()), "/dev/loop1")[-3:] == [
        "-s",
        "4096",
        "/dev/loop1",
    ]


def test_mkfs_ext4_zeroes_inode_tables_and_journal_at_once() -> None:
    argv = mkfs_argv(FsSpec("ext4", 4096, (), ()), "/dev/loop3")
    assert argv[argv.index("-E") + 1] == "lazy_itable_init=0,lazy_journal_init=0"
    # the user's own -E comes later, so mke2fs (which keeps the last -E) takes theirs
    own = mkfs_argv(FsSpec("ext4", 4096, (), ("-E", "stride=4")), "/dev/loop3")
    assert own[-3:] == ["-E", "stride=4", "/dev/loop3"]


def test_image_size() -> None:
    mib = 1024 * 1024
    assert image_size_bytes("ext4", 100, 0) == 100 * mib  # an explicit size wins
    assert image_size_bytes("xfs", None, 1) == 300 * mib  # xfs's minimum
    assert image_size_bytes("ext4", None, 1000 * mib) == 1364 * mib  # 1.3x + 64 MiB

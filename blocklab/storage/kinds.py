"""What each storage kind accepts, and the mkfs command lines (pure: no I/O).

Block sizes listed here are what the tools can be asked for; what this machine's
kernel actually mounts is probed once (blocklab.storage.capabilities).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import UserError

MIB = 1024 * 1024
# blocklab marks every file system it makes with this label (xfs allows 12 characters).
LABEL = "blocklab"

FS_KINDS = ("ext4", "xfs", "btrfs")
DEFAULT_BLOCK_SIZE = 4096

# Sizes worth probing per file system (bytes).
CANDIDATE_BLOCK_SIZES = {
    "ext4": (1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "xfs": (1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "btrfs": (4096, 8192, 16384, 32768, 65536),
}
# Smallest image each mkfs accepts (xfsprogs refuses file systems below 300 MB).
MIN_SIZE_MB = {"ext4": 32, "xfs": 300, "btrfs": 128}

# Mount options per file system: exact words, or a regex for key=value forms.
_COMMON = ("noatime", "relatime", "lazytime", "nodiratime", "discard", "nodiscard")
MOUNT_OPTIONS: dict[str, tuple[str, ...]] = {
    "ext4": _COMMON
    + (
        "data=ordered",
        "data=writeback",
        "data=journal",
        "barrier",
        "nobarrier",
        "barrier=0",
        "barrier=1",
        "delalloc",
        "nodelalloc",
        "journal_checksum",
        "nojournal_checksum",
        "journal_async_commit",
        "dioread_nolock",
        "dioread_lock",
        "auto_da_alloc",
        "noauto_da_alloc",
        r"commit=\d+",
        r"stripe=\d+",
        r"journal_ioprio=[0-7]",
    ),
    "xfs": _COMMON
    + (
        "wsync",
        "largeio",
        "nolargeio",
        "inode64",
        "inode32",
        "noalign",
        r"logbufs=\d+",
        r"logbsize=\d+[kK]?",
        r"allocsize=\d+[kKmMgG]?",
    ),
    "btrfs": _COMMON
    + (
        "nodatacow",
        "datacow",
        "nodatasum",
        "datasum",
        "barrier",
        "nobarrier",
        "ssd",
        "nossd",
        "autodefrag",
        "noautodefrag",
        "space_cache=v2",
        "discard=sync",
        "discard=async",
        r"commit=\d+",
        r"compress(-force)?=(zlib(:[1-9])?|lzo|zstd(:([1-9]|1[0-5]))?|no)",
        "compress",
    ),
}
_WHY_NOT = {
    ("xfs", "nobarrier"): "xfs dropped barrier/nobarrier in Linux 4.19",
    ("xfs", "barrier"): "xfs dropped barrier/nobarrier in Linux 4.19",
}
EXT4_EAGER_INIT = "lazy_itable_init=0,lazy_journal_init=0"
# Flags blocklab sets itself; a mkfs_options entry must not override them.
OWN_MKFS_FLAGS = {
    "ext4": ("-b", "-L", "-F", "-q", "-t"),
    "xfs": ("-b", "-L", "-f", "-q"),
    "btrfs": ("-s", "--sectorsize", "-L", "--label", "-f", "--force", "-q"),
}


@dataclass(frozen=True)
class FsSpec:
    """A validated file-system request for one volume."""

    fstype: str
    block_size: int
    mount_options: tuple[str, ...]
    mkfs_options: tuple[str, ...]


def fs_type(kind: str, fs: str | None = None) -> str:
    """The file system made for `kind`: kind 'device' gets `fs`, ext4 by default."""
    return (fs or "ext4") if kind == "device" else kind


def check_mount_options(fstype: str, options: tuple[str, ...], key: str) -> None:
    allowed = MOUNT_OPTIONS[fstype]
    for opt in options:
        if (fstype, opt) in _WHY_NOT:
            raise UserError(f"{key}: {opt!r} is not accepted: {_WHY_NOT[(fstype, opt)]}")
        if not any(re.fullmatch(pattern, opt) for pattern in allowed):
            shown = ", ".join(p.replace("\\d+", "N") for p in allowed if "(" not in p)
            raise UserError(
                f"{key}: unknown {fstype} mount option {opt!r}; allowed: {shown}"
                + (", compress=zlib|lzo|zstd[:level]" if fstype == "btrfs" else "")
            )
    data_modes = [o for o in options if o.startswith("data=")]
    if len(data_modes) > 1:
        raise UserError(f"{key}: more than one data= mode: {', '.join(data_modes)}")


def check_mkfs_options(fstype: str, options: tuple[str, ...], key: str) -> None:
    own = OWN_MKFS_FLAGS[fstype]
    for i, opt in enumerate(options):
        previous = options[i - 1] if i > 0 else ""
        is_argument = previous.startswith("-") and "=" not in previous
        if not opt.startswith("-") and not is_argument:
            raise UserError(f"{key}: {opt!r} is neither a flag nor a flag's argument")
        flag = opt.split("=", 1)[0]
        if flag in own:
            raise UserError(
                f"{key}: {flag} is set by blocklab (use storage.block_size for the block size)"
            )


def mkfs_argv(spec: FsSpec, device: str) -> list[str]:
    """The mkfs command line for `spec` on `device` (labelled as blocklab's)."""
    bs = str(spec.block_size)
    extra = list(spec.mkfs_options)
    if spec.fstype == "ext4":
        # Zero the inode tables and journal now: lazily, ext4lazyinit would write them in
        # the background during the first runs and count in their device bytes. A `-E`
        # among mkfs_options replaces this one (mke2fs keeps the last -E).
        eager = ["-E", EXT4_EAGER_INIT]
        return ["mkfs.ext4", "-F", "-q", "-L", LABEL, "-b", bs, *eager, *extra, device]
    if spec.fstype == "xfs":
        return ["mkfs.xfs", "-f", "-q", "-L", LABEL, "-b", f"size={bs}", *extra, device]
    if spec.fstype == "btrfs":
        return ["mkfs.btrfs", "-f", "-q", "-L", LABEL, "-s", bs, *extra, device]
    raise ValueError(f"no mkfs for {spec.fstype}")


def info_argv(fstype: str, device: str, mount_point: Path) -> list[str]:
    """The command that describes a made file system (its facts)."""
    if fstype == "ext4":
        return ["tune2fs", "-l", device]
    if fstype == "xfs":
        return ["xfs_info", str(mount_point)]
    return ["btrfs", "inspect-internal", "dump-super", device]


def notes_for(spec: FsSpec) -> list[str]:
    """Warnings a reader of the results must see next to the numbers."""
    notes = []
    if "data=journal" in spec.mount_options:
        notes.append("ext4 data=journal ignores O_DIRECT: direct I/O goes through the journal")
    if spec.fstype == "btrfs" and "nodatacow" not in spec.mount_options:
        notes.append("btrfs copy-on-write is on for data files (mount with nodatacow to turn off)")
    return notes


def image_size_bytes(fstype: str, size_mb: int | None, min_size_bytes: int) -> int:
    """Size of a loop image: the request, else room for the data plus headroom."""
    if size_mb is not None:
        return size_mb * MIB
    return required_image_bytes(fstype, min_size_bytes)


def required_image_bytes(fstype: str, need_bytes: int) -> int:
    """The smallest image that holds `need_bytes` of files: 30 % + 64 MiB on top for what
    the file system keeps for itself (ext4 reserves 5 % for root, which the server user
    cannot use, plus inode tables and a journal of up to 64 MiB at these sizes; xfs and
    btrfs keep a log and metadata), and never below what mkfs accepts."""
    wanted = int(need_bytes * 1.3) + 64 * MIB
    size = max(wanted, MIN_SIZE_MB[fstype] * MIB)
    return (size + MIB - 1) // MIB * MIB


def check_size_mb(fstype: str, size_mb: int | None, need_bytes: int, key: str, how: str) -> None:
    """UserError when an image of `size_mb` cannot hold `need_bytes` (and why they are needed)."""
    if size_mb is None:
        return
    required = required_image_bytes(fstype, need_bytes)
    if size_mb * MIB < required:
        raise UserError(
            f"{key}.size_mb: {size_mb} MB is less than the {required} bytes "
            f"({required // MIB} MB) this storage needs: {need_bytes} bytes ({how}), "
            f"+ 30 % + 64 MiB for {fstype}'s own metadata; "
            f"allowed: size_mb >= {required // MIB}, or no size_mb (sized automatically)"
        )

"""kind 'dir' on a file system without a block device (overlay, tmpfs, ZFS): refused at
plan with exit 2 and what to do, not a StorageError in the middle of a run (issue 23,
item 8)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.model import StorageRequest
from blocklab.paths import Paths
from blocklab.storage.validation import uncounted_dir_message, validate


def test_the_message_names_the_key_the_fs_and_what_to_do() -> None:
    text = uncounted_dir_message("storage", Path("/srv/x"), "overlay")
    assert text.startswith("storage: kind 'dir' puts the server in /srv/x, on overlay")
    assert "device counters cannot be read there" in text
    assert "storage.path = a directory on a block-device file system" in text
    assert "storage.kind = 'ext4' or 'xfs'" in text


@pytest.mark.root
def test_tmpfs_dir_is_refused_at_plan(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting tmpfs needs root")
    mnt = tmp_path / "t"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        paths = Paths(home=tmp_path, cache=tmp_path / "c", results=tmp_path / "r")
        with pytest.raises(UserError) as info:
            validate(StorageRequest(kind="dir", path=str(mnt / "d")), paths=paths)
        assert "on tmpfs (no block device)" in str(info.value)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)

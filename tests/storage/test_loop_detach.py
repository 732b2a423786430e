"""A loop device that someone still holds open when it is released: `losetup -d` only
marks it for autoclear, and the kernel detaches it at the last close (udev's probe after
an unmount does this for a moment; a CI with two workers met it). Release waits for that,
bounded, and says so when the device is still held."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from blocklab.errors import StorageError
from blocklab.paths import Paths
from blocklab.state import State
from blocklab.storage import loopfs
from blocklab.storage.cleanup import release_all

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root"),
]
MIB = 1024 * 1024


@pytest.fixture
def state(paths: Paths) -> Iterator[State]:
    st = State(paths.home / f"state-{uuid.uuid4().hex[:8]}.json")
    yield st
    assert release_all(st, only_dead_owners=False) == []


@pytest.fixture
def image(paths: Paths, state: State) -> Path:
    img = paths.work / "images" / f"t{uuid.uuid4().hex[:8]}.img"
    loopfs.create_image(img, 8 * MIB, state)
    return img


def test_release_waits_for_the_last_close_of_a_held_device(image: Path, state: State) -> None:
    device = loopfs.attach(image, state)
    fd = os.open(device, os.O_RDONLY)
    closer = threading.Timer(0.5, os.close, args=(fd,))
    closer.start()
    try:
        t0 = time.monotonic()
        assert loopfs.detach_and_delete(image, state, wait_s=10) == [device]
        waited_s = time.monotonic() - t0
    finally:
        closer.join()
    assert loopfs.loops_backed_by(image) == []
    assert not image.exists()
    assert state.entries() == []
    assert 0.4 <= waited_s < 10  # it waited for the close, not for the bound


def test_a_device_held_beyond_the_wait_is_named_and_kept_for_cleanup(
    image: Path, state: State
) -> None:
    device = loopfs.attach(image, state)
    fd = os.open(device, os.O_RDONLY)
    try:
        with pytest.raises(StorageError, match=f"{device} still attached to {image}"):
            loopfs.detach_and_delete(image, state, wait_s=0.3)
        assert [e.kind for e in state.entries()] == ["loop"]  # `blocklab cleanup` retries
    finally:
        os.close(fd)
    assert loopfs.detach_and_delete(image, state, wait_s=10) == []  # autoclear did it
    assert loopfs.loops_backed_by(image) == [] and not image.exists()

"""Storage: where the data directory (and optionally pg_wal) lives.

Kinds: a plain directory ('dir'), or ext4/xfs/btrfs made on a sparse file-backed loop
device attached with direct I/O, or on a real block device ('device', ext4) after an
explicit erase confirmation. Each has exact device counters (blocklab.storage.devices).
Everything made is recorded in State first; blocklab.storage.cleanup releases leftovers.
A directory is deleted only when blocklab made it (blocklab.storage.made_dirs).

Layer: bottom, beside postgres and store: may import only the shared nouns at the root.
"""

from __future__ import annotations

from blocklab.storage.validation import check_room, validate
from blocklab.storage.volumes import DeviceRef, Provisioned, provision

__all__ = ["DeviceRef", "Provisioned", "check_room", "provision", "validate"]

"""Directories blocklab makes for kind 'dir' storage, and the only way they are deleted.

A directory is blocklab's only when blocklab made it. Making one: the State entry
("tempdir", the path) is added first with made=False, then os.mkdir, which fails when
the name exists (an existing directory is never taken over), then the entry gets
made=True with the new directory's device and inode. Deleting one (at release, or by
`blocklab cleanup`): only an entry with made=True whose path is still that directory
(not a symlink, same device and inode, no system directory); anything else is left
alone, its entry dropped, and LeftAlone says what and why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blocklab.errors import StorageError, UserError
from blocklab.paths import ensure_dir, is_system_dir
from blocklab.state import State

KIND = "tempdir"


class LeftAlone(StorageError):
    """A recorded directory that is not (or no longer) the one blocklab made: not deleted."""


def make_dir(directory: Path, state: State, *, key: str, purpose: str) -> None:
    """Make `directory` (mode 0755) as blocklab's own, recorded before it is made; its
    State entry (made, dev, ino) is what remove_recorded removes it by.
    UserError naming `key` when something already has that name: blocklab neither
    takes over nor deletes what it did not make."""
    if os.path.lexists(directory):
        raise UserError(foreign_message(directory, key))
    ensure_dir(directory.parent)
    made_now = False
    # an interruption anywhere from the entry's adding to its update (a Ctrl-C as a run
    # makes its driver's directory) undoes both: an entry made=False was left, which
    # nothing but `blocklab cleanup` dropped (a fresh-clone CI caught one)
    try:
        state.add(KIND, str(directory), purpose=purpose, made=False)
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            raise UserError(foreign_message(directory, key)) from None
        made_now = True
        os.chmod(directory, 0o755)  # whatever the umask
        st = os.lstat(directory)
        state.update(KIND, str(directory), made=True, dev=st.st_dev, ino=st.st_ino)
    except BaseException:
        if made_now:  # empty, and root's alone: made a moment ago in a sticky or own parent
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        state.remove(KIND, str(directory))
        raise


def remove_recorded(directory: Path, state: State) -> str | None:
    """remove_dir of `directory` by the entry make_dir recorded for it; None, and nothing
    done, without one (make_dir failed, and undid its entry). A caller that makes its
    directory inside the `try` whose clean-up calls this leaves nothing behind, wherever
    an interruption lands: even just as make_dir returned, before its result was kept."""
    ident = str(directory)
    info = next((e.info for e in state.entries() if e.kind == KIND and e.ident == ident), None)
    return None if info is None else remove_dir(directory, info, state)


def foreign_message(directory: Path, key: str) -> str:
    return (
        f"{key}: {directory} already exists and blocklab did not make it; blocklab never "
        "takes over or deletes a directory it did not make; allowed: another "
        f"{key}, or move {directory} away yourself (a directory a killed blocklab "
        "made is removed by `blocklab cleanup`)"
    )


def remove_dir(directory: Path, info: Mapping[str, Any], state: State) -> str:
    """Delete `directory` when `info` (its State entry) says blocklab made it and it is
    still that directory; drop the entry. Returns what was done; LeftAlone (entry
    dropped, nothing deleted) when it is not blocklab's; other errors keep the entry."""
    reason = not_made_reason(directory, info)
    if reason is not None:
        state.remove(KIND, str(directory))
        raise LeftAlone(f"directory {directory}: {reason}; not deleted")
    if not os.path.lexists(directory):
        state.remove(KIND, str(directory))
        return f"directory {directory} (already gone)"
    _rmtree_if_same(directory, int(info["dev"]), int(info["ino"]))
    state.remove(KIND, str(directory))
    return f"directory {directory}"


def not_made_reason(directory: Path, info: Mapping[str, Any]) -> str | None:
    """Why `directory` is not the one its State entry `info` records as made by
    blocklab, or None when it is (or is gone)."""
    if info.get("made") is not True or "dev" not in info or "ino" not in info:
        return (
            "not recorded as made by blocklab (its making was interrupted, or an older "
            "blocklab recorded it); delete it yourself if it is not needed"
        )
    if not os.path.lexists(directory):
        return None
    if os.path.islink(directory):
        return "now a symlink, not the directory blocklab made"
    st = os.lstat(directory)
    if (st.st_dev, st.st_ino) != (int(info["dev"]), int(info["ino"])):
        return (
            f"replaced since blocklab made it (device {st.st_dev} inode {st.st_ino}, "
            f"made as device {info['dev']} inode {info['ino']})"
        )
    if is_system_dir(directory.resolve()):
        return "resolves to a system directory"
    return None


def _rmtree_if_same(directory: Path, dev: int, ino: int) -> None:
    """rmtree `directory` by its name in its opened parent, after checking there that
    the name is still the directory (`dev`, `ino`): a parent swapped meanwhile is not
    followed."""
    parent = os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.stat(directory.name, dir_fd=parent, follow_symlinks=False)
        if (st.st_dev, st.st_ino) != (dev, ino):
            raise StorageError(f"refusing to delete {directory}: it changed while deleting")
        shutil.rmtree(directory.name, dir_fd=parent)
    finally:
        os.close(parent)

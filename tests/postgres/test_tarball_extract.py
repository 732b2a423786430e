"""A source tarball is unpacked as root: tarfile's "data" filter keeps it to plain files
(issue 31 item 7): setuid/setgid bits dropped, device nodes and paths out of the
directory refused, executables still executable (configure must run)."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.postgres.sources import _extract


def _tarball(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            data = b"#!/bin/sh\n" if m.isfile() else None
            if data is not None:
                m.size = len(data)
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.mode, m.type = mode, kind
    return m


def test_setuid_bits_are_dropped_and_executables_kept(tmp_path: Path) -> None:
    tar = _tarball(
        tmp_path / "pg.tar.gz",
        _member("pg/configure", 0o755),
        _member("pg/suid", 0o4755),
        _member("pg/sgid", 0o2755),
    )
    _extract(tar, tmp_path / "out")
    out = tmp_path / "out" / "pg"
    assert (out / "configure").stat().st_mode & 0o111
    for name in ("suid", "sgid"):
        mode = (out / name).stat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), name


@pytest.mark.parametrize(
    "member",
    [
        _member("pg/null", 0o666, tarfile.CHRTYPE),
        _member("pg/disk", 0o660, tarfile.BLKTYPE),
        _member("../blocklab-hostile", 0o644),
    ],
    ids=["char-device", "block-device", "dot-dot"],
)
def test_devices_and_escapes_are_refused(tmp_path: Path, member: tarfile.TarInfo) -> None:
    tar = _tarball(tmp_path / "pg.tar.gz", _member("pg/configure", 0o755), member)
    with pytest.raises(UserError, match="matrix.postgres.source: .* cannot be unpacked safely"):
        _extract(tar, tmp_path / "out")
    assert not (tmp_path / "blocklab-hostile").exists()


def test_an_absolute_name_lands_inside(tmp_path: Path) -> None:
    tar = _tarball(tmp_path / "pg.tar.gz", _member("/etc/blocklab-hostile", 0o644))
    _extract(tar, tmp_path / "out")
    assert (tmp_path / "out" / "etc" / "blocklab-hostile").is_file()
    assert not Path("/etc/blocklab-hostile").exists()

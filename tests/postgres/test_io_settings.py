"""Builds configured with lz4, zstd and (18+) liburing, their keys and manifests, and the
plan-time refusals of I/O settings a build, version or kernel cannot run (pure: fake
catalogues, a fake kernel reader)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.commands.build import features_label
from blocklab.errors import UserError
from blocklab.execution.preflight import check_io_settings
from blocklab.model import BuildRequest, Variant
from blocklab.postgres import build, sources
from blocklab.postgres.installation import Installation, features_of
from blocklab.postgres.io_settings import BuildAbility, io_uring_refusal, refusals
from blocklab.postgres.settings_policy import Catalogue, Guc


@pytest.fixture(autouse=True)
def _icu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "icu_available", lambda: True)


def test_configure_argv_has_lz4_zstd_and_liburing_from_18() -> None:
    argv18 = build.configure_argv(BuildRequest(pg="18"), Path("/p"), "18.1")
    argv17 = build.configure_argv(BuildRequest(pg="17"), Path("/p"), "17.6")
    assert argv18[-3:] == ["--with-lz4", "--with-zstd", "--with-liburing"]
    assert argv17[-2:] == ["--with-lz4", "--with-zstd"] and "--with-liburing" not in argv17
    # a tree's own version decides, not the informative request major
    assert "--with-liburing" in build.configure_argv(BuildRequest(pg="17"), Path("/p"), "18devel")


def test_features_of_lets_the_last_flag_win() -> None:
    req = BuildRequest(pg="18", configure_args=("--without-lz4",))
    argv = build.configure_argv(req, Path("/p"), "18.1")
    assert features_of(argv) == ("zstd", "liburing")
    assert features_of(["--with-lz4", "--without-lz4", "--with-lz4"]) == ("lz4",)
    assert features_of(["./configure"]) == ()


def test_the_key_material_names_the_features_and_changes_the_key() -> None:
    spec = sources.SourceSpec("debian", "18.6", {"kind": "debian", "version": "18.6-3"})
    req = BuildRequest(pg="18")
    material = build.key_material(req, spec)
    assert "--with-liburing" in material["configure"] and "--with-lz4" in material["configure"]
    without = {**material, "configure": [a for a in material["configure"] if "-with-l" not in a]}
    assert build.format_key("18.6", req, material) != build.format_key("18.6", req, without)


def _inst(manifest: dict[str, object], version: str = "18.6") -> Installation:
    return Installation(Path("/x"), "k", version, 8192, 8192, manifest=manifest)


def test_installation_features_from_manifest_or_its_configure_argv() -> None:
    req = BuildRequest(pg="18").model_dump(mode="json")
    new = _inst({"request": req, "features": ["lz4", "zstd", "liburing"]})
    old = _inst({"request": req, "configure_argv": ["./configure", "--with-blocksize=8"]})
    system = Installation.system(15)
    assert new.features == ("lz4", "zstd", "liburing") and old.features == ()
    assert system.features is None
    assert [features_label(i) for i in (new, old, system)] == ["lz4 zstd liburing", "none", "?"]
    assert build.is_current(new) and not build.is_current(old)  # old: never reused


def _catalogue(**gucs: Guc) -> Catalogue:
    return Catalogue(8192, 8192, gucs, version="18.1", key="k18")


PG18 = _catalogue(
    io_method=Guc("io_method", vartype="enum", enumvals="sync,worker"),  # no liburing
    io_workers=Guc("io_workers", min_val="1", max_val="32"),
    wal_compression=Guc("wal_compression", vartype="enum", enumvals="pglz,zstd,on,off"),
    data_checksums=Guc("data_checksums", vartype="bool", context="internal"),
    block_size=Guc("block_size", context="internal"),
)


@pytest.mark.parametrize(
    ("name", "value", "ability", "kernel", "expected"),
    [
        ("io_method", "io_uring", BuildAbility(18, ("lz4", "zstd"), PG18, "b18"),
         "", "built without liburing (configure --with-liburing); b18 accepts sync, worker"),
        ("io_method", "io_uring", BuildAbility(18, ("lz4", "zstd", "liburing")), "off here",
         "the kernel cannot: off here"),
        ("io_method", "io_uring", BuildAbility(18, ("lz4", "zstd")), "",
         "PostgreSQL 18 was built without liburing"),
        ("io_method", "worker", BuildAbility(17, ("lz4", "zstd")), "",
         "io_method exists from PostgreSQL 18; this is PostgreSQL 17"),
        ("io_method", "async", BuildAbility(18, ("lz4", "zstd", "liburing")), "",
         "allowed: sync, worker, io_uring"),
        ("io_max_combine_limit", "256kB", BuildAbility(17, ()), "", "exists from PostgreSQL 18"),
        ("io_workers", "64", BuildAbility(18, None, PG18), "", "range 1 to 32"),
        ("wal_compression", "lz4", BuildAbility(18, ("zstd",), PG18, "b18"), "",
         "b18 was built without lz4 (configure --with-lz4); b18 accepts pglz, zstd, on, off"),
        ("wal_compression", "lz4", BuildAbility(18, ("zstd",)), "", "built without lz4"),
        ("wal_compression", "zstd", BuildAbility(14, ("lz4", "zstd")), "",
         "zstd exists from PostgreSQL 15"),
        ("data_checksums", "on", BuildAbility(18, None), "", "matrix.data_checksums (initdb)"),
        ("block_size", "4096", BuildAbility(18, None, PG18), "", "read-only in the server"),
    ],
)  # fmt: skip
def test_refusals_name_the_key_the_value_and_why(
    name: str, value: str, ability: BuildAbility, kernel: str, expected: str
) -> None:
    found = refusals({name: value}, ability, kernel)
    assert len(found) == 1
    assert found[0].startswith(f"matrix.settings.{name} = {value!r}: ")
    assert expected in found[0]


def test_what_the_build_version_and_kernel_can_do_is_not_refused() -> None:
    full = BuildAbility(18, ("lz4", "zstd", "liburing"))
    asked = {
        "io_method": "io_uring",
        "io_workers": "3",
        "io_combine_limit": "128kB",
        "io_max_combine_limit": "256kB",
        "wal_compression": "lz4",
        "shared_buffers": "256MB",
    }
    assert refusals(asked, full, "") == []
    assert (
        refusals(
            {"io_method": "worker", "wal_compression": "zstd"}, BuildAbility(18, None, PG18), ""
        )
        == []
    )
    assert refusals({"io_combine_limit": "16"}, BuildAbility(17, ("lz4",)), "") == []


def test_kernel_io_uring_from_its_sysctl() -> None:
    assert io_uring_refusal("0\n", "6.8.0-45-generic") == ""
    assert io_uring_refusal(None, "6.1.0-25-amd64") == ""  # before the sysctl existed
    assert "only kernel.io_uring_group" in io_uring_refusal("1\n", "6.8.0")
    assert "is 2: io_uring is disabled" in io_uring_refusal("2\n", "6.12.1")
    assert "is missing" in io_uring_refusal(None, "6.6.3")
    assert "predates io_uring" in io_uring_refusal(None, "4.19.0")


def _variant(**settings: str) -> Variant:
    return Variant(settings=tuple(settings.items()), label="v")


def test_plan_check_reads_the_kernel_only_for_io_uring_and_names_the_variant() -> None:
    reads: list[int] = []

    def kernel() -> str:
        reads.append(1)
        return "/proc/sys/kernel/io_uring_disabled is 2: io_uring is disabled"

    full = BuildAbility(18, ("lz4", "zstd", "liburing"))
    check_io_settings([_variant(io_method="worker")], lambda _r: full, kernel)
    assert reads == []
    with pytest.raises(UserError) as e:
        check_io_settings([_variant(io_method="io_uring")], lambda _r: full, kernel)
    assert reads == [1]
    assert str(e.value).startswith("matrix.settings.io_method = 'io_uring': the kernel cannot")
    assert str(e.value).endswith("(variant v)")

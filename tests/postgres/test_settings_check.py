"""A setting against the build's own catalogue (issue 35 item 3): a mistyped name or a
value the build would refuse is a UserError naming the key, with "did you mean", before
any server starts. Replays the PostgreSQL 18 catalogue blocklab recorded
(tests/data/settings); the values PostgreSQL accepts must pass (no false alarms)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import recorded_catalogue

from blocklab import experiment_file as spec
from blocklab.commands.plan import check_known_settings
from blocklab.errors import UserError
from blocklab.postgres import settings_check

CAT = recorded_catalogue(8)
WHERE = "PostgreSQL 18.6, build k"

REFUSED = [
    (
        "shared_bufers",
        "128MB",
        "not a setting of PostgreSQL 18.6, build k; did you mean shared_buffers?",
    ),
    ("shared_buffers", "128XB", "has a unit this setting does not take; allowed: a number of 8kB"),
    ("shared_buffers", "lots", "'lots' is not a number"),
    ("work_mem", "10s", "has a unit this setting does not take"),
    ("checkpoint_timeout", "10s", "'10s' is outside 30..86400 s"),
    ("max_connections", "0", "is outside 1..262143"),
    ("fsync", "maybe", "'maybe' is not a boolean"),
    ("random_page_cost", "-1", "is outside 0..1.79769e+308"),
]
ACCEPTED = [
    ("shared_buffers", "128MB"), ("shared_buffers", "16384"), ("shared_buffers", "1GB"),
    ("work_mem", "64MB"), ("work_mem", "65536"), ("checkpoint_timeout", "5min"),
    ("checkpoint_timeout", "1h"), ("checkpoint_timeout", "300"), ("fsync", "off"),
    ("fsync", "true"), ("fsync", "of"), ("synchronous_commit", "off"),
    ("random_page_cost", "1.1"), ("default_text_search_config", "pg_catalog.english"),
    ("datestyle", "ISO, MDY"), ("wal_buffers", "-1"), ("max_wal_size", "4GB"),
    ("auto_explain.log_min_duration", "0"), ("bgwriter_delay", "200ms"),
    ("effective_io_concurrency", "0x10"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value", "message"), REFUSED)
def test_a_mistyped_setting_is_refused_naming_the_key(name: str, value: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        settings_check.check({name: value}, CAT, WHERE)
    assert f"matrix.settings.{name}: " in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(("name", "value"), ACCEPTED)
def test_what_postgresql_takes_passes(name: str, value: str) -> None:
    settings_check.check({name: value}, CAT, WHERE)


def test_an_enum_is_checked_where_the_catalogue_records_its_values() -> None:
    guc = dataclasses.replace(CAT.gucs["wal_level"], enumvals="minimal,replica,logical")
    cat = dataclasses.replace(CAT, gucs={**CAT.gucs, "wal_level": guc})
    settings_check.check({"wal_level": "Logical"}, cat, WHERE)
    with pytest.raises(UserError, match="'archive' is not one of its values; allowed: minimal"):
        settings_check.check({"wal_level": "archive"}, cat, WHERE)
    settings_check.check({"wal_level": "archive"}, CAT, WHERE)  # not recorded: not judged


def test_plan_checks_every_variant_whose_build_is_cached(tmp_path: Path) -> None:
    f = tmp_path / "x.toml"
    f.write_text(
        '[experiment]\nname = "x"\nreference = { block_size = 8 }\n[matrix]\nblock_size = [4, 8]\n'
        '[matrix.settings]\nshared_bufers = "128MB"\n'
    )
    exp = spec.load(f)
    check_known_settings(exp, lambda _req: None)  # nothing cached: nothing to read
    with pytest.raises(UserError) as info:
        check_known_settings(exp, lambda req: CAT if req.block_size_kb == 8 else None)
    assert str(info.value).startswith(f"{f}: matrix.settings.shared_bufers: not a setting")
    assert "did you mean shared_buffers?" in str(info.value)

"""[design] kind = "interleaved": its keys, its defaults, and what `plan` refuses with
exit code 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError

HEAD = '[experiment]\nname = "il"\nrounds = 2\nreference = { block_size = 8 }\n'
MATRIX = "[matrix]\nblock_size = [4, 8]\nduration = 20\n"


def _file(tmp_path: Path, design: str, matrix: str = MATRIX) -> Path:
    f = tmp_path / "x.toml"
    f.write_text(HEAD + design + matrix)
    return f


def test_defaults_and_stored_json(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\nkind = "interleaved"\n'))
    assert (exp.run_design.kind, exp.run_design.slice_s, exp.run_design.slices) == (
        "interleaved",
        5,
        12,
    )
    stored = exp.to_json()["design"]
    assert (stored["slice_s"], stored["slices"]) == (5, 12)


def test_set_values_are_kept(tmp_path: Path) -> None:
    f = _file(tmp_path, '[design]\nkind = "interleaved"\nslice_s = 2\nslices = 4\n')
    rd = spec.load(f).run_design
    assert (rd.slice_s, rd.slices) == (2, 4)


def test_other_designs_store_no_slice_keys(tmp_path: Path) -> None:
    stored = spec.load(_file(tmp_path, '[design]\nkind = "abba"\n')).to_json()["design"]
    assert "slice_s" not in stored and "slices" not in stored


BAD = [
    ('kind = "abba"\nslice_s = 5\n', "design.slice_s: set with design.kind = 'abba'"),
    ("slices = 12\n", "design.slices: set with design.kind = 'paired'"),
    ('kind = "interleaved"\nslices = 5\n', "design.slices: 5 is odd"),
    ('kind = "interleaved"\nslices = 0\n', "design.slices"),
    ('kind = "interleaved"\nslice_s = 0\n', "design.slice_s"),
    ('kind = "interleaved"\nslice_s = 301\n', "design.slice_s"),
    ('kind = "interleaved"\ncheckpoint = "cycles"\n', "design.checkpoint: 'cycles' with"),
    ('kind = "interleaved"\nwarmup = "steady"\n', "design.warmup: 'steady' with"),
    ('kind = "interleaved"\nfootprint = true\n', "design.footprint: True with"),
    ('kind = "interleaved"\nquiesce_max_s = 10\n', "design.quiesce_max_s: 10 with"),
    ('kind = "interleaved"\nplacement = "auto"\n', "design.placement: 'auto' with"),
]


@pytest.mark.parametrize(("design", "message"), BAD)
def test_refusals_name_the_key(tmp_path: Path, design: str, message: str) -> None:
    with pytest.raises(UserError, match="allowed: ") as e:
        spec.load(_file(tmp_path, "[design]\n" + design))
    assert message in str(e.value)


@pytest.mark.parametrize(("design", "message"), BAD[:3] + BAD[6:])
def test_plan_refuses_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], design: str, message: str
) -> None:
    assert main(["plan", str(_file(tmp_path, "[design]\n" + design))]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_aligned_checkpoints_are_accepted_and_cycles_name_the_allowed(tmp_path: Path) -> None:
    """aligned: a CHECKPOINT on each server before its first measured slice, with
    checkpoint_timeout out of reach; whole cycles stay refused (both timers would run)."""
    f = _file(tmp_path, '[design]\nkind = "interleaved"\ncheckpoint = "aligned"\n')
    assert spec.load(f).run_design.checkpoint == "aligned"
    with pytest.raises(UserError, match="allowed: 'free' or 'aligned'"):
        spec.load(_file(tmp_path, '[design]\nkind = "interleaved"\ncheckpoint = "cycles"\n'))


def test_footprint_false_is_accepted(tmp_path: Path) -> None:
    f = _file(tmp_path, '[design]\nkind = "interleaved"\nfootprint = false\n')
    assert spec.load(f).run_design.footprint is False


@pytest.mark.parametrize("sizes", ["[4, 8, 16]", "[8]"])
def test_exactly_two_variants(tmp_path: Path, sizes: str) -> None:
    matrix = f"[matrix]\nblock_size = {sizes}\nduration = 20\n"
    f = _file(tmp_path, '[design]\nkind = "interleaved"\n', matrix)
    n = sizes.count(",") + 1
    with pytest.raises(UserError) as e:
        spec.load(f)
    assert f"matrix: gives {n} variant(s) with design.kind = 'interleaved'" in str(e.value)
    assert "allowed: exactly two variants" in str(e.value)


def test_a_block_device_is_refused(tmp_path: Path) -> None:
    matrix = (
        MATRIX + '[[matrix.storage]]\nkind = "device"\npath = "/dev/sdz"\nerase_confirmed = true\n'
    )
    with pytest.raises(UserError) as e:
        spec.load(_file(tmp_path, '[design]\nkind = "interleaved"\n', matrix))
    assert "matrix.storage: kind 'device' with design.kind = 'interleaved'" in str(e.value)


def test_a_fleet_host_with_one_variant_is_refused(tmp_path: Path) -> None:
    design = '[design]\nkind = "interleaved"\n'
    fleet = "[fleet.hosts]\nsolo = { block_size = 8 }\nboth = { block_size = 4 }\n"
    with pytest.raises(UserError) as e:
        spec.load(_file(tmp_path, design, MATRIX + fleet))
    assert "fleet: hosts solo (1 variant(s)) with design.kind = 'interleaved'" in str(e.value)
    ok = spec.load(_file(tmp_path, design, MATRIX + "[fleet.hosts]\nboth = { block_size = 4 }\n"))
    assert len(ok.variants_on("both")) == 2

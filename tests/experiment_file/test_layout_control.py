"""[design] layout_control = N: N layout variants of each reference build as extra arms
(blocklab.experiment_file.layout_control), and what `plan` refuses with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError

HEAD = '[experiment]\nname = "lc"\nrounds = 4\nreference = { block_size = 8 }\n'
MATRIX = "[matrix]\nblock_size = [4, 8]\nduration = 20\n"


def _file(tmp_path: Path, design: str, matrix: str = MATRIX) -> Path:
    f = tmp_path / "x.toml"
    f.write_text(HEAD + design + matrix)
    return f


def test_each_reference_gets_n_layout_copies_compared_with_it(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\nkind = "abba"\nlayout_control = 3\n'))
    by_label = {v.label: v for v in exp.variants()}
    assert list(by_label) == ["bs=4k", "bs=8k", "bs=8k layout1", "bs=8k layout2", "bs=8k layout3"]
    ref = by_label["bs=8k"]
    for seed in (1, 2, 3):
        copy = by_label[f"bs=8k layout{seed}"]
        assert copy.build == ref.build.model_copy(update={"layout_seed": seed})
        assert (copy.storage, copy.dataset, copy.workload, copy.settings) == (
            ref.storage, ref.dataset, ref.workload, ref.settings,
        )  # fmt: skip
        assert exp.reference_map[copy.variant_id] == ref.variant_id
        assert exp.dims_map[copy.variant_id]["layout_seed"] == seed
    assert exp.reference_map[by_label["bs=4k"].variant_id] == ref.variant_id
    assert exp.to_json()["design"]["layout_control"] == 3


def test_without_it_nothing_changes_not_even_the_stored_design(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\nkind = "abba"\n'))
    assert [v.label for v in exp.variants()] == ["bs=4k", "bs=8k"]
    assert "layout_control" not in exp.to_json()["design"]
    assert all(v.build.layout_seed is None for v in exp.variants())


@pytest.mark.parametrize(
    ("design", "matrix", "message"),
    [
        ('kind = "abba"\nlayout_control = 9\n', MATRIX, "design.layout_control"),
        ('kind = "abba"\nlayout_control = -1\n', MATRIX, "design.layout_control"),
        ('kind = "interleaved"\nlayout_control = 2\n', MATRIX, "design.layout_control"),
        (
            'kind = "abba"\nlayout_control = 2\n',
            "[matrix]\nblock_size = 8\nlayout_seed = [1, 2]\nduration = 20\n",
            "design.layout_control",
        ),
    ],
)
def test_refused_with_the_key_named(tmp_path: Path, design: str, matrix: str, message: str) -> None:
    f = tmp_path / "x.toml"
    head = HEAD.replace("reference = { block_size = 8 }", "reference = { layout_seed = 1 }")
    f.write_text((head if "layout_seed" in matrix else HEAD) + "[design]\n" + design + matrix)
    with pytest.raises(UserError, match=message):
        spec.load(f)
    assert main(["plan", str(f)]) == 2


def test_an_environment_pad_is_a_dimension_that_leaves_other_ids_alone(tmp_path: Path) -> None:
    """environment_pad_bytes = [0, 3000]: two variants labelled envpad=..., the one at 0
    with the id it had before the key existed; a bad value names the key and the range."""
    head = HEAD.replace("{ block_size = 8 }", "{ environment_pad_bytes = 0 }")
    f = tmp_path / "x.toml"
    f.write_text(head + "[matrix]\nenvironment_pad_bytes = [0, 3000]\nduration = 20\n")
    variants = spec.load(f).variants()
    assert sorted(v.environment_pad_bytes for v in variants) == [0, 3000]
    assert sorted(v.label for v in variants) == ["envpad=0", "envpad=3000"]
    f.write_text(HEAD + "[matrix]\nduration = 20\n")
    (plain,) = spec.load(f).variants()
    zero = next(v for v in variants if v.environment_pad_bytes == 0)
    assert zero.variant_id == plain.variant_id
    assert "environment_pad_bytes" not in plain.model_dump(mode="json")
    f.write_text(head + "[matrix]\nenvironment_pad_bytes = 70000\n")
    with pytest.raises(UserError, match=r"matrix\.environment_pad_bytes.*65536"):
        spec.load(f)


def test_the_lab_compiles_a_relinked_reference_through_the_compiler_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference build whose layout copies follow goes through the cache (the copies
    then only link); the 4 kB build, which nothing relinks, does not pay its cold cost."""
    from blocklab.execution.lab import Lab
    from blocklab.paths import Paths
    from blocklab.postgres import build
    from blocklab.state import State

    asked: dict[int, bool] = {}
    monkeypatch.setattr(
        build,
        "ensure_build",
        lambda req, _paths, *, log, shares_objects: asked.setdefault(
            req.block_size_kb, shares_objects
        ),
    )
    exp = spec.load(_file(tmp_path, '[design]\nkind = "abba"\nlayout_control = 2\n'))
    paths = Paths(home=tmp_path / "home", cache=tmp_path / "cache", results=tmp_path / "r")
    lab = Lab(paths, State(tmp_path / "state.json"), log=lambda _m: None, variants=exp.variants())
    for v in exp.variants():
        if v.build.layout_seed is None:
            lab.install(v.build)
    assert asked == {4: False, 8: True}

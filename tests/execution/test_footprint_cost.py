"""design.footprint: the switch of the compressed-footprint step, what the plan says it
costs, and that its seconds are in the ETA."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.execution import plan, runner
from blocklab.execution.controls import RunControls
from blocklab.execution.run_state import RunState
from blocklab.probes import footprint
from blocklab.storage.kinds import image_size_bytes
from blocklab.workloads import sizing

EXAMPLE = Path(__file__).parents[2] / "examples" / "fillfactor-footprint.toml"
HEAD = '[experiment]\nname = "f"\nrounds = 3\nreference = { block_size = 8 }\n'
MATRIX = "[matrix]\nblock_size = [4, 8]\nduration = 20\nstorage = {storage}\n"
EXT4 = '{ kind = "ext4", size_mb = 600 }'


def _load(tmp_path: Path, design: str, storage: str = EXT4) -> spec.Experiment:
    f = tmp_path / "x.toml"
    f.write_text(HEAD + design + MATRIX.replace("{storage}", storage))
    return spec.load(f)


def _base_eta(p: plan.Plan) -> float:
    v = p.variants[0]
    assert v.workload.duration_s == 20
    return p.runs * (20 + v.workload.warmup_s + plan.per_run_fixed_s(v))


def test_loop_storage_measures_by_default_and_the_eta_counts_it(tmp_path: Path) -> None:
    exp = _load(tmp_path, "")
    assert exp.run_design.footprint is None and "design" not in exp.to_json()
    p = plan.describe(exp)
    assert set(p.footprint) == {v.variant_id for v in exp.variants()}
    cost = next(iter(p.footprint.values()))
    assert cost.image_bytes == 600 * 1024 * 1024  # size_mb: the image read after a run
    want_s = footprint.SYNC_TRIM_S + cost.image_bytes / (footprint.READ_COMPRESS_MB_PER_S * 1e6)
    assert cost.seconds == pytest.approx(want_s)
    assert p.footprint_s_per_round == pytest.approx(2 * want_s)
    assert p.eta_runs_s == pytest.approx(_base_eta(p) + exp.rounds * 2 * want_s)
    assert "630 MB" not in p.footprint_line() and "600 MB read per run" in p.footprint_line()


def test_the_example_image_is_sized_from_the_dataset() -> None:
    exp = spec.load(EXAMPLE)
    p = plan.describe(exp)
    needs = sizing.needs_by_storage(exp.variants())
    v = exp.variants()[0]
    assert p.footprint[v.variant_id].image_bytes == image_size_bytes(
        "ext4", None, needs[v.storage].data.bytes
    )
    assert "on by default" in p.footprint_line() and "footprint = false" in p.footprint_line()


def test_footprint_false_skips_it_and_its_seconds(tmp_path: Path) -> None:
    exp = _load(tmp_path, "[design]\nfootprint = false\n")
    assert exp.to_json()["design"]["footprint"] is False
    p = plan.describe(exp)
    assert p.footprint == {} and p.footprint_s_per_round == 0
    assert p.eta_runs_s == pytest.approx(_base_eta(p))
    assert p.footprint_line() == "footprint: off (design.footprint = false)"
    assert RunControls.from_design(exp.run_design).to_json()["footprint"] == "off"


def test_dir_storage_costs_nothing(tmp_path: Path) -> None:
    p = plan.describe(_load(tmp_path, "", storage='{ kind = "dir" }'))
    assert p.footprint == {} and "not measured" in p.footprint_line()


def test_footprint_true_needs_a_loop_image(tmp_path: Path) -> None:
    exp = _load(tmp_path, "[design]\nfootprint = true\n")
    assert "asked by design.footprint = true" in plan.describe(exp).footprint_line()
    with pytest.raises(UserError, match=r"design\.footprint: true, but .*'dir'"):
        _load(tmp_path, "[design]\nfootprint = true\n", storage='{ kind = "dir" }')
    with pytest.raises(UserError, match=r"design\.footprint: expected true or false"):
        _load(tmp_path, '[design]\nfootprint = "yes"\n')


def test_plan_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.toml"
    f.write_text(
        HEAD + "[design]\nfootprint = true\n" + MATRIX.replace("{storage}", '{ kind = "dir" }')
    )
    assert main(["plan", str(f)]) == 2
    assert "design.footprint" in capsys.readouterr().err


class _NoTarget:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the footprint step is off: target.{name} was read")


def test_the_runner_skips_it_when_off_and_says_why(tmp_path: Path) -> None:
    acc = RunState(tmp_path, controls=RunControls(footprint=False))
    runner._footprint(_NoTarget(), acc)  # type: ignore[arg-type]
    assert acc.footprint == {"missing": dict.fromkeys(footprint.METRICS, footprint.OFF_REASON)}
    assert "footprint_s" not in acc.phases_s

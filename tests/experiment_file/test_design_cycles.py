"""[design] checkpoint = "cycles" with design.cycles, and design.quiesce_max_s: their
values, their errors (exit 2 naming the key and the allowed range) and the plan that
counts whole checkpoint cycles per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.execution import plan
from blocklab.execution.controls import RunControls

HEAD = '[experiment]\nname = "c"\nrounds = 2\nreference = { block_size = 8 }\n'
MATRIX = "[matrix]\nblock_size = [4, 8]\nduration = 20\nwarmup = 5\n"


def _file(tmp_path: Path, design: str, settings: str = "") -> Path:
    f = tmp_path / "x.toml"
    extra = f"[matrix.settings]\n{settings}" if settings else ""
    f.write_text(HEAD + design + MATRIX + extra)
    return f


def test_cycles_defaults_to_two_and_is_stored(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\ncheckpoint = "cycles"\n'))
    assert exp.run_design.checkpoint == "cycles" and exp.run_design.cycles == 2
    assert exp.to_json()["design"]["cycles"] == 2
    controls = RunControls.from_design(exp.run_design)
    assert controls.cycles == 2 and not controls.checkpoint_aligned
    assert controls.to_json()["checkpoint"] == {"mode": "cycles", "cycles": 2}


def test_older_designs_keep_their_json(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\ncheckpoint = "aligned"\n'))
    assert "cycles" not in exp.to_json()["design"]
    assert "quiesce_max_s" not in exp.to_json()["design"]
    assert exp.run_design.quiesce_max_s == 0  # off by default
    assert RunControls.from_design(exp.run_design).quiesce_max_s == 0


@pytest.mark.parametrize(
    ("design", "message"),
    [
        ('checkpoint = "cycles"\ncycles = 0', "design.cycles: 0 is out of range; allowed: 1..20"),
        ('checkpoint = "cycles"\ncycles = 21', "design.cycles: 21 is out of range; allowed: 1..20"),
        ('checkpoint = "cycles"\ncycles = "2"', "design.cycles: expected an integer"),
        ("cycles = 2", "design.cycles: set with design.checkpoint = 'free'"),
        ('checkpoint = "cycle"', "design.checkpoint"),
        ("quiesce_max_s = -1", "design.quiesce_max_s: -1 is out of range; allowed: 0..600"),
    ],
)
def test_bad_cycles_keys_exit_2(
    tmp_path: Path, design: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, f"[design]\n{design}\n")
    with pytest.raises(UserError, match="design"):
        spec.load(f)
    assert main(["plan", str(f)]) == 2
    assert message in capsys.readouterr().err


def test_checkpoint_cycle_allowed_values_are_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="allowed: free, aligned, cycles"):
        spec.load(_file(tmp_path, '[design]\ncheckpoint = "cycle"\n'))


def test_quiesce_is_stored_when_asked_for(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, "[design]\nquiesce_max_s = 20\n"))
    assert RunControls.from_design(exp.run_design).quiesce_max_s == 20
    assert exp.to_json()["design"]["quiesce_max_s"] == 20
    off = spec.load(_file(tmp_path, "[design]\nquiesce_max_s = 0\n"))
    assert RunControls.from_design(off.run_design).quiesce_max_s == 0


def test_plan_counts_the_lead_in_and_n_cycles_per_run(tmp_path: Path) -> None:
    design = '[design]\ncheckpoint = "cycles"\ncycles = 3\n'
    f = _file(tmp_path, design, 'checkpoint_timeout = "1min"\n')
    p = plan.describe(spec.load(f))
    # per run: lead-in to the first checkpoint after the 5 s warm-up (60 s) + 3 x 60 s + overhead
    assert p.eta_runs_s == pytest.approx(
        2 * 2 * (60 + 3 * 60 + plan.per_run_fixed_s(p.variants[0]))
    )


def test_plan_refuses_a_run_over_an_hour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, '[design]\ncheckpoint = "cycles"\n', 'checkpoint_timeout = "30min"\n')
    assert main(["plan", str(f)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "matrix.settings.checkpoint_timeout: 1800 s with design.cycles (--cycles) = 2" in err
    assert "allowed: 30s..1200s (PostgreSQL's minimum is 30 s" in err


def test_plan_refuses_the_default_timeout_with_many_cycles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, '[design]\ncheckpoint = "cycles"\ncycles = 12\n')
    assert main(["plan", str(f)]) == 2
    assert "300 s with design.cycles (--cycles) = 12" in capsys.readouterr().err


def test_plan_accepts_the_minimum_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    design = '[design]\ncheckpoint = "cycles"\ncycles = 1\n'
    f = _file(tmp_path, design, 'checkpoint_timeout = "30s"\n')
    assert main(["plan", str(f)]) == 0


def test_plan_refuses_a_timeout_below_postgres_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, '[design]\ncheckpoint = "cycles"\n', 'checkpoint_timeout = "10s"\n')
    assert main(["plan", str(f)]) == 2
    assert "PostgreSQL's minimum is 30 s" in capsys.readouterr().err

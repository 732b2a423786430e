"""An experiment whose [design] measures whole checkpoint cycles (tests/project/data/
page-size-cycles.toml, the demo until it became interleaved): --duration is
refused before anything starts (the cycles set the window, not a duration), and --cycles
sets how many cycles a run measures, as another experiment; --cycles is refused for a
design that measures a duration."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import blocklab_in_home as _blocklab

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError
from blocklab.execution import cycles, plan
from blocklab.paths import Paths
from blocklab.state import State

EXAMPLES = Path(__file__).parents[2] / "examples"
CYCLES = str(Path(__file__).parent / "data" / "page-size-cycles.toml")


def _nothing_created(home: Path, results: Path) -> None:
    assert not results.exists()
    assert not home.exists() or list(home.rglob("*")) == []  # before State makes its lock
    assert State(Paths(home, home / "cache", results).state_file).entries() == []


@pytest.mark.parametrize("command", ["run", "plan"])
def test_duration_on_the_cycles_demo_exits_2_and_starts_nothing(
    tmp_path: Path, command: str
) -> None:
    home, results = tmp_path / "home", tmp_path / "results"
    r = _blocklab(command, CYCLES, "--duration", "60", "--results", str(results), home=home)
    assert r.returncode == 2, r.stdout + r.stderr
    err = " ".join(r.stderr.split())  # rich wraps long lines
    assert "--duration:" in err
    assert "1 whole checkpoint cycle of checkpoint_timeout 30s" in err
    assert "use --cycles N" in err
    _nothing_created(home, results)


@pytest.mark.parametrize(
    ("flag", "refusal", "what"),
    [
        ("--cycles", '--cycles: only for [design] checkpoint = "cycles"', "checkpoint is 'free'"),
        ("--slices", '--slices: only for [design] kind = "interleaved"', "design is 'paired'"),
    ],
)
def test_cycles_or_slices_on_a_duration_design_exits_2_and_starts_nothing(
    tmp_path: Path, flag: str, refusal: str, what: str
) -> None:
    home, results = tmp_path / "home", tmp_path / "results"
    example = str(EXAMPLES / "fillfactor.toml")
    r = _blocklab("run", example, flag, "2", "--results", str(results), home=home)
    assert r.returncode == 2, r.stdout + r.stderr
    err = " ".join(r.stderr.split())
    assert refusal in err
    assert f"this experiment's {what}" in err
    _nothing_created(home, results)


def test_cycles_out_of_range_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", CYCLES, "--cycles", "21"]) == 2
    assert "--cycles: whole cycles per run, 1..20 (got 21)" in capsys.readouterr().err
    assert main(["plan", CYCLES, "--cycles", "0"]) == 2
    assert "--cycles: must be at least 1" in capsys.readouterr().err


def test_cycles_renames_the_experiment_keeps_its_seed_and_lengthens_each_run() -> None:
    one, two = spec.load(Path(CYCLES)), spec.load(Path(CYCLES), overrides={"cycles": 2})
    assert two.name == "demo-page-size-cycles-n2" and two.seed == one.seed
    assert (one.run_design.cycles, two.run_design.cycles) == (1, 2)
    # one more 30 s checkpoint cycle per run, for every run
    p1, p2 = plan.describe(one), plan.describe(two)
    assert p2.runs == p1.runs
    assert p2.eta_runs_s - p1.eta_runs_s == pytest.approx(p1.runs * 30)
    assert cycles.window_line(one) is not None
    with pytest.raises(UserError, match="--duration: .* 1 whole checkpoint cycle"):
        spec.load(Path(CYCLES), overrides={"duration": 60})


def test_the_interleaved_demo_refuses_cycles() -> None:
    with pytest.raises(UserError, match='--cycles: only for \\[design\\] checkpoint = "cycles"'):
        spec.demo(cycles=2)


def test_plan_cycles_prints_the_longer_window_under_its_stored_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))
    assert main(["plan", CYCLES, "--results", str(tmp_path / "r")]) == 0
    one = capsys.readouterr().out
    assert main(["plan", CYCLES, "--cycles", "2", "--results", str(tmp_path / "r")]) == 0
    two = capsys.readouterr().out
    assert "stored as experiment 'demo-page-size-cycles-n2'" in two
    assert "measured window: 1 whole checkpoint cycle per run (checkpoint_timeout 30 s" in one
    assert "measured window: 2 whole checkpoint cycles per run (checkpoint_timeout 30 s" in two
    assert "matrix.duration (20 s) is not the measured window" in two
    eta = [line for line in two.splitlines() if line.startswith("ETA")]
    assert eta and eta[0] != [line for line in one.splitlines() if line.startswith("ETA")][0]
    assert "runs 24 min 42 s" in two and "runs 16 min 42 s" in one  # 16 runs x 30 s more


def test_plan_of_a_duration_design_prints_no_cycles_window(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))
    assert main(["plan", str(EXAMPLES / "fillfactor.toml"), "--duration", "7"]) == 0
    out = capsys.readouterr().out
    assert "measured window" not in out and "stored as experiment 'fillfactor-d7'" in out

"""The [design] and [placement] keys: what they make of an experiment, and the bad
input that `plan` refuses with exit code 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.execution import placement
from blocklab.execution.controls import RunControls

HEAD = '[experiment]\nname = "d"\nrounds = 3\nreference = { block_size = 8 }\n'
MATRIX = "[matrix]\nblock_size = [4, 8]\nduration = 20\n"


def _file(tmp_path: Path, design: str) -> Path:
    f = tmp_path / "x.toml"
    f.write_text(HEAD + design + MATRIX)
    return f


def test_no_design_keeps_the_stored_json_of_older_experiments(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, ""))
    assert exp.run_design.kind == "paired" and "design" not in exp.to_json()


def test_short_runs_halves_the_duration_and_doubles_the_rounds(tmp_path: Path) -> None:
    exp = spec.load(_file(tmp_path, '[design]\nkind = "short-runs"\n'))
    assert exp.rounds == 6
    assert {v.workload.duration_s for v in exp.variants()} == {10}
    assert exp.to_json()["design"]["kind"] == "short-runs"


def test_abba_plan_runs_four_per_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(_file(tmp_path, '[design]\nkind = "abba"\n'))]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "12 runs (4 per round, design abba" in out
    assert "(copy 1)" in out


def test_placement_on_cpus_the_machine_lacks_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = max(placement.machine_cpus()) + 1
    f = _file(tmp_path, f'[placement]\ndriver_cpus = "{absent}"\nserver_cpus = "0"\n')
    assert main(["plan", str(f)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"placement.driver_cpus: CPU {absent} is not on this machine" in err
    assert "allowed CPUs: " in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--until-ci", "0"], "--until-ci: a percentage between 0 and 100"),
        (["--pilot", "1"], "--pilot: rounds between 2 and 50"),
    ],
)
def test_plan_bad_flags_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *args]) == 2
    assert message in capsys.readouterr().err


def test_controls_from_the_design(tmp_path: Path) -> None:
    design = (
        '[design]\nwarmup = "steady"\nwarmup_max_s = 60\ncheckpoint = "aligned"\n'
        '[placement]\ndriver_cpus = "0"\nserver_cpus = "0"\n'
    )
    c = RunControls.from_design(spec.load(_file(tmp_path, design)).run_design)
    assert c.warmup_steady and c.warmup_max_s == 60 and c.checkpoint_aligned
    assert c.placement == placement.Placement((0,), (0,))
    assert c.settings({"a": "1"}) == {"a": "1", "checkpoint_timeout": "1d"}
    assert c.to_json()["placement_requested"] == {"driver_cpus": "0", "server_cpus": "0"}


def test_steady_warmup_stops_when_chunks_agree_and_at_the_bound() -> None:
    from blocklab.execution.controls import steady_warmup
    from blocklab.execution.steady import Chunk

    ramp = iter(Chunk(x) for x in [100.0, 300.0, 500.0, 510.0, 505.0, 508.0])
    ok, report = steady_warmup(lambda _s: next(ramp), 120)
    assert ok and report["steady"] and report["chunks_tps"] == [100, 300, 500, 510, 505]
    swings = iter(Chunk(x) for x in [100.0, 300.0] * 20)
    ok, report = steady_warmup(lambda _s: next(swings), 30)
    assert ok and not report["steady"] and report["warmup_s"] == 30
    ok, report = steady_warmup(lambda _s: None, 30)
    assert not ok

"""Issue 35: `plan` shows the experiment as it will run (the fixed parameters, one run's
driver command), what is stored and what is left, and names the file in its hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.commands import plan_view
from blocklab.execution.experiment import register
from blocklab.store import ResultsDB
from blocklab.store.base import RunRecord

EXAMPLES = Path(__file__).parents[2] / "examples"
PAGE_SIZE = EXAMPLES / "page-size.toml"


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))


def test_fixed_parameters_are_those_every_variant_shares() -> None:
    exp = spec.load(PAGE_SIZE)
    fixed = dict(plan_view.fixed_parameters(exp, exp.variants()))
    assert "data page" not in fixed  # page-size.toml varies it
    assert fixed["workload"] == "pgbench simple-update, query mode prepared"
    assert fixed["clients"] == "4" and fixed["threads"] == "2"
    assert fixed["warm-up"] == "5 s" and fixed["measured"] == "30 s"
    assert fixed["data"] == "pgbench -i -s 10 -F 100"


def test_driver_command_is_the_runners_argv_with_placeholders() -> None:
    exp = spec.load(PAGE_SIZE)
    ref = exp.variant(exp.reference_id())
    cmd = plan_view.driver_command(ref)
    assert cmd.startswith("BUILD/bin/pgbench -h SOCKET_DIR -p PORT -U USER -n")
    assert cmd.endswith("-b simple-update -M prepared -c 4 -j 2 -T 30 postgres")


def test_plan_prints_the_run_and_names_the_file_in_its_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["plan", str(PAGE_SIZE), "--results", str(tmp_path / "none")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "every variant: postgres 18 · WAL block 8 kB" in out
    assert "clients 4 · threads 2 · warm-up 5 s · measured 30 s" in out
    assert "one run (bs=8k): BUILD/bin/pgbench" in out
    assert f"run `blocklab plan {PAGE_SIZE} --pilot 3`" in out
    assert "stored:" not in out


def test_the_demos_hint_has_no_file() -> None:
    assert plan_view.command_for(spec.demo(), "--pilot", "3") == "blocklab plan --pilot 3"


def _store_runs(results: Path, rounds: int) -> int:
    exp = spec.load(PAGE_SIZE)
    n = 0
    with ResultsDB(results) as db:
        variants = register(db, exp, {"hostname": "test"})
        for rnd in range(1, rounds + 1):
            for pos, v in enumerate(variants):
                at = f"2026-01-01T00:{rnd:02d}:{pos:02d}"
                db.record_run(RunRecord(exp.name, v.variant_id, rnd, pos, "ok", at, at))
                n += 1
    return n


def test_plan_counts_stored_runs_and_times_only_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    assert _store_runs(results, 2) == 6
    assert main(["plan", str(PAGE_SIZE), "--results", str(results)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "stored: 6 of the 18 planned runs" in out and "runs 12" in out
    # 12 of 18 runs: 2/3 of the runs' 11 min 17 s
    assert "runs 7 min 31 s of the 12 runs not stored" in out


def test_plan_says_when_every_planned_run_is_stored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    _store_runs(results, 6)
    assert main(["plan", str(PAGE_SIZE), "--results", str(results)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "stored: 18 of the 18 planned runs" in out and "runs 0 s" in out
    assert (
        f"every planned run is stored: for more rounds, `blocklab plan {PAGE_SIZE} --rounds 12`"
        in out
    )

"""`blocklab run`, `summary` and `export` on bad input: exit code 2, a message naming
the flag or key and the allowed values, and nothing started or written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import blocklab_in_home as _blocklab

from blocklab.paths import Paths
from blocklab.state import State

BAD_SPECS = Path(__file__).parents[1] / "bad_specs"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--clients", "0"], "--clients: must be at least 1"),
        (["--duration", "0"], "--duration: must be at least 1"),
        (["--rounds", "0"], "--rounds: must be at least 1"),
        (["--scale", "-1"], "--scale: must be at least 1"),
        (["--until-ci", "0"], "--until-ci: a percentage between 0 and 100"),
        (["--time-budget", "soon"], "--time-budget: 'soon' is not a duration"),
        (["--clients", "many"], "'many' is not a valid integer"),
        (["no-such-file.toml"], "FILE: no experiment file at no-such-file.toml"),
        ([str(BAD_SPECS / "script_missing.toml")], "matrix.workload.scripts[0]: script file"),
        ([str(BAD_SPECS / "unknown_builtin.toml")], "matrix.workload"),
        ([str(BAD_SPECS / "clients_0.toml")], "matrix.clients"),
        ([str(BAD_SPECS / "duration_0.toml")], "matrix.duration"),
    ],
)
def test_bad_run_input_exits_2_and_starts_nothing(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    home = tmp_path / "home"
    results = tmp_path / "results"
    r = _blocklab("run", *args, "--results", str(results), home=home)
    assert r.returncode == 2, r.stdout + r.stderr
    assert fragment in r.stderr
    assert not results.exists()  # nothing half-written
    assert State(Paths(home, home / "cache", results).state_file).entries() == []


def test_an_override_never_collapses_a_dimension_the_file_varies(tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "examples" / "wal-block-clients.toml"
    results = tmp_path / "results"
    r = _blocklab("run", str(example), "--clients", "4", "--results", str(results), home=tmp_path)
    assert r.returncode == 2
    assert "--clients: " in r.stderr and "varies matrix.clients (1, 5, 10, 15)" in r.stderr
    assert not results.exists()


def test_overrides_make_a_smaller_experiment_of_its_own() -> None:
    from blocklab import experiment_file as spec

    example = Path(__file__).parents[2] / "examples" / "page-size.toml"
    exp = spec.load(example, {"scale": 1, "duration": 2})
    assert exp.name == "page-size-s1-d2" and len(exp.variants()) == 3
    assert {(v.dataset.scale, v.workload.duration_s) for v in exp.variants()} == {(1, 2)}
    assert spec.load(example).name == "page-size"


@pytest.mark.parametrize("command", [["summary"], ["export", "--csv", "out"]])
def test_reading_commands_on_a_missing_results_dir_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    r = _blocklab(*command, "--results", str(tmp_path / "nothing"), home=tmp_path)
    assert r.returncode == 2
    assert "--results" in r.stderr and "does not exist" in r.stderr


def test_summary_names_the_metrics_it_knows(tmp_path: Path) -> None:
    from report_fixture import write_synthetic_results

    results = tmp_path / "results"
    write_synthetic_results(results)
    r = _blocklab("summary", "--results", str(results), "--metric", "speed", home=tmp_path)
    assert r.returncode == 2
    assert "--metric: 'speed' names no stored metric" in r.stderr
    assert "wal_bytes_per_xact" in " ".join(r.stderr.split())  # the allowed, as labels and keys
    by_label = _blocklab(  # the label the summary prints is a name too (issue 35)
        "summary", "--results", str(results), "--metric", "WAL bytes per transaction", home=tmp_path
    )
    assert by_label.returncode == 0 and "WAL bytes per transaction (bytes) per" in by_label.stdout
    ok = _blocklab(
        "summary", "--results", str(results), "--metric", "wal_bytes_per_xact", home=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    assert "WAL bytes per transaction (bytes)" in ok.stdout


def test_export_writes_every_run_and_series_row(tmp_path: Path) -> None:
    from report_fixture import write_synthetic_results

    from blocklab.store import ResultsDB

    results = tmp_path / "results"
    write_synthetic_results(results)
    r = _blocklab(
        "export", "--csv", str(tmp_path / "csv"), "--results", str(results), home=tmp_path
    )
    assert r.returncode == 0, r.stderr
    with ResultsDB(results, create=False) as db:
        names = [e["name"] for e in db.experiments()]
        n_runs = sum(len(db.runs(n)) for n in names)
        n_points = sum(
            len(pts) for n in names for run in db.runs(n) for pts in db.series(run["id"]).values()
        )
    with open(tmp_path / "csv" / "runs.csv") as f:
        runs = list(csv.DictReader(f))
    with open(tmp_path / "csv" / "series.csv") as f:
        series = list(csv.DictReader(f))
    assert len(runs) == n_runs and len(series) == n_points
    assert {"build.block_size_kb", "storage.kind", "workload.clients", "tps"} <= set(runs[0])
    failed = [row for row in runs if row["status"] == "failed"]
    assert failed and all(row["tps"] == "" for row in failed)  # a failure is never a number

"""Every file in examples/ runs end to end: one round of 2-second runs at scale 1, with
real builds, servers, pgbench, sysbench, go-tpc and (fs-block-size) loop-device file
systems. `--scale 1` is each driver's smoke size (sysbench: at most 1,000 rows per table;
tpcc: 1 warehouse).

The issue 24 examples (PostgreSQL 18's I/O against the page size) are planned here, not
run: they need builds of their own (16 kB pages; lz4, zstd and liburing configured in)
that would lengthen CI a lot. They are run by hand; their figures are in
examples/README.md."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import prebuild
import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.paths import Paths
from blocklab.postgres import io_settings
from blocklab.store import ResultsDB

EXAMPLES_DIR = Path(__file__).parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.toml"))
SMOKE = {"scale": 1, "duration": 2}
# Planned in CI (test_issue24_example_plans), run by hand: their builds (16 kB pages;
# lz4, zstd, liburing) would lengthen the end-to-end run a lot. Figures: examples/README.md.
# name: (variants, needs root for its loop device and memory cgroup, asks for io_uring)
PLANNED_ONLY = {
    "pg18-aio-pagesize.toml": (9, True, True),
    "wal-compression-walblock.toml": (6, False, False),
    "checksums-pagesize.toml": (8, False, False),
}
RUN_END_TO_END = [p for p in EXAMPLES if p.name not in PLANNED_ONLY]
MAX_ETA_MIN = 30  # each example runs in under 30 min here


def test_every_example_is_covered() -> None:
    assert [p.name for p in EXAMPLES] == [
        "checksums-pagesize.toml",
        "fillfactor-footprint.toml",
        "fillfactor.toml",
        "fs-block-size.toml",
        "interleaved-pagesize.toml",
        "own-database-pagesize.toml",
        "page-size-device.toml",
        "page-size.toml",
        "pg18-aio-pagesize.toml",
        "seed002-tpch-pagesize.toml",
        "seed003-tpcc-fillfactor.toml",
        "seed004-sysbench-walblock.toml",
        "wal-block-clients.toml",
        "wal-compression-walblock.toml",
    ]
    assert len(RUN_END_TO_END) == len(EXAMPLES) - len(PLANNED_ONLY)


# Each example waits for the session's builds its matrix names (tests/conftest.py orders
# the tests by when tests/prebuild.py has made them).
END_TO_END = [
    pytest.param(p, id=p.stem, marks=pytest.mark.builds(*sorted(prebuild.example_geometries(p))))
    for p in RUN_END_TO_END
]


@pytest.mark.build
@pytest.mark.root
@pytest.mark.alongside(2)
@pytest.mark.skipif(os.geteuid() != 0, reason="fs-block-size needs loop devices (root)")
@pytest.mark.parametrize("example", END_TO_END)
def test_example_runs_end_to_end(example: Path, paths: Paths, tmp_path: Path) -> None:
    if example.name == "own-database-pagesize.toml":  # its dump is made, not kept in git
        _own_database_dump(paths)
    smoke = _smoke(example)
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "blocklab.cli", "run", str(example), "--rounds", "1", "-q"]
    argv += ["--results", str(results), *(f"--{k}={v}" for k, v in smoke.items())]
    argv += ["--allow", "scripts"]  # the owner's grant: wal-block-clients runs a script file
    started = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=dict(os.environ))
    took_s = time.monotonic() - started
    print(f"{example.name}: {took_s:.0f} s")  # shown with -s; the figure in the report
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    exp = spec.load(example, smoke)
    with ResultsDB(results, create=False) as db:
        runs = db.runs(exp.name)
    assert len(runs) == len(exp.variants())
    assert {run["status"] for run in runs} == {"ok"}, [run["reason"] for run in runs]
    assert f"{exp.name}: " in r.stdout  # the summary's title


def _smoke(example: Path) -> dict[str, int]:
    """The flags that shrink an example: SMOKE; an interleaved design's window is its
    slices, not a duration: 2 per variant per round (its file's 12 are a minute of
    clock-bound CPU that CI's builds need)."""
    if spec.load(example).run_design.kind == "interleaved":
        return {"scale": SMOKE["scale"], "slices": 2}
    return SMOKE


def _own_database_dump(paths: Paths) -> Path:
    """examples/own-database/app.dump, made by its script when missing."""
    path = EXAMPLES_DIR / "own-database" / "make_dump.py"
    module_spec = importlib.util.spec_from_file_location("make_dump", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return Path(module.ensure(paths))


PLANS = [
    pytest.param(n, id=Path(n).stem, marks=[pytest.mark.root] if PLANNED_ONLY[n][1] else [])
    for n in sorted(PLANNED_ONLY)
]


@pytest.mark.parametrize("name", PLANS)
def test_issue24_example_plans(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`blocklab plan` accepts the file (exit 0: builds, settings and this machine can run
    it), with the variants the README describes and an ETA under 30 min besides the builds."""
    variants, needs_root, asks_io_uring = PLANNED_ONLY[name]
    if needs_root and os.geteuid() != 0:
        pytest.skip(f"{name} plans loop devices and a memory cgroup (root)")
    kernel = io_settings.read_io_uring_refusal() if asks_io_uring else ""
    if kernel:
        pytest.skip(f"{name} asks for io_method = io_uring, which this kernel refuses: {kernel}")
    code = main(["plan", str(EXAMPLES_DIR / name)])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert f"{variants} variants" in out
    assert len(spec.load(EXAMPLES_DIR / name).variants()) == variants
    eta = re.search(r"ETA (\d+) min (\d+) s", out)
    assert eta, out[-2000:]  # "ETA 1 h 05 min" does not match: over an hour
    # the builds to make depend on what the cache holds (a fresh machine: all of them)
    builds = re.search(r"\(builds (\d+) min (\d+) s", out)
    builds_min = int(builds.group(1)) + int(builds.group(2)) / 60 if builds else 0.0
    assert int(eta.group(1)) + int(eta.group(2)) / 60 - builds_min < MAX_ETA_MIN, eta.group(0)

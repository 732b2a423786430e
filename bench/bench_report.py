"""Report generation at scale: 1,000 runs with 60-second series (SYNTHETIC data).

    .venv/bin/python bench/bench_report.py [--runs 1000] [--experiments 1] [--seconds 60]
        [--incremental [--updates N]] [--profile] [--unjudged] [--details real|synthetic]

Writes a temporary results database through ResultsDB (tests/report_fixture.py, made-up
numbers), each run's stationarity trends kept as the experiment loop keeps them when it
stores a run (with --unjudged, none: the report judges every run, as for a store filled
before the loop kept them, or copied from one), each run's provenance and settings a real
run's (recorded: tests/data/report/real_run_details.json, 12 kB and 399 settings; with
`--details synthetic`, a few dozen bytes, as before 2026-11-30), generates the site and
prints the time
and the page weight. With --incremental, then records one more run and updates the site
(only the pages that changed), and checks the update against a full rebuild. Removes it
all. Last, each figure against its goal (issue 33, for a fleet of 10,000 runs: `--runs
10000 --incremental`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from report_fixture import (  # noqa: E402
    add_synthetic_run,
    differing_files,
    write_synthetic_results,
)
from scratch_home import blocklab_argv  # noqa: E402

import blocklab  # noqa: E402
from blocklab import proc  # noqa: E402
from blocklab.report import SiteResult, build_site  # noqa: E402

# (figure, unit, goal) at fleet scale (10,000 runs): at or under its goal, a figure meets it
GOALS = (
    ("full build", "s", 10.0),
    ("one more run", "s", 1.0),  # in this process, imports and templates warm
    ("as a command", "s", 1.0),  # the same as `blocklab report` (a new process) waits for it
    # the same by a resident `blocklab report --watch --every 0.2`: from the commit of the
    # run to the end of the last update it caused, its polls' wait included (its
    # round recorded and updated for before, as the experiment loop records a round)
    ("watched", "s", 1.0),
    ("largest page", "MB", 1.0),
    ("site total", "MB", 100.0),
)

# 5 page sizes x 4 fs block sizes x 2 WAL block sizes = 40 variants.
MATRIX = {
    "block_sizes_kb": (2, 4, 8, 16, 32),
    "fs_block_sizes": (1024, 2048, 4096, 65536),
    "wal_block_sizes_kb": (8, 16),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--experiments", type=int, default=1, help="the runs split among them")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--incremental", action="store_true")
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the full generation (and the update)"
    )
    ap.add_argument(
        "--unjudged", action="store_true", help="no run's trends kept: the report judges them"
    )
    ap.add_argument(
        "--updates", type=int, default=1, help="updates of each kind measured (their median)"
    )
    ap.add_argument(
        "--details",
        choices=("real", "synthetic"),
        default="real",
        help="each run's provenance and settings: a real run's, or a few synthetic bytes",
    )
    args = ap.parse_args()
    real = args.details == "real"
    variants = 5 * 4 * 2
    rounds = max(1, args.runs // variants // args.experiments)
    tmp = Path(tempfile.mkdtemp(prefix="blocklab-bench-report-"))
    try:
        t0 = time.monotonic()
        for n in range(args.experiments):
            write_synthetic_results(
                tmp / "results",
                rounds=rounds,
                seconds=args.seconds,
                name=f"bench-{n}",
                seed=n,
                keep_trends=not args.unjudged,
                real_details=real,
                **MATRIX,
            )
        t1, c1, w1 = time.monotonic(), time.process_time(), _children_cpu_s()
        r = _build(tmp, profile_lines=30 if args.profile else 0)
        t2, c2, w2 = time.monotonic(), time.process_time(), _children_cpu_s()
        print(
            f"runs: {r.runs} ({args.experiments} experiment(s) x {variants} variants x "
            f"{rounds} rounds), {args.seconds} s series, {args.details} provenance and settings"
        )
        print(f"writing the synthetic results DB: {t1 - t0:.1f} s")
        print(
            f"generating the report: {t2 - t1:.1f} s ({c2 - c1:.1f} s CPU here, "
            f"{w2 - w1:.1f} s in its workers; load {os.getloadavg()[0]:.2f})"
        )
        print_weight(tmp / "site", r)
        figures = {
            "full build": t2 - t1,
            "largest page": r.largest_page_bytes / 1e6,
            "site total": r.total_bytes / 1e6,
        }
        if args.incremental:
            figures.update(
                incremental(
                    tmp,
                    args.seconds,
                    profile=args.profile,
                    judged=not args.unjudged,
                    updates=args.updates,
                    real=real,
                )
            )
        print_goals(figures, r.runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_weight(site: Path, r: SiteResult) -> None:
    """The site's weight by kind of file (the sizes are exact)."""
    assets = sum(p.stat().st_size for p in (site / "assets").iterdir())
    csvs = [*site.rglob("*.csv"), *site.rglob("*.csv.gz")]
    csv_bytes = sum(p.stat().st_size for p in csvs)
    mean_kb = r.html_bytes / r.pages / 1e3
    print(f"pages: {r.pages}, HTML {r.html_bytes / 1e6:.1f} MB (mean {mean_kb:.0f} kB)")
    run_pages = [p.stat().st_size for p in site.glob("e/*/runs/*.html")]
    if run_pages:
        mean = sum(run_pages) / len(run_pages) / 1e3
        print(f"run pages: {len(run_pages)}, {sum(run_pages) / 1e6:.1f} MB (mean {mean:.1f} kB)")
    print(f"largest page: {r.largest_page} {r.largest_page_bytes / 1e3:.0f} kB")
    shards = [p.stat().st_size for p in site.rglob("grid/*.js")]
    if shards:
        print(
            f"grid data scripts: {len(shards)}, {sum(shards) / 1e6:.1f} MB, largest "
            f"{max(shards) / 1e3:.0f} kB"
        )
    print(f"assets (plotly.min.js, css, js; loaded once): {assets / 1e6:.2f} MB")
    print(f"CSV downloads (.csv, .csv.gz): {csv_bytes / 1e6:.1f} MB")
    print(f"site total: {r.total_bytes / 1e6:.1f} MB")


def print_goals(figures: dict[str, float], runs: int) -> None:
    """Each figure measured against its goal (the goals are for 10,000 runs)."""
    print(f"against the goals for 10,000 runs (this site: {runs} runs):")
    for name, unit, goal in GOALS:
        if name not in figures:
            print(f"  {name:<13} not measured (--incremental)")
            continue
        value = figures[name]
        verdict = "meets" if value <= goal else "MISSES"
        print(f"  {name:<13} {value:8.2f} {unit:<2} goal <= {goal:g} {unit}: {verdict}")


def incremental(
    tmp: Path,
    seconds: int,
    *,
    profile: bool = False,
    judged: bool = True,
    updates: int = 1,
    real: bool = True,
) -> dict[str, float]:
    """`updates` times, alternately: one more run, then the update in this process
    (cProfiled the first time with `profile`); one more, updated by `blocklab report` in a
    new process. Then a full rebuild of the same data to compare. Returns both updates'
    median seconds (one figure on this shared machine is +-15 %)."""
    here, command = [], []
    env = _installed_env()
    start_up = _start_up_s(env)
    for k in range(updates):
        run_id = add_synthetic_run(
            tmp / "results", "bench-0", seconds=seconds, keep_trends=judged, real_details=real
        )
        t0, c0 = time.monotonic(), time.process_time()
        r = _build(tmp, profile_lines=40 if profile and k == 0 else 0)
        t1, c1 = time.monotonic(), time.process_time()
        here.append(t1 - t0)
        print(
            f"one more run (#{run_id}): update {t1 - t0:.2f} s ({c1 - c0:.2f} s CPU, load "
            f"{os.getloadavg()[0]:.2f}), {r.written} pages written, {r.kept} kept"
        )
        run_id = add_synthetic_run(
            tmp / "results", "bench-0", seconds=seconds, keep_trends=judged, real_details=real
        )
        cpu0 = _children_cpu_s()
        t2 = time.monotonic()
        subprocess.run(
            blocklab_argv("report", "--results", str(tmp / "results"), "--out", str(tmp / "site")),
            check=True, stdout=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        t3 = time.monotonic()
        command.append(t3 - t2)
        print(
            f"one more run (#{run_id}) by `blocklab report`, a new process: {t3 - t2:.2f} s "
            f"({_children_cpu_s() - cpu0:.2f} s CPU; of which start-up, the interpreter and "
            f"the modules the command imports, {start_up:.2f} s)"
        )
    watched = _watched(tmp, seconds, judged=judged, updates=updates, env=env, real=real)
    if updates > 1:
        print(
            f"medians of {updates}: update {statistics.median(here):.2f} s, as a command "
            f"{statistics.median(command):.2f} s, watched {statistics.median(watched):.2f} s"
        )
    full = build_site(tmp / "results", tmp / "full", full=True)
    print(f"full rebuild of the same data: {full.elapsed_s:.1f} s")
    differ = differing_files(tmp / "site", tmp / "full")
    if differ:
        print("differs:", differ[:20])
    print(f"update identical to the full rebuild: {not differ}")
    return {
        "one more run": statistics.median(here),
        "as a command": statistics.median(command),
        "watched": statistics.median(watched),
    }


def _watched(
    tmp: Path, seconds: int, *, judged: bool, updates: int, env: dict[str, str], real: bool
) -> list[float]:
    """`updates` times: one more run, and the seconds from its commit until a resident
    `blocklab report --watch --every 0.2` has printed its last update for it, once the
    watcher has printed none for QUIET_S seconds. The run's round is recorded first and
    the watcher's update for it waited out, as in the experiment loop, which records a
    round as it begins and its first run a run's length later; the run's kept trends are
    committed with its row, as the loop stores them. Before 2026-12-01 the round was
    recorded just before the run and the figure taken from the trends' commit to the
    first update after it, which could be the one the round's commit had begun: 0.00 s
    once, and two updates at other times."""
    log = tmp / "watch.out"
    argv = blocklab_argv("report", "--results", str(tmp / "results"), "--out", str(tmp / "site"))
    p = proc.spawn([*argv, "--watch", "--every", "0.2"], stdout_path=log, env=env)
    took = []
    try:
        _until(log, p, "watching", 1)
        for _ in range(updates):
            seen = [log.read_text().count("updated:")]

            def round_seen(seen: list[int] = seen) -> None:
                n, _ = _settled(log, p, seen[0])  # the round's own update, over
                seen[0] += n

            run_id = add_synthetic_run(  # returns right after the run's commit
                tmp / "results", "bench-0", seconds=seconds, keep_trends=judged,
                real_details=real, round_recorded=round_seen,
            )  # fmt: skip
            t0 = time.monotonic()
            n, last = _settled(log, p, seen[0])
            took.append(last - t0)
            print(
                f"one more run (#{run_id}) watched: {took[-1]:.2f} s from its commit to "
                f"the last of {n} update(s)"
            )
    finally:
        proc.terminate(p.pid)
    return took


QUIET_S = 2.0  # longer than a poll (0.2 s) and an update after it


def _settled(log: Path, p: subprocess.Popen[bytes], seen: int) -> tuple[int, float]:
    """Wait until the watcher has printed more than `seen` updates and then none for
    QUIET_S seconds; returns how many more, and when the last was seen (looked for every
    10 ms)."""
    count, last = seen, time.monotonic()
    while count == seen or time.monotonic() - last < QUIET_S:
        if p.poll() is not None:
            raise SystemExit(f"the watcher ended ({p.returncode}):\n{log.read_text()}")
        time.sleep(0.01)
        now = log.read_text().count("updated:")
        if now != count:
            count, last = now, time.monotonic()
    return count - seen, last


def _until(log: Path, p: subprocess.Popen[bytes], word: str, n: int) -> None:
    """Wait until the watcher has printed `word` `n` times (looked for every 10 ms)."""
    while log.read_text().count(word) < n:
        if p.poll() is not None:
            raise SystemExit(f"the watcher ended ({p.returncode}):\n{log.read_text()}")
        time.sleep(0.01)


def _installed_env() -> dict[str, str]:
    """The environment of a `blocklab` command as an installed blocklab runs: its modules'
    bytecode compiled beside them (pip compiles a package it installs; __pycache__ is
    ignored by git), whatever PYTHONDONTWRITEBYTECODE says in this one."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    package = str(Path(blocklab.__file__).parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, env=env)
    return env


def _start_up_s(env: dict[str, str], times: int = 3) -> float:
    """The least time the interpreter takes to import what `blocklab report` imports
    before any work (the command line, the command, the site's generation; since
    2026-12-01 `blocklab report --help` no longer imports the last)."""
    imports = "import blocklab.cli, blocklab.commands.report, blocklab.report.site"
    best = float("inf")
    for _ in range(times):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-P", "-c", imports], check=True, env=env)
        best = min(best, time.monotonic() - t0)
    return best


def _build(tmp: Path, *, profile_lines: int = 0) -> SiteResult:
    """build_site of the bench's results into its site; with `profile_lines`, cProfiled
    and that many lines of the profile printed (cumulative time)."""
    prof = cProfile.Profile() if profile_lines else None
    if prof:
        prof.enable()
    r = build_site(tmp / "results", tmp / "site")
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(profile_lines)
    return r


def _children_cpu_s() -> float:
    """User and system CPU seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


if __name__ == "__main__":
    main()

"""pgbench parsers against recorded real outputs (tests/data/pgbench, see README there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.errors import UserError
from blocklab.model import WorkloadRequest
from blocklab.paths import Paths, ensure_dir
from blocklab.postgres.cluster import server_user
from blocklab.postgres.installation import Installation
from blocklab.workloads import pgbench
from blocklab.workloads.pgbench import verdict

DATA = Path(__file__).parents[1] / "data" / "pgbench"
TAGS = sorted({p.name.split("-", 1)[0] for p in DATA.glob("*-simple-update-prepared.stdout")})


def read(name: str) -> str:
    return (DATA / name).read_text()


def exit_code(tag: str, name: str) -> int:
    return int(read(f"{tag}-{name}.exitcode").strip())


def test_recordings_exist_for_pg15() -> None:
    assert "pg15" in TAGS


@pytest.mark.parametrize("tag", TAGS)
def test_report_of_a_clean_run(tag: str) -> None:
    out = read(f"{tag}-simple-update-prepared.stdout")
    r = pgbench.parse_report(out)
    tps_line = next(line for line in out.splitlines() if line.startswith("tps = "))
    assert r.tps == float(tps_line.split()[2])
    assert r.tps is not None and r.tps > 0
    assert r.transactions is not None and r.transactions > 0
    assert r.failed_transactions == 0
    assert r.latency_avg_ms is not None and r.latency_avg_ms > 0
    assert r.latency_stddev_ms is not None and r.latency_stddev_ms >= 0
    assert (r.scaling_factor, r.query_mode, r.clients, r.threads, r.duration_s) == (
        1,
        "prepared",
        4,
        1,
        5,
    )
    assert r.initial_connection_ms is not None
    assert r.version is not None and r.version.startswith(tag.removeprefix("pg"))
    assert exit_code(tag, "simple-update-prepared") == 0


@pytest.mark.parametrize("tag", TAGS)
def test_progress_lines(tag: str) -> None:
    rows = pgbench.parse_progress(read(f"{tag}-simple-update-prepared.stderr"))
    assert [r.t_s for r in rows] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(r.tps > 0 and r.latency_ms is not None and r.failed == 0 for r in rows)


def test_progress_line_format() -> None:
    rows = pgbench.parse_progress(
        "starting vacuum...end.\n"
        "progress: 1.0 s, 1234.5 tps, lat 3.2 ms stddev 1.1, 0 failed\n"
        "progress: 2.0 s, 0.0 tps, lat NaN ms stddev NaN, 0 failed\n"
        "progress: 3.0 s, 10.0 tps, lat 3.000 ms stddev 1.100, 2 failed, 1 retried, 3 retries\n"
    )
    assert rows[0] == pgbench.ProgressLine(1.0, 1234.5, 3.2, 1.1, 0)
    assert rows[1].tps == 0.0 and rows[1].latency_ms is None
    assert rows[2].failed == 2
    assert len(rows) == 3


@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("name", ["simple-update-prepared", "tpcb-extended-j2"])
def test_progress_series_covers_the_run(tag: str, name: str) -> None:
    report = pgbench.parse_report(read(f"{tag}-{name}.stdout"))
    series = pgbench.series_from_progress(pgbench.parse_progress(read(f"{tag}-{name}.stderr")))
    assert report.duration_s is not None and report.transactions is not None
    assert [t for t, _ in series["tps"]] == [float(i) for i in range(1, report.duration_s + 1)]
    total = sum(v or 0 for _, v in series["tps"])
    assert abs(total - report.transactions) <= 0.01 * report.transactions + report.duration_s


@pytest.mark.parametrize("tag", TAGS)
def test_aggregate_log(tag: str) -> None:
    rows = pgbench.parse_aggregate_log(read(f"{tag}-simple-update-prepared.agg0"))
    starts = [r.interval_start for r in rows]
    assert starts == list(range(starts[0], starts[0] + len(rows)))  # consecutive seconds
    assert 3 <= len(rows) <= 6  # -T 5; pgbench loses the last interval(s), see pgbench.py
    report = pgbench.parse_report(read(f"{tag}-simple-update-prepared.stdout"))
    assert report.transactions is not None
    logged = sum(r.num_transactions for r in rows)
    assert 0 < logged <= report.transactions
    for r in rows:
        assert r.min_latency_us <= (r.latency_avg_ms or 0) * 1000 <= r.max_latency_us
        assert r.failures == 0


@pytest.mark.parametrize("tag", TAGS)
def test_threads_are_merged_interval_by_interval(tag: str) -> None:
    files = sorted(DATA.glob(f"{tag}-tpcb-extended-j2.agg*"))
    assert len(files) == 2
    per_thread = [pgbench.parse_aggregate_log(p.read_text()) for p in files]
    merged = pgbench.merge_aggregates(per_thread)
    assert sum(r.num_transactions for r in merged) == sum(
        r.num_transactions for rows in per_thread for r in rows
    )
    first = {rows[0].interval_start: rows[0] for rows in per_thread}
    t0 = merged[0].interval_start
    assert merged[0].min_latency_us == min(
        r[0].min_latency_us for r in per_thread if r[0].interval_start == t0
    )
    assert t0 in first
    series = pgbench.series_from_aggregates(merged)
    assert [t for t, _ in series["tps"]] == [float(i) for i in range(len(merged))]
    assert series["tps"][0][1] == merged[0].num_transactions


@pytest.mark.parametrize("tag", TAGS)
def test_aborted_run_prints_a_report_but_is_never_a_result(tag: str) -> None:
    out, err = read(f"{tag}-aborted.stdout"), read(f"{tag}-aborted.stderr")
    code = exit_code(tag, "aborted")
    assert code == 2
    report = pgbench.parse_report(out)
    assert report.tps is not None  # the trap: a full-looking report
    errors = pgbench.parse_errors(err)
    assert any("aborted" in e for e in errors)
    reason = verdict(code, report, server_alive=False, errors=errors)
    assert "exit code 2" in reason and "server died" in reason


def test_verdict_accepts_only_clean_runs() -> None:
    ok = pgbench.parse_report(read("pg15-simple-update-prepared.stdout"))
    assert verdict(0, ok, server_alive=True) == ""
    assert "failed transactions" in verdict(
        0, _replace(ok, failed_transactions=3), server_alive=True
    )
    assert "no tps" in verdict(0, pgbench.parse_report(""), server_alive=True)
    assert "died" in verdict(0, ok, server_alive=False)


def _replace(r: pgbench.PgbenchReport, **kw: object) -> pgbench.PgbenchReport:
    from dataclasses import replace

    return replace(r, **kw)  # type: ignore[arg-type]


def test_command_line() -> None:
    inst = Installation.system(15)
    target = pgbench.Target("/s", 5433, "blocklab")
    w = WorkloadRequest(builtin="tpcb-like", query_mode="extended", clients=8, threads=2)
    argv = pgbench.command(inst, target, w, log_prefix=Path("/r/pgbench_log"))
    assert argv[0] == str(inst.bin("pgbench"))
    joined = " ".join(argv)
    for part in (
        "-h /s -p 5433 -U blocklab",
        "-n",
        "-P 1",
        "-l --sampling-rate=0.1 --log-prefix=/r/pgbench_log",  # percentiles need lines
        "-b tpcb-like",
        "-M extended -c 8 -j 2 -T 10",
    ):
        assert part in joined
    assert argv[-1] == "postgres"
    assert not any(a.startswith("--aggregate-interval") for a in argv)  # pgbench refuses both
    warm = pgbench.command(inst, target, w, log_prefix=None, duration_s=3, progress=False)
    assert "-l" not in warm and "-P" not in warm and warm[warm.index("-T") + 1] == "3"


def test_custom_script_must_exist(paths: Paths) -> None:
    script = ensure_dir(paths.home / "scripts") / "x.sql"  # pytest's tmp_path is 0700
    script.write_text("SELECT 1;\n")
    w = WorkloadRequest(builtin=None, scripts=(f"{script}@3",))
    assert pgbench.script_args(w) == ["-f", f"{script}@3"]
    with pytest.raises(UserError, match="does not exist"):
        pgbench.script_args(WorkloadRequest(builtin=None, scripts=(str(script.parent / "no.sql"),)))


def test_a_script_the_driver_user_cannot_read_is_refused(paths: Paths, tmp_path: Path) -> None:
    """pgbench runs as the server's unprivileged user: a script it could not open is
    refused naming the key, not left to fail inside the run."""
    server_user()  # made when missing
    closed = ensure_dir(paths.home / "closed" / tmp_path.name)
    closed.chmod(0o700)  # root's, closed to others
    hidden = closed / "x.sql"
    hidden.write_text("SELECT 1;\n")
    with pytest.raises(UserError, match=r"workload.scripts: .*cannot enter .*chmod o\+r"):
        pgbench.script_args(WorkloadRequest(builtin=None, scripts=(str(hidden),)))
    unreadable = ensure_dir(paths.home / "scripts") / f"secret-{tmp_path.name}.sql"
    unreadable.write_text("SELECT 1;\n")
    unreadable.chmod(0o600)
    with pytest.raises(UserError, match=r"may not read it \(mode 0600\)"):
        pgbench.script_args(WorkloadRequest(builtin=None, scripts=(str(unreadable),)))


def test_log_files_are_found_per_thread(tmp_path: Path) -> None:
    for name in ("pgbench_log.123", "pgbench_log.123.1", "pgbench_log.123.10", "other.1"):
        (tmp_path / name).write_text("")
    found = [p.name for p in pgbench.log_files(tmp_path / "pgbench_log")]
    assert found == ["pgbench_log.123", "pgbench_log.123.1", "pgbench_log.123.10"]

"""The fleet (blocklab.fleet) against a real PostgreSQL server as the shared results
database and queue (Debian's postgresql-15, private socket, a role with a password), and
agents as real subprocesses, each with its own BLOCKLAB_HOME and host name, sharing the
build cache. Tiny experiments: scale 1, 1 s runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_results import SECRET, _pwuser_uris

from blocklab.fleet.hosts import parse_hosts, plan_jobs
from blocklab.fleet.status import eta_s, fmt_eta
from blocklab.paths import ensure_dir
from blocklab.postgres.cluster import Cluster
from blocklab.store.factory import open_store

pytestmark = pytest.mark.build


def _toml(name: str, rounds: int = 2, duration_s: int = 1) -> str:
    return (
        f'[experiment]\nname = "{name}"\nrounds = {rounds}\nseed = 7\n'
        'reference = "bs=8k"\n[matrix]\n'
        'postgres = "18"\nblock_size = [4, 8]\nwal_block_size = 8\nscale = 1\n'
        f"clients = 1\nduration = {duration_s}\nwarmup = 0\n"
    )


def _blocklab(
    *args: str, env: dict[str, str], timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blocklab.cli", *args],
        capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **env},
    )  # fmt: skip


@pytest.fixture
def fleet_db(pg_server: Cluster, pg_uri: str) -> dict[str, str]:  # noqa: F811
    """The environment of every fleet command: the URI with its password in
    BLOCKLAB_RESULTS (never on a command line)."""
    with_pw, _ = _pwuser_uris(pg_server, pg_uri)
    return {"BLOCKLAB_RESULTS": with_pw}


class Agents:
    """`blocklab agent` subprocesses, each with a BLOCKLAB_HOME of its own; killed by PID
    (and their leftovers released by a last agent run) whatever happens."""

    def __init__(self, env: dict[str, str], base: Path):
        self.env, self.base = env, base
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, list[Path]] = {}

    def start(self, host: str, *extra: str) -> subprocess.Popen[str]:
        home = ensure_dir(self.base / f"home-{host}")
        log = self.base / f"agent-{host}-{len(self.logs.get(host, []))}.log"
        self.logs.setdefault(host, []).append(log)
        env = {**os.environ, **self.env, "BLOCKLAB_HOME": str(home)}
        p = subprocess.Popen(
            [sys.executable, "-m", "blocklab.cli", "agent", "--host", host, *extra],
            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        self.procs[host] = p
        return p

    def output(self, host: str) -> str:
        return "".join(p.read_text() for p in self.logs.get(host, []))

    def wait(self, host: str, timeout_s: float) -> int:
        return self.procs[host].wait(timeout=timeout_s)

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)


@pytest.fixture
def agents(fleet_db: dict[str, str]) -> Iterator[Agents]:
    base = ensure_dir(Path("/var/tmp/blocklab-tests") / f"fleet-{uuid.uuid4().hex[:8]}")
    a = Agents(fleet_db, base)
    try:
        yield a
    finally:
        a.kill_all()
        for host in list(a.procs):  # jobs left by a failed test cancelled; a killed
            _blocklab("fleet", "cancel", "--host", host, env=fleet_db)  # agent's servers
            a.start(host, "--until-idle")  # and mounts released by an agent with no job
            a.wait(host, 120)
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def _runs(env: dict[str, str], experiment: str) -> list[Any]:
    with open_store(env["BLOCKLAB_RESULTS"]) as db:
        return list(db.runs(experiment))


def test_two_hosts_end_to_end(
    agents: Agents, fleet_db: dict[str, str], tmp_path: Path, pg18_4k: Any, pg18_8k: Any
) -> None:
    spec = tmp_path / "fleet2.toml"
    spec.write_text(_toml("fleet2"))
    sub = _blocklab("fleet", "submit", str(spec), "--hosts", "alpha,beta", env=fleet_db)
    assert sub.returncode == 0, sub.stderr
    assert "4 jobs queued" in sub.stdout
    again = _blocklab("fleet", "submit", str(spec), "--hosts", "alpha,beta", env=fleet_db)
    assert "0 jobs queued, 4 already queued" in again.stdout, again.stdout + again.stderr
    t0 = time.monotonic()
    procs = [agents.start(h, "--until-idle") for h in ("alpha", "beta")]
    cmdlines = [Path(f"/proc/{p.pid}/cmdline").read_bytes() for p in procs]
    assert agents.wait("alpha", 600) == 0, agents.output("alpha")
    assert agents.wait("beta", 600) == 0, agents.output("beta")
    wall_s = time.monotonic() - t0
    runs = _runs(fleet_db, "fleet2")
    keys = sorted((r["host"], r["variant_id"], r["round"]) for r in runs)
    assert len(keys) == 8 and len(set(keys)) == 8, agents.output("alpha") + agents.output("beta")
    assert {r["host"] for r in runs} == {"alpha", "beta"}
    assert all(r["status"] == "ok" and r["tps"] > 0 for r in runs), [r["reason"] for r in runs]
    for host in ("alpha", "beta"):  # each host's raw files in its own home
        assert all(f"home-{host}" in r["raw_dir"] for r in runs if r["host"] == host)
    status = _blocklab("fleet", "status", env=fleet_db)
    assert status.returncode == 0, status.stderr
    lines = [ln for ln in status.stdout.splitlines() if "fleet2" in ln]
    assert len(lines) == 2 and all(" 2 " in ln and "done" in ln for ln in lines), status.stdout
    summary = _blocklab("summary", env=fleet_db)
    assert summary.returncode == 0, summary.stderr
    assert "fleet2 @ host alpha" in summary.stdout and "fleet2 @ host beta" in summary.stdout
    site = tmp_path / "site"
    report = _blocklab("report", "--out", str(site), env=fleet_db)
    assert report.returncode == 0, report.stderr
    index = (site / "index.html").read_text()
    assert "fleet2 @ alpha" in index and "fleet2 @ beta" in index
    compare = (site / "compare.html").read_text()  # both hosts offered on one colour scale
    assert "fleet2 @ alpha" in compare and "fleet2 @ beta" in compare
    # the password: never on a command line, in output, raw files or the report
    everything = b"".join(cmdlines) + (agents.output("alpha") + agents.output("beta")).encode()
    everything += sub.stdout.encode() + status.stdout.encode() + summary.stdout.encode()
    everything += b"".join(p.read_bytes() for p in site.rglob("*") if p.is_file())
    for r in runs:
        everything += b"".join(p.read_bytes() for p in Path(r["raw_dir"]).rglob("*") if p.is_file())
    assert SECRET.encode() not in everything
    print(f"two-host fleet wall time: {wall_s:.1f} s")


ASSIGNED = """
[fleet.hosts]
alpha = { clients = 1 }
beta = { clients = 2 }
"""


def test_fleet_hosts_table_assigns_variants_to_hosts(
    agents: Agents, fleet_db: dict[str, str], tmp_path: Path, pg18_4k: Any, pg18_8k: Any
) -> None:
    """[fleet.hosts] in the file: each host runs its selection and the references, no
    --hosts needed; a pair never spans hosts."""
    spec = tmp_path / "assigned.toml"
    text = _toml("assigned", rounds=1).replace(
        'reference = "bs=8k"', "reference = { block_size = 8 }"
    )
    spec.write_text(text.replace("clients = 1\n", "clients = [1, 2]\n") + ASSIGNED)
    sub = _blocklab("fleet", "submit", str(spec), env=fleet_db)
    assert sub.returncode == 0, sub.stderr
    assert "on 2 hosts (alpha, beta); 2 jobs queued" in sub.stdout, sub.stdout
    assert "alpha: bs=4k c=1, bs=8k c=1" in " ".join(sub.stdout.split()), sub.stdout
    for h in ("alpha", "beta"):
        agents.start(h, "--until-idle")
    for h in ("alpha", "beta"):
        assert agents.wait(h, 600) == 0, agents.output(h)
    with open_store(fleet_db["BLOCKLAB_RESULTS"]) as db:
        runs = list(db.runs("assigned"))
        labels = {v["variant_id"]: v["label"] for v in db.variants("assigned")}
    got = sorted((r["host"], labels[r["variant_id"]]) for r in runs)
    assert got == [
        ("alpha", "bs=4k c=1"), ("alpha", "bs=8k c=1"),
        ("beta", "bs=4k c=2"), ("beta", "bs=8k c=2"),
    ], got  # fmt: skip
    assert all(r["status"] == "ok" for r in runs), [r["reason"] for r in runs]
    summary = _blocklab("summary", env=fleet_db)
    assert summary.returncode == 0, summary.stderr
    assert "assigned @ host alpha" in summary.stdout and "assigned @ host beta" in summary.stdout
    only_alpha = _blocklab("fleet", "submit", str(spec), "--hosts", "alpha", env=fleet_db)
    assert only_alpha.returncode == 2, only_alpha.stdout
    assert "no host of alpha runs 'bs=4k c=2', 'bs=8k c=2'" in " ".join(only_alpha.stderr.split())
    # beta does not run alpha's share: alpha's rounds cannot become beta's
    moved = _blocklab("fleet", "move", "--from", "alpha", "--to", "beta", env=fleet_db)
    assert moved.returncode == 2, moved.stdout
    assert "--to: beta does not run" in moved.stderr and "'bs=4k c=1'" in moved.stderr


def test_agent_sigkilled_mid_job_ends_with_exactly_the_planned_runs(
    agents: Agents, fleet_db: dict[str, str], tmp_path: Path, pg18_4k: Any, pg18_8k: Any
) -> None:
    spec = tmp_path / "killed.toml"
    spec.write_text(_toml("killed", rounds=2, duration_s=3))
    sub = _blocklab("fleet", "submit", str(spec), "--hosts", "gamma", env=fleet_db)
    assert sub.returncode == 0, sub.stderr
    agent = agents.start("gamma")
    deadline = time.monotonic() + 300
    while not _runs(fleet_db, "killed"):  # the first run is stored: the second is going
        assert agent.poll() is None and time.monotonic() < deadline, agents.output("gamma")
        time.sleep(0.2)
    time.sleep(1.5)
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait(30)
    stored = len(_runs(fleet_db, "killed"))
    assert 1 <= stored < 4
    agents.start("gamma", "--until-idle")
    assert agents.wait("gamma", 600) == 0, agents.output("gamma")
    assert "its agent died; retrying it" in agents.output("gamma")
    runs = _runs(fleet_db, "killed")
    keys = sorted((r["variant_id"], r["round"]) for r in runs)
    assert len(keys) == 4 and len(set(keys)) == 4 and {k[1] for k in keys} == {1, 2}
    assert all(r["status"] == "ok" for r in runs), [r["reason"] for r in runs]


def test_a_job_failing_twice_is_failed_with_its_reason_and_the_rest_goes_on(
    agents: Agents, fleet_db: dict[str, str], tmp_path: Path, pg18_4k: Any, pg18_8k: Any
) -> None:
    for name in ("broken", "fine"):
        (tmp_path / f"{name}.toml").write_text(_toml(name, rounds=1))
        sub = _blocklab(
            "fleet", "submit", str(tmp_path / f"{name}.toml"), "--hosts", "delta", env=fleet_db
        )
        assert sub.returncode == 0, sub.stderr
    with psycopg.connect(fleet_db["BLOCKLAB_RESULTS"], autocommit=True) as conn:  # a spec
        conn.execute(  # that cannot be read any more: the same failure on every attempt
            "UPDATE blocklab_fleet_experiments SET spec_text = 'not [toml' WHERE name='broken'"
        )
    agents.start("delta", "--until-idle")
    assert agents.wait("delta", 600) == 0, agents.output("delta")
    assert len(_runs(fleet_db, "fine")) == 2 and not _runs(fleet_db, "broken")
    status = _blocklab("fleet", "status", env=fleet_db)
    line = next(ln for ln in status.stdout.splitlines() if "broken" in ln and "│" in ln)
    assert " 1 " in line  # one failed job
    assert "failed on delta (broken) round 1: UserError" in status.stdout
    assert "not valid TOML" in status.stdout


def test_cancel_move_and_a_vanished_host(fleet_db: dict[str, str], tmp_path: Path) -> None:
    spec = tmp_path / "moving.toml"
    spec.write_text(_toml("moving", rounds=3))
    sub = _blocklab("fleet", "submit", str(spec), "--hosts", "a1,b1", env=fleet_db)
    assert sub.returncode == 0, sub.stderr
    with psycopg.connect(fleet_db["BLOCKLAB_RESULTS"], autocommit=True) as conn:
        conn.execute(  # a1's agent was seen a minute ago and not since
            "INSERT INTO blocklab_fleet_agents VALUES ('a1', 1, now() - interval '2 min', "
            "now() - interval '1 min')"
        )
    status = _blocklab("fleet", "status", env=fleet_db)
    assert "host a1 has vanished with 3 jobs left" in status.stdout, status.stdout
    moved = _blocklab("fleet", "move", "--from", "a1", "--to", "b1", env=fleet_db)
    assert moved.returncode == 0 and "3 jobs moved from a1 to b1" in moved.stdout, moved.stderr
    with psycopg.connect(fleet_db["BLOCKLAB_RESULTS"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT queue_name, status::text, (args->>'round_no')::int FROM procrastinate_jobs"
        ).fetchall()
    b1 = sorted(r for q, s, r in rows if q == "blocklab:b1" and s == "todo")
    assert b1 == [1, 2, 3, 4, 5, 6]  # a1's rounds become b1's rounds 4-6, never a1's
    assert sorted(s for q, s, _ in rows if q == "blocklab:a1") == ["cancelled"] * 3
    cancel = _blocklab("fleet", "cancel", "--host", "b1", env=fleet_db)
    assert "6 jobs cancelled" in cancel.stdout, cancel.stderr


def test_bad_input_is_exit_2_before_anything(fleet_db: dict[str, str], tmp_path: Path) -> None:
    spec = tmp_path / "x.toml"
    spec.write_text(_toml("x"))
    cases = [
        (["--hosts", ""], "--hosts"),
        (["--hosts", "a,,b"], "--hosts"),
        (["--hosts", "a,a"], "given twice"),
        (["--hosts", "a b"], "not a host name"),
        (["--hosts", "a", "--results", str(tmp_path / "r")], "SQLite"),
        (["--hosts", "a", "--rounds", "0"], "--rounds"),
        ([], "--hosts: give host names"),  # no --hosts and no [fleet.hosts] table
    ]
    for args, message in cases:
        r = _blocklab("fleet", "submit", str(spec), *args, env=fleet_db)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    r = _blocklab("agent", "--host", "a", "--results", str(tmp_path / "r"), env=fleet_db)
    assert r.returncode == 2 and "SQLite" in r.stderr
    remote = {"BLOCKLAB_RESULTS": "postgresql://u@db.example.org/r"}
    r = _blocklab("agent", "--host", "a", env=remote)
    assert r.returncode == 2 and "without TLS" in r.stderr
    with psycopg.connect(fleet_db["BLOCKLAB_RESULTS"]) as conn:  # nothing was created
        assert conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone() == (None,)


def test_pure_parts() -> None:
    assert parse_hosts("a, b.example,c-1") == ["a", "b.example", "c-1"]
    jobs = plan_jobs("e", ["a", "b"], 2, {"a": {1}})
    assert [(j.host, j.round_no) for j in jobs] == [("b", 1), ("a", 2), ("b", 2)]
    assert eta_s(0, []) == 0 and eta_s(3, []) is None and eta_s(3, [10.0, 20.0, 30.0]) == 60
    assert (
        fmt_eta(3725) == "1 h 02 min" and fmt_eta(75) == "1 min 15 s" and fmt_eta(None) == "unknown"
    )


def test_an_agent_refuses_a_queued_job_its_owner_did_not_allow(
    agents: Agents, fleet_db: dict[str, str], tmp_path: Path
) -> None:
    """The trust boundary through a real queue: a job asks for a shell command in a
    setting (archive_command touching a canary) and says it is allowed; the agent, started
    without --allow, records the job's failure naming the key and the class, runs nothing,
    and the canary never appears. Then the submitter rewrites the queued spec in place (a
    queue writer is no owner either): the same refusal."""
    canary = tmp_path / "canary"
    spec = tmp_path / "asks.toml"
    spec.write_text(
        _toml("asks", rounds=1).replace("seed = 7\n", "seed = 7\nallow_commands = true\n")
        + f'[matrix.settings]\narchive_mode = "on"\narchive_command = "touch {canary}"\n'
    )
    sub = _blocklab("fleet", "submit", str(spec), "--hosts", "owner1", env=fleet_db)
    assert sub.returncode == 0, sub.stderr
    assert "its agents need --allow commands" in sub.stdout
    agents.start("owner1", "--until-idle")
    assert agents.wait("owner1", 300) == 0, agents.output("owner1")
    assert not _runs(fleet_db, "asks") and not canary.exists()
    status = _blocklab("fleet", "status", env=fleet_db)
    assert "failed on owner1 (asks)" in status.stdout, status.stdout
    assert "archive_command" in status.stdout and "--allow commands" in status.stdout

    (tmp_path / "plain.toml").write_text(_toml("plain", rounds=1))
    sub = _blocklab(
        "fleet", "submit", str(tmp_path / "plain.toml"), "--hosts", "owner2", env=fleet_db
    )
    assert sub.returncode == 0, sub.stderr
    with psycopg.connect(fleet_db["BLOCKLAB_RESULTS"], autocommit=True) as conn:
        conn.execute(
            "UPDATE blocklab_fleet_experiments SET spec_text = %s WHERE name = 'plain'",
            (spec.read_text().replace('name = "asks"', 'name = "plain"'),),
        )
    agents.start("owner2", "--until-idle")
    assert agents.wait("owner2", 300) == 0, agents.output("owner2")
    assert not _runs(fleet_db, "plain") and not canary.exists()
    status = _blocklab("fleet", "status", env=fleet_db)
    assert "failed on owner2 (plain)" in status.stdout, status.stdout

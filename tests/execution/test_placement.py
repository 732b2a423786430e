"""CPU placement (blocklab.execution.placement): the decision, validation, and a real pgbench run
against a real server whose processes are placed and watched through /proc."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import running_cluster

from blocklab import proc
from blocklab.errors import UserError
from blocklab.execution import placement
from blocklab.paths import Paths


def test_parse_and_format_cpu_lists() -> None:
    assert placement.parse_cpu_list("0-2,5,7-8\n") == [0, 1, 2, 5, 7, 8]
    assert placement.format_cpu_list([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"
    for bad in ("", "a", "3-1", "1-x"):
        with pytest.raises(UserError, match="placement.driver_cpus"):
            placement.parse_cpu_list(bad, key="placement.driver_cpus")


def test_parse_proc_status_and_stat() -> None:
    status = (
        "Name:\tpostgres\nCpus_allowed:\t1\nCpus_allowed_list:\t0\nMems_allowed:\t1\n"
        "voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t12\n"
    )
    assert placement.parse_allowed_list(status) == [0]
    assert placement.parse_context_switches(status) == 162
    # field 2 may hold spaces and parentheses; field 39 (processor) is 1 here
    fields_after = ["S"] + [str(i) for i in range(4, 39)] + ["1"] + ["0"] * 13
    stat = "4242 (postgres: x (y) z) " + " ".join(fields_after)
    assert placement.parse_last_cpu(stat) == 1
    own = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert placement.parse_last_cpu(own) in placement.machine_cpus()


def test_decide_on_two_cpus_and_on_one() -> None:
    two = placement.decide([0, 1])
    assert two.placement == placement.Placement((1,), (0,))
    four = placement.decide([0, 1, 2, 3])
    assert four.placement == placement.Placement((3,), (0, 1, 2))
    one = placement.decide([0])
    assert one.placement is None and "cannot have a CPU of its own" in one.reason


def test_cpus_the_machine_does_not_have_are_a_user_error() -> None:
    have = placement.machine_cpus()
    missing = max(have) + 7
    with pytest.raises(UserError) as e:
        placement.from_lists(str(missing), str(have[0]), have)
    msg = str(e.value)
    assert "placement.driver_cpus" in msg and str(missing) in msg
    assert f"allowed CPUs: {placement.format_cpu_list(have)}" in msg
    with pytest.raises(UserError, match="placement.server_cpus"):
        placement.validate(placement.Placement((have[0],), ()), have)


def test_a_placement_the_kernel_refuses_is_reported() -> None:
    # a CPU that does not exist: sched_setaffinity fails, and the failure comes back
    sleeper = proc.spawn(["sleep", "30"], stdout_path=Path("/dev/null"))
    try:
        applied = placement.apply_to_tree(sleeper.pid, [max(placement.machine_cpus()) + 64])
        assert applied and not any(a.ok for a in applied)
        lines = placement.failures(applied)
        assert lines and f"pid {sleeper.pid}" in lines[0] and "Invalid argument" in lines[0]
    finally:
        proc.terminate(sleeper.pid, grace_s=2)


@pytest.mark.build
@pytest.mark.root
def test_real_pgbench_run_records_the_cpus_each_process_ran_on(
    paths: Paths,
    pg18_8k,  # type: ignore[no-untyped-def]
) -> None:
    decision = placement.decide(placement.machine_cpus())
    assert decision.placement is not None, decision.reason
    where = decision.placement
    with running_cluster(paths, pg18_8k, "placement", {}) as c:
        assert c.pid is not None
        postmaster = c.pid
        pgbench = str(pg18_8k.bin("pgbench"))
        proc.run([pgbench, *c.conn_args(), "-i", "-s", "1", "-q", "postgres"])
        applied = placement.apply_to_tree(c.pid, where.server_cpus)
        assert placement.failures(applied) == []
        out = c.data_dir.parent / "pgbench.out"
        argv = [*placement.driver_prefix(where.driver_cpus), pgbench, *c.conn_args()]
        argv += ["-n", "-b", "simple-update", "-M", "prepared", "-c", "4", "-j", "2", "-T", "3"]
        driver = proc.spawn([*argv, "postgres"], stdout_path=out)
        log = placement.CpuLog()
        while driver.poll() is None:
            log.sample([c.pid, *proc.child_pids(c.pid), driver.pid])
            time.sleep(0.02)
        assert driver.returncode == 0, out.read_text()
        log.close()  # the allowed lists of those still there read once more
        record = {r["pid"]: r for r in log.to_json()}
    # the driver (taskset exec()s pgbench in place: same PID) and its threads
    assert record[driver.pid]["name"] == "pgbench"
    assert record[driver.pid]["allowed_cpus"] == placement.format_cpu_list(where.driver_cpus)
    assert log.seen[driver.pid] <= set(where.driver_cpus)
    # the backends the postmaster forked for pgbench and the background processes that
    # ran during the run (those asleep throughout have no CPU to show)
    server = [pid for pid in log.allowed if pid != driver.pid]
    assert postmaster in server
    assert len([pid for pid in server if pid in log.seen]) >= 4  # at least the 4 backends
    for pid in server:
        assert log.allowed[pid] == where.server_cpus, record.get(pid)
        assert log.seen.get(pid, set()) <= set(where.server_cpus), record.get(pid)

"""Record real pgbench outputs for the parser tests (run as root from the repo root).

    .venv/bin/python tests/data/pgbench/record.py pg15
    .venv/bin/python tests/data/pgbench/record.py pg18 /var/lib/blocklab/cache/builds/<pg18 build>

Writes TAG-NAME.{argv,stdout,stderr,exitcode,aggN} for: a clean simple-update run
(-M prepared -c 4 -j 1 -T 5), a two-thread tpcb-like run (-M extended -c 4 -j 2 -T 4),
and an aborted run (the postmaster killed by PID after 3.5 s of -T 8).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

from blocklab import proc
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State

OUT = Path(__file__).parent
BASE = Path("/var/tmp/blocklab-record")


def main() -> None:
    tag = sys.argv[1]
    inst = Installation.from_manifest(Path(sys.argv[2])) if len(sys.argv) > 2 else None
    inst = inst or Installation.system(15)
    c = fresh_cluster(inst)
    c.initdb(data_checksums=False)
    c.write_settings({})
    c.start()
    try:
        pgb = str(inst.bin("pgbench"))
        proc.run([pgb, *c.conn_args(), "-i", "-s", "1", "-F", "90", "postgres"])
        common = ["-b", "simple-update", "-M", "prepared", "-c", "4", "-j", "1"]
        bench(c, tag, "simple-update-prepared", [*common, "-T", "5"])
        tpcb = ["-b", "tpcb-like", "-M", "extended", "-c", "4", "-j", "2", "-T", "4"]
        bench(c, tag, "tpcb-extended-j2", tpcb)
        bench(c, tag, "aborted", [*common, "-T", "8"], kill_after_s=3.5)
    finally:
        c.kill()
        shutil.rmtree(BASE, ignore_errors=True)


def fresh_cluster(inst: Installation) -> Cluster:
    """A cluster (not yet initialised) in an emptied BASE."""
    shutil.rmtree(BASE, ignore_errors=True)
    return Cluster(
        inst,
        BASE / "data",
        socket_dir=BASE / "sock",
        user=server_user(),
        state=State(BASE / "state.json"),
        log_path=BASE / "server.log",
    )


def scale10_cluster(inst: Installation) -> Cluster:
    """A started cluster in an emptied BASE (shared_buffers 128MB, max_wal_size 1GB)
    after `pgbench -i -s 10` (record_warmup.py's and record_translog.py's)."""
    c = fresh_cluster(inst)
    c.initdb(data_checksums=False)
    c.write_settings({"shared_buffers": "128MB", "max_wal_size": "1GB"})
    c.start()
    try:
        proc.run([str(inst.bin("pgbench")), *c.conn_args(), "-i", "-s", "10", "-q", "postgres"])
    except BaseException:
        c.kill()
        raise
    return c


def bench(
    c: Cluster,
    tag: str,
    name: str,
    extra: list[str],
    kill_after_s: float = 0,
    log: tuple[str, ...] = ("--aggregate-interval=1",),
    kind: str = "agg",
) -> None:
    """One pgbench run with `-l` and `log`'s options; its log files as STEM.KIND0, 1..."""
    logs = BASE / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    pgb = str(c.inst.bin("pgbench"))
    argv = [pgb, *c.conn_args(), "-n", "-P", "1", "-l", *log]
    argv += [f"--log-prefix={logs}/agg", *extra, "postgres"]
    stem = OUT / f"{tag}-{name}"
    for suffix in (".stdout", ".stderr"):
        Path(f"{stem}{suffix}").unlink(missing_ok=True)
    p = proc.spawn(argv, stdout_path=Path(f"{stem}.stdout"), stderr_path=Path(f"{stem}.stderr"))
    if kill_after_s:
        time.sleep(kill_after_s)
        assert c.pid is not None
        os.kill(c.pid, signal.SIGKILL)
    code = p.wait()
    Path(f"{stem}.exitcode").write_text(f"{code}\n")
    Path(f"{stem}.argv").write_text(" ".join(argv).replace(str(BASE), "/var/tmp/x") + "\n")
    for old in OUT.glob(f"{tag}-{name}.{kind}*"):
        old.unlink()
    for i, f in enumerate(sorted(logs.iterdir())):
        Path(f"{stem}.{kind}{i}").write_text(f.read_text())
    print(name, code)
    if kill_after_s:
        c.kill()
        c.remove_data()
        c.initdb(data_checksums=False)
        c.write_settings({})
        c.start()


if __name__ == "__main__":
    main()

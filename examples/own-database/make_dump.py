"""Make examples/own-database/app.dump offline: a throwaway server of blocklab's 8 kB
build (built and cached when missing), app.sql loaded with psql, `pg_dump -Fc`.

    sudo .venv/bin/python examples/own-database/make_dump.py [--rows N] [--out PATH]

This stands in for `pg_dump -Fc` on your production server (docs/WORKLOADS.md, "Your own
database"). The server, psql and pg_dump run as blocklab's unprivileged OS user.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import uuid
from pathlib import Path

from blocklab.model import BuildRequest
from blocklab.paths import Paths
from blocklab.postgres.build import ensure_build
from blocklab.postgres.cluster import Cluster, server_user
from blocklab.postgres.installation import Installation
from blocklab.state import State
from blocklab.workloads.execution import driver_user, run_driver

HERE = Path(__file__).resolve().parent


def make_dump(
    inst: Installation, paths: Paths, out: Path, *, rows: int = 1, sql: Path = HERE / "app.sql"
) -> Path:
    """`sql` (app.sql) at `rows` units into a fresh server of `inst`, dumped to `out`
    (-Fc). The SQL file must be readable by the unprivileged OS user."""
    base = paths.work / "own-database" / uuid.uuid4().hex[:8]
    c = Cluster(inst, base / "data", socket_dir=base / "sock", user=server_user(),
                state=State(paths.home / f"state-{base.name}.json"),
                log_path=base / "server.log")  # fmt: skip
    user = driver_user()
    work = Path(tempfile.mkdtemp(prefix="blocklab-make-dump-"))
    try:
        shutil.chown(work, user.uid, user.gid)
        c.initdb(data_checksums=False)
        c.write_settings({})
        c.start()
        conn = [*c.conn_args(), "-d", "postgres"]
        run_driver([str(inst.bin("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                    "-v", f"rows={int(rows)}", *conn, "-f", str(sql)],
                   timeout_s=3600)  # fmt: skip
        run_driver([str(inst.bin("pg_dump")), "-Fc", *conn, "-f", str(work / "app.dump")],
                   timeout_s=3600)  # fmt: skip
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work / "app.dump", out)
        c.stop()
        return out
    finally:
        c.kill()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def ensure(paths: Paths, out: Path = HERE / "app.dump", *, rows: int = 1) -> Path:
    """`out`, made when missing (examples/own-database-pagesize.toml names it)."""
    if out.exists():
        return out
    inst = ensure_build(BuildRequest(pg="18", block_size_kb=8, wal_block_size_kb=8), paths)
    return make_dump(inst, paths, out, rows=rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1, help="units of data (default 1)")
    ap.add_argument("--out", type=Path, default=HERE / "app.dump")
    a = ap.parse_args()
    a.out.unlink(missing_ok=True)
    print(ensure(Paths.from_env(), a.out, rows=a.rows))


if __name__ == "__main__":
    main()

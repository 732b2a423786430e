"""The interleaved design end to end with real builds, servers and pgbench: one round of
two slices per variant, both servers up at once on dir storages of their own, one record
per variant from its slices, both servers stopped afterwards, the summary comparing them."""

from __future__ import annotations

import csv
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.paths import Paths, ensure_dir

pytestmark = [pytest.mark.build, pytest.mark.root]

EXPERIMENT = """
[experiment]
name = "il-real"
rounds = 1
reference = { block_size = 8 }

[design]
kind = "interleaved"
slice_s = 1
slices = 2

[matrix]
postgres = "18"
block_size = [4, 8]
wal_block_size = [4, 8]
storage = { kind = "dir" }
scale = 1
workload = "simple-update"
clients = 2
duration = 4
warmup = 1

[[exclude]]
block_size = 4
wal_block_size = 8

[[exclude]]
block_size = 8
wal_block_size = 4
"""
READY = re.compile(r"^\d+\.\d+ \[(\d+)\] LOG:\s+database system is ready to accept connections")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "blocklab.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def _alive(pid: int) -> str:
    """The process's command line if it runs ("" when it is gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
    return "" if stat.rsplit(")", 1)[1].split()[0] == "Z" else f"{pid}: {cmd}"


@pytest.mark.alongside(2)
def test_interleaved_round_stores_one_record_per_variant_from_its_slices(
    paths: Paths,
    pg18_4k,
    pg18_8k,  # type: ignore[no-untyped-def]
) -> None:
    f = ensure_dir(paths.home / "exp" / "il-real") / "x.toml"
    f.write_text(EXPERIMENT)
    results = paths.home / "results-il"
    done = _run("run", str(f), "--results", str(results), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(results / "blocklab.sqlite") as c:
        c.row_factory = sqlite3.Row
        rows = list(c.execute("SELECT * FROM runs ORDER BY position"))
    assert len(rows) == 2
    assert {r["status"] for r in rows} == {"ok"}, [r["reason"] for r in rows]
    assert [(r["round"], r["copy_index"], r["position"]) for r in rows] == [(1, 0, 0), (1, 0, 1)]
    first = rows[0]["variant_id"]
    measured = []
    for r in rows:
        (raw,) = [d for d in results.rglob(f"r001-*-{r['variant_id']}") if d.is_dir()]
        slices = list(csv.DictReader((raw / "slices.csv").open()))
        assert len(slices) == 2 and {s["variant_id"] for s in slices} == {r["variant_id"]}
        measured += slices
        xacts = sum(int(s["transactions"]) for s in slices)
        seconds = sum(float(s["seconds"]) for s in slices)
        assert r["transactions"] == xacts > 0
        assert r["tps"] == pytest.approx(xacts / seconds, rel=1e-5)
        assert (raw / "s000.stdout").exists() or (raw / "s001.stdout").exists()
        assert (raw / "warmup.stdout").exists()
        pids = [
            int(m.group(1))
            for ln in (raw / "server.log").read_text().splitlines()
            if (m := READY.match(ln))
        ]
        assert pids, (raw / "server.log").read_text()[-2000:]
        assert [_alive(p) for p in pids] == [""] * len(pids)  # its server is stopped
    # Thue-Morse over the round: A B B A, A being the round's first variant
    order = [s["variant_id"] for s in sorted(measured, key=lambda s: int(s["position"]))]
    other = next(r["variant_id"] for r in rows if r["variant_id"] != first)
    assert order == [first, other, other, first]
    assert not list(paths.work.rglob("postmaster.pid"))  # no server left behind
    summary = _run("summary", "--results", str(results))
    assert summary.returncode == 0, summary.stderr
    out = " ".join(summary.stdout.split())
    assert "design interleaved" in out and "bs=4k" in out and "bs=8k" in out, out[-3000:]

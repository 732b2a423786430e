"""SYNTHETIC test data for the report site: a results database written through ResultsDB.

Every number here is MADE UP by a random generator with a fixed seed. Nothing here was
measured; it only has the shape of real results (paired rounds, per-second series,
checkpoints, one failed run) so that the report can be generated and looked at before
real experiments exist. The experiment descriptions say "SYNTHETIC" so a page made from
this data cannot be mistaken for a measurement.
"""

from __future__ import annotations

import filecmp
import functools
import itertools
import json
import math
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from blocklab.analysis import kept_trends
from blocklab.store import ResultsDB, RunRecord, series_packed

SYNTHETIC = "SYNTHETIC test data (made up, not measured)"
# one real run's provenance and settings, as `blocklab run` stored them (real_details)
REAL_DETAILS = Path(__file__).parent / "data" / "report" / "real_run_details.json"
SERIES_NAMES = (
    "tps",
    "latency_ms",
    "wal_bytes_per_s",
    "device_data_write_bytes_per_s",
    "device_data_read_bytes_per_s",
    "cpu_user_pct",
    "cpu_system_pct",
    "cpu_iowait_pct",
)


def _storage_label(fs: str, fs_block_size: int) -> str:
    return f"{fs}-{fs_block_size // 1024}k"


def _variants(
    block_sizes_kb: Sequence[int],
    fs_kinds: Sequence[str],
    fs_block_sizes: Sequence[int],
    wal_block_sizes_kb: Sequence[int],
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(variant_id, label, variant_json, dims); dims hold only the varying dimensions."""
    out = []
    combos = itertools.product(block_sizes_kb, fs_kinds, fs_block_sizes, wal_block_sizes_kb)
    for bs, fs, fsb, wal in combos:
        full: dict[str, Any] = {
            "block_size_kb": bs,
            "storage": _storage_label(fs, fsb),
            "fs": fs,
            "fs_block_size": fsb,
            "wal_block_size_kb": wal,
        }
        varying = {
            "block_size_kb": len(block_sizes_kb) > 1,
            "storage": len(fs_kinds) * len(fs_block_sizes) > 1,
            "fs": len(fs_kinds) > 1,
            "fs_block_size": len(fs_block_sizes) > 1,
            "wal_block_size_kb": len(wal_block_sizes_kb) > 1,
        }
        dims = {k: v for k, v in full.items() if varying[k]}
        variant = {
            "build": {"pg": "18", "block_size_kb": bs, "wal_block_size_kb": wal},
            "storage": {"kind": fs, "block_size": fsb},
            "dataset": {"scale": 10, "fillfactor": 100},
            "workload": {"builtin": "simple-update", "clients": 4, "duration_s": 60},
            "label": f"bs={bs}k wal={wal}k {_storage_label(fs, fsb)}",
        }
        vid = f"{bs}k{wal}w{fs}{fsb}"
        out.append((vid, variant["label"], json.dumps(variant, sort_keys=True), dims))
    return out


def _true_tps(dims: dict[str, Any], full: dict[str, Any]) -> float:
    """A made-up response surface: smaller pages a bit faster, 1 kB fs blocks slower."""
    bs = full["build"]["block_size_kb"]
    fsb = full["storage"]["block_size"]
    wal = full["build"]["wal_block_size_kb"]
    kind = full["storage"]["kind"]
    tps = 1200.0 * (1 + 0.08 * math.log2(8 / bs)) * (0.85 if fsb < bs * 1024 else 1.0)
    tps *= 1.03 if wal >= 8 else 1.0
    return tps * (0.93 if kind == "xfs" else 1.0)


def _series(
    rng: random.Random, tps: float, seconds: int, bs_kb: int
) -> dict[str, list[tuple[float, float | None]]]:
    out: dict[str, list[tuple[float, float | None]]] = {n: [] for n in SERIES_NAMES}
    for t in range(seconds):
        dip = 0.7 if 20 <= t < 24 else 1.0  # a made-up checkpoint dip
        v = max(1.0, rng.gauss(tps * dip, tps * 0.08))
        lat = 4 * 1000.0 / v * rng.uniform(0.9, 1.3)
        out["tps"].append((float(t), round(v, 1)))
        out["latency_ms"].append((float(t), round(lat, 3)))
        out["wal_bytes_per_s"].append(
            (float(t), round(v * (600 + 40 * bs_kb) * rng.uniform(0.9, 1.1)))
        )
        dev = v * bs_kb * 1024 * 0.6 * (3.0 if dip < 1 else 1.0)
        out["device_data_write_bytes_per_s"].append((float(t), round(dev)))
        out["device_data_read_bytes_per_s"].append((float(t), round(rng.uniform(0, 2e5))))
        out["cpu_user_pct"].append((float(t), round(rng.uniform(30, 45), 1)))
        out["cpu_system_pct"].append((float(t), round(rng.uniform(10, 20), 1)))
        out["cpu_iowait_pct"].append((float(t), round(rng.uniform(0, 15), 1)))
    return out


def _fpi(rng: random.Random, seconds: int, *, storm: bool) -> list[tuple[float, float | None]]:
    """Full-page images/s: a storm decaying 5 % a second from 2,000/s, or flat ~40/s."""
    return [
        (float(t), round((2000.0 * 0.95**t if storm else 40.0) * rng.uniform(0.9, 1.1), 1))
        for t in range(seconds)
    ]


def _checkpoints(seconds: int) -> list[dict[str, Any]]:
    cps: list[dict[str, Any]] = [
        {"start_s": -8.0, "end_s": 3.0, "trigger": "time", "bytes_written": 2_000_000},
        {"start_s": 18.0, "end_s": 27.5, "trigger": "wal", "bytes_written": 40_000_000},
    ]
    if seconds > 40:
        cps.append({"start_s": seconds - 12.0, "end_s": None, "trigger": "time", "incomplete": 1})
    return cps


def _metrics(rng: random.Random, tps: float, bs_kb: int) -> dict[str, float | None]:
    return {
        "wal_bytes_per_xact": round((600 + 40 * bs_kb) * rng.uniform(0.95, 1.05), 1),
        "device_data_write_bytes_per_xact": round(bs_kb * 1024 * 0.7 * rng.uniform(0.9, 1.1), 1),
        "fpi_bytes_share_of_wal_max": round(min(1.0, 0.05 * bs_kb * rng.uniform(0.9, 1.1)), 4),
        "hot_update_ratio": round(rng.uniform(0.6, 0.9), 4),
        "server_cpu_s_per_xact": round(0.001 * 1200 / tps * rng.uniform(0.9, 1.1), 6),
    }


def _write_raw(results: Path, raw_rel: str, record: RunRecord) -> None:
    raw = results / raw_rel
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "pgbench.stdout").write_text(
        f"# {SYNTHETIC}\ntps = {record.tps} (without initial connection time)\n"
    )
    (raw / "server.log").write_text(f"# {SYNTHETIC}\nLOG:  checkpoint starting: time\n")
    (raw / "run.json").write_text(json.dumps({"status": record.status, "synthetic": True}))


def write_synthetic_results(
    results: Path,
    *,
    name: str = "synthetic-geometry",
    block_sizes_kb: Sequence[int] = (4, 8, 16),
    fs_kinds: Sequence[str] = ("ext4",),
    fs_block_sizes: Sequence[int] = (1024, 4096),
    wal_block_sizes_kb: Sequence[int] = (8,),
    rounds: int = 3,
    seconds: int = 60,
    failed_run: bool = True,
    seed: int = 7,
    raw_files: bool = True,
    fpi_storm: str = "",
    keep_trends: bool = False,
    real_details: bool = False,
) -> Path:
    """Write one SYNTHETIC experiment into `results` (created if missing); returns results.

    The variant with 8 kB pages (and the first fs kind/block size) is the reference. With
    `failed_run`, the second variant's last round is stored as a failure with a reason.
    With `fpi_storm` (a variant id), every variant gets a wal_fpi_per_s series: that
    variant's decays 5 % a second from 2,000/s (a post-checkpoint image storm), the
    others' stay flat around 40/s. With `keep_trends`, each ok run's stationarity trends
    are judged and kept as the experiment loop keeps them, with the run's row
    (kept_trends.judged); without, the first summary judges them. With `real_details`,
    each run's provenance and settings are a real run's (REAL_DETAILS: 12 kB and 399
    settings, where the synthetic ones are a few dozen bytes), so that a run page weighs
    what a real one does.
    """
    rng = random.Random(seed)
    variants = _variants(block_sizes_kb, fs_kinds, fs_block_sizes, wal_block_sizes_kb)
    ref = next((v[0] for v in variants if v[0].startswith("8k")), variants[0][0])
    start = datetime(2025, 3, 1, 12, 0, tzinfo=UTC) + timedelta(days=seed % 20)
    with ResultsDB(results) as db:
        db.upsert_experiment(
            name,
            description=f"{SYNTHETIC}: page size x file-system block size",
            spec={"name": name, "synthetic": True, "rounds": rounds},
            seed=seed,
            reference=ref,
            created_at=start.isoformat(timespec="seconds"),
            host={"hostname": "synthetic-host", "kernel": "0.0-synthetic", "cpus": 2},
            variants=variants,
        )
        clock = start
        for rnd in range(1, rounds + 1):
            order = [v[0] for v in variants]
            rng.shuffle(order)
            db.record_round(name, rnd, seed + rnd, order)
            drift = rng.uniform(0.9, 1.1)  # the whole round is slower or faster
            for pos, vid in enumerate(order):
                v = next(x for x in variants if x[0] == vid)
                failed = failed_run and vid == variants[1][0] and rnd == rounds
                rec = _record(rng, name, v, rnd, pos, clock, seconds, drift, failed)
                if real_details:
                    _real_details(rec, v, rng)
                if fpi_storm and rec.series:
                    rec.series["wal_fpi_per_s"] = _fpi(rng, seconds, storm=vid == fpi_storm)
                if raw_files:
                    _write_raw(results, rec.raw_dir, rec)
                judged = keep_trends and rec.status == "ok"
                db.record_run(rec, kept_trends.judged(rec.series) if judged else None)
                clock += timedelta(seconds=seconds + 20)
        db.set_experiment_state(name, "done", "rounds reached")
    return results


def _record(
    rng: random.Random,
    name: str,
    v: tuple[str, str, str, dict[str, Any]],
    rnd: int,
    pos: int,
    clock: datetime,
    seconds: int,
    drift: float,
    failed: bool,
) -> RunRecord:
    vid, label, vjson, dims = v
    full = json.loads(vjson)
    bs = full["build"]["block_size_kb"]
    rec = RunRecord(
        experiment=name,
        variant_id=vid,
        round=rnd,
        position=pos,
        status="failed" if failed else "ok",
        started_at=clock.isoformat(timespec="seconds"),
        ended_at=(clock + timedelta(seconds=seconds)).isoformat(timespec="seconds"),
        command="pgbench -c 4 -T 60 -M prepared -b simple-update  # SYNTHETIC",
        raw_dir=f"runs/{name}/r{rnd:03d}-{vid}",
        settings={"shared_buffers": "128MB", "checkpoint_timeout": "30s"},
        provenance={"synthetic": True, "build_key": f"pg18-{bs}k", "note": SYNTHETIC},
    )
    if failed:
        rec.reason = "pgbench exited with code 2: 3 clients aborted (SYNTHETIC failure)"
        rec.exit_code = 2
        return rec
    tps = _true_tps(dims, full) * drift * rng.gauss(1.0, 0.03)
    rec.series = _series(rng, tps, seconds, bs)
    values = [p[1] for p in rec.series["tps"] if p[1] is not None]
    rec.tps = round(sum(values) / len(values), 3)
    rec.latency_avg_ms = round(4 * 1000.0 / rec.tps, 3)
    rec.latency_stddev_ms = round(rec.latency_avg_ms * 0.4, 3)
    rec.transactions = int(rec.tps * seconds)
    rec.failed_transactions = 0
    rec.exit_code = 0
    rec.metrics = _metrics(rng, tps, bs)
    rec.checkpoints = _checkpoints(seconds)
    return rec


@functools.cache
def _real() -> dict[str, Any]:
    return dict(json.loads(REAL_DETAILS.read_text()))


# what differs between two real runs of one variant: the provenance's timings, counters
# and reports, and the server's port and socket directory (the rest is the build's, the
# dataset's and the controls': the same for every run of a variant)
PER_RUN_PROVENANCE = ("phases_s", "probe_facts", "restore", "pgbench_report", "transaction_log")
PER_RUN_SETTINGS = ("port", "unix_socket_directories")


def _real_details(
    rec: RunRecord, v: tuple[str, str, str, dict[str, Any]], rng: random.Random
) -> None:
    """A real run's provenance and settings (REAL_DETAILS) in place of the synthetic ones:
    the variant's build key and page size, the SYNTHETIC marks, and what differs between
    real runs (PER_RUN_PROVENANCE's numbers, PER_RUN_SETTINGS) drawn for this run."""
    real = _real()
    bs = json.loads(v[2])["build"]["block_size_kb"]
    prov = real["provenance"] | {k: rec.provenance[k] for k in ("synthetic", "note")}
    prov |= {k: _vary(prov[k], rng) for k in PER_RUN_PROVENANCE if k in prov}
    rec.provenance = prov | {"build_key": f"pg18-{bs}k"}
    port = str(rng.randrange(20000, 60000))
    rec.settings = real["settings"] | {
        "block_size": {"setting": str(bs * 1024), "unit": None},
        "port": {"setting": port, "unit": None},
        "unix_socket_directories": {"setting": f"/var/tmp/synthetic/{port}/sock", "unit": None},
    }


def _vary(value: Any, rng: random.Random) -> Any:
    """`value` with each number drawn again within 10 % (its structure kept)."""
    if isinstance(value, dict):
        return {k: _vary(x, rng) for k, x in value.items()}
    if isinstance(value, list):
        return [_vary(x, rng) for x in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    drawn = value * rng.uniform(0.9, 1.1)
    return round(drawn) if isinstance(value, int) else round(drawn, 6)


def add_synthetic_run(
    results: Path,
    name: str,
    *,
    seconds: int = 60,
    seed: int = 99,
    keep_trends: bool = False,
    same_round: bool = False,
    real_details: bool = False,
    round_recorded: Callable[[], None] | None = None,
) -> int:
    """Record one more SYNTHETIC ok run of `name`'s first variant, in a new round, through
    the store interface (as a run finishing after the report was made); returns its id.
    `keep_trends`, `real_details`: as write_synthetic_results. `same_round`: in the last
    round instead, as the variant's next copy (no round recorded: only the runs change).
    `round_recorded`: called once the new round is committed, before the run is (the
    experiment loop records a round as it begins, and each run a run's length later)."""
    rng = random.Random(seed)
    with ResultsDB(results, create=False) as db:
        v = db.variants(name)[0]
        last = max((int(r["round"]) for r in db.runs(name)), default=0)
        rnd = last if same_round else last + 1
        if not same_round:
            db.record_round(name, rnd, seed + rnd, [v["variant_id"]])
            if round_recorded is not None:
                round_recorded()
        copies = [
            int(r["copy_index"]) for r in db.runs(name, v["variant_id"]) if int(r["round"]) == rnd
        ]
        variant = (v["variant_id"], v["label"], v["variant_json"], json.loads(v["dims_json"]))
        clock = datetime(2025, 6, 1, 12, 0, tzinfo=UTC) + timedelta(hours=rnd)
        rec = _record(rng, name, variant, rnd, 0, clock, seconds, 1.0, False)
        if real_details:
            _real_details(rec, variant, rng)
        rec.copy_index = 1 + max(copies, default=-1)
        if rec.copy_index:
            rec.raw_dir += f"-c{rec.copy_index}"
        _write_raw(results, rec.raw_dir, rec)
        return db.record_run(rec, kept_trends.judged(rec.series) if keep_trends else None)


def differing_files(a: Path, b: Path) -> list[str]:
    """Paths that differ between two directory trees (content compared): a site updated
    against one made whole."""
    diff: list[str] = []

    def walk(d: filecmp.dircmp[str], rel: str) -> None:
        _, mismatch, errors = filecmp.cmpfiles(d.left, d.right, d.common_files, shallow=False)
        diff.extend(f"{rel}{n}" for n in [*d.left_only, *d.right_only, *mismatch, *errors])
        for name, sub in d.subdirs.items():
            walk(sub, f"{rel}{name}/")

    walk(filecmp.dircmp(a, b), "")
    return diff


def scale_series(db: ResultsDB, factor: float, run_id: int | None = None) -> None:
    """Every stored series value times `factor` (of `run_id`'s series only, with it), in
    the caller's transaction: what `UPDATE series SET value = factor * value` did to the
    point rows before schema version 7 (blocklab.store.series_packed)."""
    where, args = ("WHERE run_id = ?", (run_id,)) if run_id is not None else ("", ())
    for r in db.conn.execute(f"SELECT run_id, name, t_s, value FROM run_series {where}", args):
        pts = series_packed.points(r["t_s"], r["value"])
        scaled = [(t, None if v is None else factor * v) for t, v in pts]
        ((_, _, _, value),) = series_packed.rows(r["run_id"], {r["name"]: scaled})
        db.conn.execute(
            "UPDATE run_series SET value = ? WHERE run_id = ? AND name = ?",
            (value, r["run_id"], r["name"]),
        )

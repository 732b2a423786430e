"""Round orders are balanced permutations reproducible from the seed; plans count and
estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.execution import orders, plan

IDS = [f"v{i:02d}" for i in range(7)]


def test_each_round_is_a_permutation_and_reproducible() -> None:
    drawn = [orders.round_order(IDS, 42, r) for r in range(1, 21)]
    for r, order in enumerate(drawn, start=1):
        assert sorted(order) == sorted(IDS)
        assert orders.round_order(IDS, 42, r) == order
        assert orders.round_order(list(reversed(IDS)), 42, r) == order  # caller order irrelevant
    # balanced, not drawn: the 14 rows of the Williams design for 7 variants, then again
    assert len({tuple(o) for o in drawn[:14]}) == 14 and drawn[14:] == drawn[:6]
    assert orders.round_order(IDS, 43, 1) != orders.round_order(IDS, 42, 1) or (
        orders.round_order(IDS, 43, 2) != orders.round_order(IDS, 42, 2)
    )


def test_round_order_is_stable_across_processes() -> None:
    # random.Random(str) seeds from the string's bytes, not hash(): no PYTHONHASHSEED effect.
    assert orders.round_order(["a", "b", "c", "d"], 1, 1) == ["a", "b", "d", "c"]


def test_every_variant_leads_some_round() -> None:
    firsts = [orders.round_order(IDS, 7, r)[0] for r in range(1, 8)]
    assert sorted(firsts) == sorted(IDS)  # each leads exactly one of 7 rounds


def test_round_order_refuses_duplicates() -> None:
    with pytest.raises(ValueError):
        orders.round_order(["a", "a"], 1, 1)


def test_describe_the_demo() -> None:
    exp = spec.demo()
    p = plan.describe(exp)
    assert len(p.variants) == 2 and len(p.builds) == 2 and p.datasets == 2
    # interleaved: one record per variant per round, both servers up at once
    assert exp.run_design.kind == "interleaved" and p.runs == 2 * exp.rounds
    assert sorted(p.first_round) == ["bs=4k", "bs=8k"]
    rd = exp.run_design
    per_round = plan.interleaved_round_s(exp.variants(), rd)
    assert p.eta_runs_s == pytest.approx(exp.rounds * per_round)
    assert p.eta_builds_s == 2 * plan.BUILD_S
    # the demo's datasets and runs fit in the 8 minutes a 15-minute make demo leaves them
    assert p.eta_s - p.eta_builds_s < 8 * 60
    assert "twice the checkpoints" not in p.order_note  # aligned checkpoints
    cached = plan.describe(exp, cached=lambda req: req.block_size_kb == 8)
    assert len(cached.builds_to_make) == 1 and cached.eta_builds_s == plan.BUILD_S


def test_describe_shares_builds_and_datasets_across_clients() -> None:
    exp = spec.load(Path(__file__).parents[2] / "examples" / "wal-block-clients.toml")
    p = plan.describe(exp)
    assert len(p.variants) == 8 and len(p.builds) == 2 and p.datasets == 2


TOAST = """
[experiment]
name = "toast"
rounds = 2
reference = { "settings.default_toast_compression" = "pglz", "settings.work_mem" = "4MB" }
[matrix]
scale = 1
duration = 5
[matrix.settings]
default_toast_compression = ["pglz", "lz4"]
work_mem = ["4MB", "64MB"]
"""


def test_variants_apart_in_a_load_setting_get_a_dataset_each_and_the_plan_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "toast.toml"
    f.write_text(TOAST)
    p = plan.describe(spec.load(f))
    assert len(p.variants) == 4 and p.datasets == 2  # work_mem is the runs' alone
    assert p.load_settings == ("default_toast_compression=lz4", "default_toast_compression=pglz")
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("BLOCKLAB_HOME", str(tmp_path / "home"))
    assert main(["plan", str(f)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    loaded = "(loaded with default_toast_compression=lz4, default_toast_compression=pglz)"
    assert f"2 datasets {loaded}" in out


def test_adaptive_plan_reports_the_worst_case(tmp_path: Path) -> None:
    f = tmp_path / "x.toml"
    f.write_text(
        '[experiment]\nname = "x"\nrounds = 3\nuntil_ci_pct = 2\nmax_rounds = 10\n'
        "reference = { block_size = 8 }\n[matrix]\nblock_size = [4, 8]\nduration = 10\n"
    )
    p = plan.describe(spec.load(f))
    assert p.runs == 6 and p.max_runs == 20
    assert p.eta_max_runs_s == pytest.approx(10 * 2 * (10 + plan.per_run_fixed_s(p.variants[0])))


def test_plan_command_prints_and_builds_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))
    example = Path(__file__).parents[2] / "examples" / "page-size.toml"
    assert main(["plan", str(example)]) == 0
    out = capsys.readouterr().out
    for text in ("3 variants", "bs=2k", "reference", "18 runs", "round 1 order", "ETA"):
        assert text in out
    # page-size.toml: 3 variants, paired: positions balance every 3 rounds, 6 rounds
    # balance which follows which too (the file had 5 rounds before issue 35)
    assert "orders balanced over the 6 rounds" in out
    # no build, no catalogue: the bytes policy's values are not guessed from a list
    assert "known after build bs=2k, bs=4k, bs=8k" in out
    assert "bgwriter_lru_maxpages" not in out and "(0 cached)" in out
    assert not (tmp_path / "empty-cache" / "builds").exists()


PLAN_4K_8K = """
[experiment]
name = "plan-bytes"
reference = { block_size = 8 }
settings_policy = "bytes"
rounds = 1
[matrix]
block_size = [4, 8]
wal_block_size = 8
duration = 5
[matrix.settings]
io_combine_limit = 128
transaction_buffers = 64
"""


@pytest.mark.build
def test_plan_shows_what_each_variant_gets_from_the_builds_catalogues(  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pg18_4k, pg18_8k
) -> None:
    f = tmp_path / "p.toml"
    f.write_text(PLAN_4K_8K)
    assert main(["plan", str(f)]) == 0
    out = capsys.readouterr().out
    assert "known after build" not in out and "(2 cached)" in out
    cells = [[c.strip() for c in ln.split("│")[1:-1]] for ln in out.splitlines() if ln[:1] == "│"]
    rows = {c[0]: c[1:] for c in cells}  # setting -> [4 kB variant, 8 kB reference]
    # io_combine_limit = 128 pages of the 8 kB reference: 1 MB; a 4 kB build takes 512 kB
    assert rows["io_combine_limit"] == ["512kB", "1024kB"]
    words = " ".join(out.split())  # the notes' format changed with the SLRU rounding
    assert "io_combine_limit 128 (1 MB) -> 128 at 4 kB: 256 is above PostgreSQL's maximum" in words
    assert "512 kB instead of 1 MB (not equal in bytes)" in words
    assert rows["bgwriter_lru_maxpages"] == ["200", ""]  # the default 100 x 8 kB
    assert "transaction_buffers=512kB" in out  # 64 x 8 kB in both builds


def test_plan_takes_runs_flags_and_shows_that_run_under_its_stored_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "empty-cache"))
    example = Path(__file__).parents[2] / "examples" / "page-size.toml"
    args = ["--rounds", "1", "--duration", "2", "--scale", "1", "--results", str(tmp_path)]
    assert main(["plan", str(example), *args]) == 0
    out = capsys.readouterr().out
    assert "stored as experiment 'page-size-s1-d2'" in out  # what `run` names it
    assert "3 runs (3 per round, design paired, × 1 rounds)" in out
    adaptive = ["--until-ci", "2", "--max-rounds", "7", "--time-budget", "30m"]
    assert main(["plan", str(example), "--clients", "2", *adaptive]) == 0
    out = capsys.readouterr().out
    assert "stored as experiment 'page-size-c2'" in out
    assert "up to 21 until every CI half-width ≤ 2 %" in out  # 3 variants x 7 rounds
    assert "time budget 30 min 00 s" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--rounds", "0"], "--rounds: must be at least 1"),
        (["--duration", "0"], "--duration: must be at least 1"),
        (["--max-rounds", "0"], "--max-rounds: must be at least 1"),
        (["--until-ci", "100"], "--until-ci: a percentage between 0 and 100"),
        (["--time-budget", "soon"], "--time-budget: 'soon' is not a duration"),
    ],
)
def test_plan_checks_runs_flags_as_run_does(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    assert main(["plan", *args]) == 2
    assert fragment in capsys.readouterr().err


def test_format_duration() -> None:
    assert plan.format_duration(59) == "59 s"
    assert plan.format_duration(61) == "1 min 01 s"
    assert plan.format_duration(3 * 3600 + 120) == "3 h 02 min"


def test_interleaved_eta_counts_two_servers_and_the_slices(tmp_path: Path) -> None:
    f = tmp_path / "il.toml"
    f.write_text(
        '[experiment]\nname = "il"\nrounds = 3\nreference = { block_size = 8 }\n'
        '[design]\nkind = "interleaved"\nslice_s = 4\nslices = 6\n'
        "[matrix]\nblock_size = [4, 8]\nduration = 60\nwarmup = 7\n"
    )
    p = plan.describe(spec.load(f))
    per_round = 2 * (plan.INTERLEAVED_SERVER_S + 7) + 2 * 6 * (4 + plan.PER_SLICE_OVERHEAD_S)
    assert p.eta_runs_s == pytest.approx(3 * per_round)
    assert p.runs == 6 and len(p.first_round) == 2
    assert "Thue-Morse" in p.order_note
    assert "twice the checkpoints per transaction" in p.order_note


def test_interleaved_aligned_drops_the_twice_the_checkpoints_caveat(tmp_path: Path) -> None:
    f = tmp_path / "il.toml"
    f.write_text(
        '[experiment]\nname = "il"\nrounds = 4\nreference = { block_size = 8 }\n'
        '[design]\nkind = "interleaved"\ncheckpoint = "aligned"\n'
        "[matrix]\nblock_size = [4, 8]\nduration = 60\n"
    )
    note = plan.describe(spec.load(f)).order_note
    assert "twice the checkpoints" not in note
    assert "CHECKPOINT right before its first measured slice" in note
    assert "swap their storage slots" in note

"""Bad experiment files: each is a UserError naming the key path and the allowed values,
and `blocklab plan FILE` exits with code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab import experiment_file as spec
from blocklab.cli import main
from blocklab.errors import UserError

BAD = Path(__file__).parents[1] / "bad_specs"
FILES = sorted(BAD.glob("*.toml"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line must be '# expect: ...'"
    return first.removeprefix("# expect: ")


def test_there_are_at_least_twenty_bad_files() -> None:
    assert len(FILES) >= 20


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_bad_file_is_a_user_error_with_the_key_path(path: Path) -> None:
    with pytest.raises(UserError) as info:
        spec.load(path)
    message = str(info.value)
    assert expected(path) in message
    assert message.startswith(str(path))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_plan_exits_2_on_bad_file(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(path)]) == 2
    assert expected(path) in " ".join(capsys.readouterr().err.split())


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        spec.load(tmp_path / "nope.toml")


def test_sysbench_threads_come_from_the_workload_table_and_count_once(tmp_path: Path) -> None:
    """The way the refusal points: the table's threads (or matrix.clients) make distinct
    variants, each run with its own concurrency."""
    f = tmp_path / "sb.toml"
    f.write_text(
        '[experiment]\nname = "sb"\nreference = { clients = 1 }\n[matrix]\n'
        'workload = { driver = "sysbench", test = "oltp_write_only", tables = 1, '
        "table_size = 1000 }\nclients = [1, 4]\nthreads = 1\n"
    )
    variants = spec.load(f).variants()
    assert [v.workload.clients for v in variants] == [1, 4]
    assert len({v.variant_id for v in variants}) == 2
    assert [v.label for v in variants] == ["c=1", "c=4"]

"""`blocklab selftest overhead`: bad input exits 2 before anything starts; a tiny real
run on Debian's PG 15 prints the ratio and its CI and leaves nothing behind."""

from __future__ import annotations

import re

from blocklab import proc
from blocklab.cli import main
from blocklab.execution.overhead import OverheadResult, measure_overhead, pair_order
from blocklab.paths import Paths
from blocklab.postgres.installation import Installation
from blocklab.state import State


def test_bad_flags_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["selftest", "overhead", "--pg", "99"]) == 2
    assert "--pg" in capsys.readouterr().err
    assert main(["selftest", "overhead", "--pg", "15", "--prefix", "/tmp"]) == 2
    assert main(["selftest", "overhead", "--prefix", "/tmp"]) == 2
    assert "not a blocklab build" in capsys.readouterr().err
    assert main(["selftest", "overhead", "--pairs", "1"]) == 2


def test_order_alternates() -> None:
    assert [pair_order(i) for i in range(3)] == [
        ("bare", "instrumented"),
        ("instrumented", "bare"),
        ("bare", "instrumented"),
    ]
    assert OverheadResult().verdict() == "too few pairs for a CI"


def test_tiny_real_overhead_run(paths: Paths, pg15_system: Installation) -> None:
    res = measure_overhead(
        pg15_system, paths, pairs=2, duration_s=2, scale=1, clients=1, log=lambda _m: None
    )
    assert res.order == ["bare", "instrumented", "instrumented", "bare"]
    assert set(res.bare_tps) == set(res.instrumented_tps) == {0, 1}
    assert all(v > 0 for v in [*res.bare_tps.values(), *res.instrumented_tps.values()])
    assert all(n >= 2 for n in res.samples_per_run)  # the sampler ran in every run
    c = res.comparison
    assert c is not None and c.n_pairs == 2 and c.ci95_low is not None
    assert State(paths.state_file).entries() == []  # the server was stopped and forgotten
    assert not list(paths.work.glob("selftest-overhead-*"))
    out = proc.run(["pgrep", "-a", "postgres"], check=False).stdout
    assert not re.search(r"selftest-overhead", out)

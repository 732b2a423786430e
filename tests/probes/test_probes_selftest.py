"""`blocklab selftest overhead`: bad input exits 2 before anything starts; a tiny real
run on Debian's PG 15 prints the ratio and its CI and leaves nothing behind."""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import Any

import pytest

from blocklab import proc
from blocklab.cli import main
from blocklab.execution import overhead
from blocklab.execution.overhead import OverheadResult, arm_steps, measure_overhead, pair_order
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
    os.chmod(paths.home, 0o700)  # a home made by `mktemp -d`: initdb as the server user failed
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
    assert paths.home.stat().st_mode & 0o777 == 0o701  # entry for the server user, no more
    out = proc.run(["pgrep", "-a", "postgres"], check=False).stdout
    assert f"{paths.work}/selftest-overhead" not in out  # this home's (another suite may run)


def test_arms_differ_only_in_the_probes() -> None:
    bare = arm_steps("bare", duration_s=5, clients=2)
    instrumented = arm_steps("instrumented", duration_s=5, clients=2)
    assert bare.pgbench_args == ("-n", "-c", "2", "-j", "2", "-T", "5")
    assert (bare.probes, instrumented.probes) == (False, True)
    assert dataclasses.replace(bare, probes=True) == instrumented
    with pytest.raises(ValueError, match="arm"):
        arm_steps("other", duration_s=5, clients=2)


class _Recorder:
    """Stands in for Instrumentation and Bystander: records what each arm did."""

    calls: list[tuple[str, str]] = []

    def __init__(self, ctx: object) -> None:
        self.kind = type(self).__name__

    def begin(self) -> None:
        self.calls.append((self.kind, "begin"))

    def end(self, *args: object) -> Any:
        self.calls.append((self.kind, "end"))
        return SimpleNamespace(facts={"samples": 3})

    def close(self) -> None:
        self.calls.append((self.kind, "close"))


class _Probes(_Recorder):
    pass


class _Bystander(_Recorder):
    pass


def test_both_arms_connect_wait_and_run_the_same_pgbench(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    argvs: list[list[str]] = []
    contexts: list[str] = []
    out = (
        "number of transactions actually processed: 10\n"
        "tps = 5.0 (without initial connection time)\n"
    )

    def fake_pgbench(_cluster: object, args: list[str]) -> Any:
        argvs.append(args)
        return SimpleNamespace(stdout=out)

    monkeypatch.setattr(overhead, "Instrumentation", _Probes)
    monkeypatch.setattr(overhead, "Bystander", _Bystander)
    monkeypatch.setattr(overhead, "_pgbench", fake_pgbench)
    monkeypatch.setattr(overhead, "context_for", lambda *_a, **_k: contexts.append("ctx"))
    _Recorder.calls = []
    res = OverheadResult()
    for arm in ("bare", "instrumented"):
        assert overhead._one(None, arm, 5, 2, 1.0, res) == 5.0  # type: ignore[arg-type]
    assert argvs[0] == argvs[1] and contexts == ["ctx", "ctx"]
    assert _Recorder.calls == [
        ("_Bystander", "begin"), ("_Bystander", "end"), ("_Probes", "begin"), ("_Probes", "end")
    ]  # fmt: skip
    assert res.samples_per_run == [3]

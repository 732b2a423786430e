"""Progress of an experiment: a rich bar with the current variant, round and an ETA from
finished runs; or, quiet, one line per finished run (for CI logs)."""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from blocklab.store import RunRecord


def _describe(record: RunRecord) -> str:
    if record.status == "ok" and record.tps is not None:
        metric = record.provenance.get("throughput_metric", "tps")
        return f"{record.tps:.1f} {metric}, {record.latency_avg_ms or 0:.3f} ms"
    return f"FAILED: {record.reason}"


class _Eta:
    def __init__(self) -> None:
        self.durations: list[float] = []
        self.remaining = 0

    def text(self) -> str:
        if not self.durations:
            return "ETA: after the first run"
        seconds = statistics.median(self.durations) * self.remaining
        return f"ETA {int(seconds // 60)}m{int(seconds % 60):02d}s"


class QuietProgress:
    def __init__(self, console: Console):
        self.console = console
        self.eta = _Eta()
        self.total = 0
        self.done = 0

    def begin(self, total_runs: int, done_runs: int) -> None:
        self.total, self.done = total_runs, done_runs
        self.eta.remaining = total_runs - done_runs
        if done_runs:
            self.console.print(f"resuming: {done_runs} of {total_runs} runs already stored")

    def run_started(self, label: str, round_no: int, position: int) -> None:
        self.current = f"round {round_no} [{position + 1}] {label}"

    def _count(self, elapsed_s: float) -> None:
        self.done += 1
        self.eta.durations.append(elapsed_s)
        self.eta.remaining = max(0, self.total - self.done)

    def run_finished(self, record: RunRecord, elapsed_s: float) -> None:
        self._count(elapsed_s)
        self.console.print(
            f"{self.done}/{self.total} {self.current}: {_describe(record)} "
            f"({elapsed_s:.0f} s; {self.eta.text()})",
            highlight=False,
        )

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def grow(self, extra_runs: int) -> None:
        self.total += extra_runs
        self.eta.remaining += extra_runs
        self.console.print(f"adding a round ({extra_runs} runs): CI not yet narrow enough")

    def close(self) -> None:
        pass


class BarProgress(QuietProgress):
    def __init__(self, console: Console):
        super().__init__(console)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            transient=False,
        )
        self.task = self.bar.add_task("starting", total=1, eta="")

    def begin(self, total_runs: int, done_runs: int) -> None:
        super().begin(total_runs, done_runs)
        self.bar.start()
        self.bar.update(self.task, total=total_runs, completed=done_runs, eta=self.eta.text())

    def run_started(self, label: str, round_no: int, position: int) -> None:
        super().run_started(label, round_no, position)
        self.bar.update(self.task, description=self.current)

    def run_finished(self, record: RunRecord, elapsed_s: float) -> None:
        self._count(elapsed_s)
        self.bar.console.print(f"  {self.current}: {_describe(record)}", highlight=False)
        self.bar.update(self.task, completed=self.done, eta=self.eta.text())

    def grow(self, extra_runs: int) -> None:
        super().grow(extra_runs)
        self.bar.update(self.task, total=self.total)

    def close(self) -> None:
        self.bar.stop()

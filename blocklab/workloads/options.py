"""Checks shared by the drivers' typed options: bad values are a UserError naming the key
and the allowed values."""

from __future__ import annotations

from blocklab.errors import UserError

MAX_THREADS = 1024
MAX_TIME_S = 7 * 24 * 3600


def int_in_range(key: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{key}: {value!r} is not an integer from {low} to {high}")


def threads_and_time(threads: int, time_s: int | None) -> None:
    int_in_range("workload.threads", threads, 1, MAX_THREADS)
    if time_s is not None:
        int_in_range("workload.time_s", time_s, 1, MAX_TIME_S)

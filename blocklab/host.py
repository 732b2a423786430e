"""Facts about the machine, gathered in one explicit step (stored with each experiment)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

from blocklab import __version__


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_facts() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": _mem_total_bytes(),
        "python": platform.python_version(),
        "blocklab_version": __version__,
    }

"""proc.interruptible, which `blocklab run` and `report --watch` stop by: Ctrl-C and SIGTERM
interrupt wherever the process was started, and the handlers before come back after."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, signal
from blocklab import proc

signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job starts
got = []
for sig in (signal.SIGINT, signal.SIGTERM):
    try:
        with proc.interruptible():
            os.kill(os.getpid(), sig)
            signal.pause()  # not reached when the signal interrupted
    except KeyboardInterrupt:
        got.append(sig.name)
print(*got)
print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
      signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_ctrl_c_and_sigterm_interrupt_inside_and_the_handlers_come_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["SIGINT SIGTERM", "True True"]

"""Whether processes a test started are still running, read from Linux's ``/proc``."""

from __future__ import annotations

import time
from pathlib import Path


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not finished (a zombie counts as finished)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def still_running(pids: list[int], patience: float = 30.0) -> list[int]:
    """The pids that are still running after waiting up to ``patience`` seconds for them to end."""
    deadline = time.monotonic() + patience
    running = [pid for pid in pids if pid_running(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        running = [pid for pid in running if pid_running(pid)]
    return running

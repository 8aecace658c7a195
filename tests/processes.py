"""Processes of the tests: Python run in a child process with this repository importable, and whether processes a
test started are still running, read from Linux's ``/proc``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

#: the repository's root
ROOT = Path(__file__).resolve().parents[1]


def repo_env() -> dict[str, str]:
    """``os.environ`` with the repository first on ``PYTHONPATH``: a child Python imports vecenv and ``tests`` from
    it."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def run_python(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in the repository's root with :func:`repo_env`; its output captured as text."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=repo_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


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

"""One case of ``vecenv bench`` in a fresh Python process, and that process's entry point.

:func:`run_case_isolated` starts ``python -m vecenv.bench.runner --case JSON --result FILE`` in its own
session, which calls :func:`case_main`: it runs :func:`~vecenv.bench.case.run_case` and writes the record
as JSON. Start-up time, memory and throughput then do not depend on the cases run before (imports, a
running forkserver, garbage), and a backend that crashes or hangs costs one case, not the run.

The case process runs in a session of its own, so a signal sent to the command's process group (Ctrl-C,
``timeout``) does not reach it: :func:`run_case_isolated` ends it on the way out (an exception, such as the one
``vecenv bench`` raises on SIGTERM), and the case process ends itself, with the processes it started, once the
process that started it is gone (killed with SIGKILL, say), removing the folder of its result file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from vecenv.bench.case import Case, case_fields, run_case

__all__ = ["PARENT_POLL_S", "case_main", "run_case_isolated"]

#: Seconds between two checks, in a case process, that the process that started it is still there.
PARENT_POLL_S = 1.0


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End the case process and everything it started (its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def run_case_isolated(case: Case, timeout: float) -> dict[str, Any]:
    """Measure one case in a fresh Python process (``python -m vecenv.bench.runner``).

    The process runs in its own session; on a time-out (or Ctrl-C here, or any other exception) it and all its
    descendants are ended, and its temporary folder is removed. It also ends itself if this process is gone
    (``--parent-pid``). A case that crashes or times out gives a record with ``status="error"``.
    """
    with tempfile.TemporaryDirectory(prefix="vecenv-bench-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        command = [
            sys.executable,
            "-m",
            "vecenv.bench.runner",
            "--case",
            json.dumps(asdict(case)),
            "--result",
            result_path,
            "--parent-pid",
            str(os.getpid()),
        ]
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return _error_record(case, f"timed out after {timeout:g} s (the case process was killed)")
        except BaseException:
            _kill_group(process)
            raise
        if os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as f:
                record: dict[str, Any] = json.load(f)
            return record
        lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
        last = lines[-1] if lines else "no output"
        return _error_record(case, f"the case process exited with status {process.returncode}: {last}")


def _error_record(case: Case, error: str) -> dict[str, Any]:
    return {**case_fields(case), "status": "error", "error": error}


def _end_orphaned_case(result_folder: str) -> None:
    """End this case process, whose parent is gone: remove the folder of its result, which nobody will read, then
    kill its session (this process and everything it started) when it leads one, else this process alone."""
    shutil.rmtree(result_folder, ignore_errors=True)
    if os.getsid(0) == os.getpid():  # started by run_case_isolated: a session (and process group) of its own
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _watch_parent(parent_pid: int, result_folder: str, interval: float = PARENT_POLL_S) -> threading.Thread:
    """Start a daemon thread that calls :func:`_end_orphaned_case` once this process's parent is no longer
    ``parent_pid`` (it ended, and this process was given to another one), checking every ``interval`` seconds."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        _end_orphaned_case(result_folder)

    thread = threading.Thread(target=watch, name="vecenv-bench-parent-watch", daemon=True)
    thread.start()
    return thread


def case_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of a case process: run the case given as JSON, write its record as JSON.

    With ``--parent-pid PID``, the process ends itself (with everything it started, see :func:`_end_orphaned_case`)
    within :data:`PARENT_POLL_S` seconds of its parent being no longer ``PID``.
    """
    parser = argparse.ArgumentParser(prog="python -m vecenv.bench.runner", description="Run one benchmark case.")
    parser.add_argument("--case", required=True, help="the Case as a JSON object")
    parser.add_argument("--result", required=True, help="file to write the result record to")
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="the process that started this one: once it is gone, end this process and what it started, and "
        "remove the folder of --result (a folder of this case's own)",
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        _watch_parent(args.parent_pid, os.path.dirname(os.path.abspath(args.result)))
    case = Case(**json.loads(args.case))
    record = run_case(case)
    if record.get("traceback"):
        print(record["traceback"], file=sys.stderr)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(record, f)
    return 0

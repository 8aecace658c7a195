"""One case of ``vecenv bench`` in a fresh Python process, and that process's entry point.

:func:`run_case_isolated` starts ``python -m vecenv.bench.runner --case JSON --result FILE`` in its own
session, which calls :func:`case_main`: it runs :func:`~vecenv.bench.case.run_case` and writes the record
as JSON. Start-up time, memory and throughput then do not depend on the cases run before (imports, a
running forkserver, garbage), and a backend that crashes or hangs costs one case, not the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from vecenv.bench.case import Case, case_fields, run_case

__all__ = ["case_main", "run_case_isolated"]


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

    The process runs in its own session; on a time-out (or Ctrl-C here) it and all its descendants are
    ended. A case that crashes or times out gives a record with ``status="error"``.
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


def case_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of a case process: run the case given as JSON, write its record as JSON."""
    parser = argparse.ArgumentParser(prog="python -m vecenv.bench.runner", description="Run one benchmark case.")
    parser.add_argument("--case", required=True, help="the Case as a JSON object")
    parser.add_argument("--result", required=True, help="file to write the result record to")
    args = parser.parse_args(argv)
    case = Case(**json.loads(args.case))
    record = run_case(case)
    if record.get("traceback"):
        print(record["traceback"], file=sys.stderr)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(record, f)
    return 0

"""The suite's own timeouts: a test that uses Ray times out with pytest-timeout's ``thread`` method, which ends a
run stuck in native code (where Ray waits), and every other test keeps the ``signal`` method.

Checked in child pytest runs: one collects the Ray tests and others (which timeout settings each item gets), one
runs a test stuck in native code under the suite's hooks (a pthread mutex locked twice: no Python signal handler
runs there, as in Ray's C++ waits) and must end, with the stuck frame in the dump.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COLLECT_SCRIPT = """
import json, sys
import pytest

class Record:
    def __init__(self):
        self.methods = {}

    def pytest_collection_finish(self, session):
        for item in session.items:
            marker = item.get_closest_marker("timeout")
            self.methods[item.nodeid] = None if marker is None else [
                marker.args[0] if marker.args else marker.kwargs.get("timeout"), marker.kwargs.get("method")
            ]

record = Record()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[record])
print("METHODS " + json.dumps(record.methods))
sys.exit(int(code))
"""


def test_ray_tests_and_only_they_time_out_with_the_thread_method() -> None:
    """The ``[ray]`` case of a backend-parametrized test, a test that uses the ``ray_session`` fixture and the tests
    of test_ray.py get ``method="thread"`` (an explicit timeout value is kept); the other cases of the same tests
    and a non-Ray test with its own timeout keep the default method."""
    files = ["tests/test_autoreset.py", "tests/test_cli.py", "tests/test_ray.py", "tests/test_drop_in.py"]
    result = subprocess.run(
        [sys.executable, "-c", COLLECT_SCRIPT, *files],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("METHODS "))
    methods = json.loads(line.removeprefix("METHODS "))
    if "tests/test_ray.py::test_connect_timeout_is_checked[0]" not in methods:  # ray is not installed
        assert not any(method for method in methods.values() if method and method[1] == "thread")
        pytest.skip("ray is not installed: no test uses it")
    thread = [None, "thread"]
    assert methods["tests/test_autoreset.py::test_seed_list_and_reset[ray]"] == thread
    assert methods["tests/test_autoreset.py::test_seed_list_and_reset[dummy]"] is None
    assert methods["tests/test_autoreset.py::test_seed_list_and_reset[subproc]"] is None
    assert methods["tests/test_cli.py::test_ray_backend_prints_the_reference_statistics"] == thread
    assert methods["tests/test_cli.py::test_ray_address_needs_the_ray_backend"] is None  # Ray is never started
    assert methods["tests/test_ray.py::test_connect_timeout_is_checked[0]"] == thread
    assert methods["tests/test_ray.py::test_simulated_cluster_spread_and_lost_node"] == thread
    drop_in = [nodeid for nodeid in methods if nodeid.startswith("tests/test_drop_in.py::")]
    assert drop_in and all(methods[nodeid] is None or methods[nodeid][1] is None for nodeid in drop_in)
    assert [60, None] in [methods[nodeid] for nodeid in drop_in]  # their own timeouts, the default method


STUCK_TESTS = '''
import ctypes
import time

import pytest


def native_deadlock():
    """Lock a pthread mutex twice from this thread: the second lock waits in the C library for ever, where no
    Python signal handler runs (as Ray's waits in its C++ code)."""
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER, a mutex that deadlocks
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


@pytest.mark.parametrize("backend", ["dummy", "ray"])
def test_stuck(backend):
    if backend == "ray":
        native_deadlock()
    else:
        time.sleep(600)  # in Python: the signal method fails this test alone, and the run goes on
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stuck test uses glibc's pthread mutex")
def test_a_ray_test_stuck_in_native_code_ends_the_run(tmp_path) -> None:
    """Under the suite's hooks, a Ray test stuck in native code ends the run (pytest-timeout's thread method: every
    thread's stack dumped, then ``os._exit(1)``), where the signal method would wait for ever; the test before
    it, stuck in Python, only fails."""
    (tmp_path / "test_stuck.py").write_text(textwrap.dedent(STUCK_TESTS))
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems, pytest_configure\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini")]
    command += ["--rootdir", str(tmp_path), str(tmp_path / "test_stuck.py")]
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=240)
    except subprocess.TimeoutExpired as exc:  # (the child is killed by subprocess.run)
        pytest.fail(f"the run stuck in native code did not end: {exc}")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    assert "test_stuck.py::test_stuck[dummy] FAILED" in out, out[-3000:]  # the signal method: that test only
    assert "Timeout" in out and "native_deadlock" in out, out[-3000:]  # the dump names the stuck frame
    assert "test_stuck.py::test_stuck[ray] PASSED" not in out and "test_stuck.py::test_stuck[ray] FAILED" not in out

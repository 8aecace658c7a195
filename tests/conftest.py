"""Shared fixtures: the backends every contract test runs on, and a factory that closes what it builds."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing as mp
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import vecenv

START_METHODS = mp.get_all_start_methods()
#: SubprocVecEnv's default, as in SB3.
DEFAULT_START_METHOD = "forkserver" if "forkserver" in START_METHODS else "spawn"
#: whether ray (the ``ray`` extra) is installed: RayVecEnv's tests run only then
HAS_RAY = importlib.util.find_spec("ray") is not None
_NEEDS_RAY = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")
#: One entry per backend class (SubprocVecEnv with its default start method; RayVecEnv where ray is installed),
#: and a test-only transport (worker threads answering through events, tests/fake_transport.py) that must pass the
#: same contract tests.
BACKENDS = ["dummy", "subproc", "thread", pytest.param("ray", marks=_NEEDS_RAY)]
#: Every start method of SubprocVecEnv beside DummyVecEnv; used by the basic step/reset/autoreset and error tests
#: (RayVecEnv's autoreset modes are tested in test_ray.py, its contract through BACKENDS).
ALL_BACKENDS = ["dummy", *(f"subproc-{method}" for method in START_METHODS)]
#: RayVecEnv in the contract tests: two actors that share the session's CPUs
RAY_TEST_OPTIONS = {"n_workers": 2, "actor_options": {"num_cpus": 0}}


def pytest_configure(config: pytest.Config) -> None:
    """Let forkserver workers start from a server that has already imported gymnasium, the test envs and vecenv
    (speed: a worker that imports vecenv itself spends about 0.2 s of CPU on it, and the suite starts hundreds of
    workers; spawn workers still import everything themselves); register the ``ray`` marker; give SIGINT Python's
    own handler.

    A shell without job control starts a background command (``make test &``, a CI step run with ``nohup``) with
    SIGINT ignored, and Python then installs no handler: the tests that deliver a Ctrl-C would see nothing. The
    suite runs with Python's default handler wherever it was started from (vecenv's behaviour over an ignored
    SIGINT is tested on its own, in test_interrupts.py).
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if "forkserver" in START_METHODS:
        mp.set_forkserver_preload(["tests.envs", "vecenv"])
    config.addinivalue_line("markers", "ray: the test uses Ray (its timeout uses pytest-timeout's thread method)")


def uses_ray(item: pytest.Item) -> bool:
    """Whether a test uses Ray: marked ``ray``, using the ``ray_session`` fixture, or parametrized with ``"ray"``
    (a backend, layout, ... parameter)."""
    if item.get_closest_marker("ray") is not None or "ray_session" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(isinstance(v, str) and v == "ray" for v in callspec.params.values())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that use Ray time out with pytest-timeout's ``thread`` method (same timeout).

    Ray waits inside its C++ code, where the default ``signal`` method's exception never arrives (nor Ctrl-C):
    a test stuck there would hang the run. The ``thread`` method dumps every thread's stack and ends the run
    (``os._exit``) instead; the other tests keep the ``signal`` method, which fails only the test.
    """
    for item in items:
        if uses_ray(item):
            marker = item.get_closest_marker("timeout")
            args = marker.args if marker is not None else ()
            kwargs = {**(marker.kwargs if marker is not None else {}), "method": "thread"}
            item.add_marker(pytest.mark.timeout(*args, **kwargs), append=False)


def build_venv(backend: str, env_fns: list[Callable]) -> vecenv.VecEnv:
    """Build ``env_fns`` with ``backend`` ("dummy", "subproc", "subproc-<start method>" or "thread")."""
    if backend == "dummy":
        return vecenv.DummyVecEnv(env_fns)
    if backend == "subproc":
        return vecenv.SubprocVecEnv(env_fns)
    if backend == "thread":
        from tests.fake_transport import ThreadVecEnv

        return ThreadVecEnv(env_fns)
    if backend == "ray":
        return vecenv.RayVecEnv(env_fns, **RAY_TEST_OPTIONS)  # type: ignore[arg-type]
    assert backend.startswith("subproc-"), backend
    return vecenv.SubprocVecEnv(env_fns, start_method=backend.removeprefix("subproc-"))


@pytest.fixture
def built() -> Iterator[list[Any]]:
    """A list the test appends the vector envs it builds to; each is closed at teardown."""
    venvs: list[Any] = []
    yield venvs
    for venv in venvs:
        venv.close()


@pytest.fixture
def make_venv() -> Iterator[Callable[..., vecenv.VecEnv]]:
    """``make_venv(backend, env_fns)`` builds a vec env and closes it at teardown."""
    built: list[vecenv.VecEnv] = []

    def make(backend: str, env_fns: list[Callable]) -> vecenv.VecEnv:
        venv = build_venv(backend, env_fns)
        built.append(venv)
        return venv

    yield make
    for venv in built:
        with contextlib.suppress(Exception):
            venv.close()


@pytest.fixture(params=ALL_BACKENDS)
def any_backend(request: pytest.FixtureRequest) -> str:
    """Every backend and every start method available on this platform."""
    return request.param


@pytest.fixture(scope="session")
def ray_session() -> Iterator[object]:
    """One local Ray for the whole test session (started on first use; ~3 s), shut down at its end.

    Its token comes from the environment and its files live in a temporary directory, so nothing is left in
    ``~/.ray`` or ``/tmp/ray``; only the Ray processes started here are ended (``ray.shutdown()``). It never
    joins another Ray instance of the machine: no address is given, and the latest cluster started with
    ``ray start`` is looked up in that fresh directory (``RAY_ADDRESS`` is ignored for the session).

    Its worker processes (the actors) run at the tests' own priority (``RAY_worker_niceness=0``): Ray's default,
    niceness 15, starves them on a busy machine (an actor then took about a minute to start on two cores shared
    with other processes).
    """
    ray = pytest.importorskip("ray")
    saved = {name: os.environ.get(name) for name in ("RAY_AUTH_TOKEN", "RAY_ADDRESS", "RAY_worker_niceness")}
    os.environ["RAY_AUTH_TOKEN"] = saved["RAY_AUTH_TOKEN"] or secrets.token_hex(16)
    os.environ.pop("RAY_ADDRESS", None)
    os.environ["RAY_worker_niceness"] = "0"  # noqa: SIM112 (Ray's spelling of its setting)
    temp_dir = tempfile.mkdtemp(prefix="vecenv-ray-")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir)
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """DummyVecEnv, SubprocVecEnv (default start method), RayVecEnv (where ray is installed) and the test-only
    thread transport."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param

"""Shared fixtures: the backends every contract test runs on, and a factory that closes what it builds."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing as mp
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator

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
    """Let forkserver workers start from a server that has already imported gymnasium and the test envs (speed)."""
    if "forkserver" in START_METHODS:
        mp.set_forkserver_preload(["tests.envs"])


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
    ``~/.ray`` or ``/tmp/ray``; only the Ray processes started here are ended (``ray.shutdown()``).
    """
    ray = pytest.importorskip("ray")
    saved = os.environ.get("RAY_AUTH_TOKEN")
    os.environ["RAY_AUTH_TOKEN"] = saved or secrets.token_hex(16)
    temp_dir = tempfile.mkdtemp(prefix="vecenv-ray-")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_AUTH_TOKEN", None)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """DummyVecEnv, SubprocVecEnv (default start method), RayVecEnv (where ray is installed) and the test-only
    thread transport."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param

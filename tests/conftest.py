"""Shared fixtures: the backends every contract test runs on, and a factory that closes what it builds."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Callable, Iterator

import pytest

import vecenv

START_METHODS = mp.get_all_start_methods()
#: SubprocVecEnv's default, as in SB3.
DEFAULT_START_METHOD = "forkserver" if "forkserver" in START_METHODS else "spawn"
#: Every backend and start method; used by the basic step/reset/autoreset and error tests.
ALL_BACKENDS = ["dummy", *(f"subproc-{method}" for method in START_METHODS)]
#: One entry per backend class (SubprocVecEnv with its default start method), and a test-only transport (worker
#: threads answering through events, tests/fake_transport.py) that must pass the same contract tests.
BACKENDS = ["dummy", "subproc", "thread"]


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


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """DummyVecEnv, SubprocVecEnv (default start method) and the test-only thread transport."""
    return request.param

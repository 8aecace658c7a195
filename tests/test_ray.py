"""RayVecEnv: parity with DummyVecEnv, wrappers on top, failures, lifecycle and placement.

The backend contract tests (the ``backend`` fixture) also run on RayVecEnv; these cover what is Ray's own:
uneven splits over actors, every autoreset mode, partial batches, failures of actors, Ray's lifecycle, and a
simulated multi-node cluster (in a child process, with its own Ray). Skipped where ray is not installed.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import vecenv
from tests.conftest import HAS_RAY
from tests.envs import CounterEnv, EnvFaultError, FaultEnv, SpaceEnv, space_obs
from tests.envs_failure import STEP, TERMINATE_LOCK_INFO, TERMINATE_UNPICKLABLE_INFO
from tests.envs_failure import expected_obs as script_obs
from tests.envs_failure import make as make_script_env
from tests.envs_faults import InjectedFault, fault_message, make_env
from vecenv.adapters import to_gymnasium
from vecenv.errors import WorkerDiedError

pytestmark = [pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)"), pytest.mark.ray]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: actors share the session's two CPUs
SHARED = {"num_cpus": 0}


def counter_fns(n: int, **kwargs: Any) -> list:
    return [functools.partial(CounterEnv, offset=i, **kwargs) for i in range(n)]


def assert_same_step(got: tuple, expected: tuple) -> None:
    obs, rewards, dones, infos = got
    e_obs, e_rewards, e_dones, e_infos = expected
    np.testing.assert_array_equal(obs, e_obs)
    np.testing.assert_array_equal(rewards, e_rewards)
    assert rewards.dtype == e_rewards.dtype
    np.testing.assert_array_equal(dones, e_dones)
    assert len(infos) == len(e_infos)
    for info, e_info in zip(infos, e_infos, strict=True):
        assert info.keys() == e_info.keys()
        for key, value in e_info.items():
            np.testing.assert_array_equal(info[key], value)


def monitor_record(info: dict[str, Any]) -> Any:
    """VecMonitor's episode record in ``info`` without its wall-clock time (or what the env put there)."""
    episode = info.get("episode")
    return {k: v for k, v in episode.items() if k != "t"} if isinstance(episode, dict) else episode


@pytest.fixture
def ray_venvs(ray_session: Any):
    """A list to append vector envs to; each is closed at teardown."""
    built: list[vecenv.VecEnv] = []
    yield built
    for venv in built:
        venv.close()


@pytest.mark.parametrize(("num_envs", "n_workers"), [(5, 2), (7, 3)])
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_parity_with_dummy_uneven_splits_every_autoreset_mode(ray_venvs, num_envs, n_workers, mode) -> None:
    """Same seeds and actions: the same observations, rewards, dones, infos (terminal observations, reset
    infos) and flags as DummyVecEnv, with groups of unequal size."""
    fns = counter_fns(num_envs, episode_len=2, end="both")
    ray_venv = vecenv.RayVecEnv(fns, n_workers=n_workers, actor_options=SHARED, autoreset_mode=mode)
    dummy = vecenv.DummyVecEnv(fns, autoreset_mode=mode)
    ray_venvs += [ray_venv, dummy]
    assert [len(w.env_indices) for w in ray_venv._workers] == [
        len(g) for g in vecenv.vec_env.split_groups(num_envs, n_workers)
    ]
    ray_venv.seed(7)
    dummy.seed(7)
    np.testing.assert_array_equal(ray_venv.reset(), dummy.reset())
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(9):
        actions = rng.integers(0, 3, num_envs)
        expected = dummy.step(actions)
        assert_same_step(ray_venv.step(actions), expected)
        np.testing.assert_array_equal(ray_venv.terminations, dummy.terminations)
        np.testing.assert_array_equal(ray_venv.truncations, dummy.truncations)
        assert ray_venv.reset_infos == dummy.reset_infos
        ended += int(expected[2].sum())
        if mode is AutoresetMode.DISABLED and expected[2].any():
            ray_venv.reset()
            dummy.reset()
    assert ended > 0


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_dict_and_tuple_observations(ray_venvs, kind) -> None:
    venv = vecenv.RayVecEnv(
        [functools.partial(SpaceEnv, kind, offset=i) for i in range(3)], n_workers=2, actor_options=SHARED
    )
    ray_venvs.append(venv)
    obs = venv.reset()
    expected = [space_obs(kind, 100 * i) for i in range(3)]
    if kind == "dict":
        for key in obs:
            np.testing.assert_array_equal(obs[key], np.stack([e[key] for e in expected]))
    else:
        for k, part in enumerate(obs):
            np.testing.assert_array_equal(part, np.stack([e[k] for e in expected]))


def test_partial_batches_match_dummy(ray_venvs) -> None:
    """send / recv by env id: the same results as DummyVecEnv, whole actor groups at a time."""
    fns = counter_fns(4, episode_len=3)
    ray_venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED)
    dummy = vecenv.DummyVecEnv(fns)
    ray_venvs += [ray_venv, dummy]
    for venv in (ray_venv, dummy):
        venv.seed(1)
        venv.async_reset()
    first = [venv.recv() for venv in (ray_venv, dummy)]
    np.testing.assert_array_equal(first[0][0], first[1][0])
    np.testing.assert_array_equal(first[0][4], [0, 1, 2, 3])
    for ids in ([2, 3], [0, 1], [3, 2, 1, 0]):
        actions = np.arange(len(ids)) % 3
        results = []
        for venv in (ray_venv, dummy):
            venv.send(actions, ids)
            results.append(venv.recv())
        (obs, rewards, dones, infos, env_ids), (e_obs, e_rewards, e_dones, e_infos, e_env_ids) = results
        np.testing.assert_array_equal(env_ids, e_env_ids)
        np.testing.assert_array_equal(obs, e_obs)
        np.testing.assert_array_equal(rewards, e_rewards)
        np.testing.assert_array_equal(dones, e_dones)
        assert [sorted(i) for i in infos] == [sorted(i) for i in e_infos]


def test_wrappers_on_top_match_dummy(ray_venvs) -> None:
    """VecNormalize over VecFrameStack over VecMonitor: the same numbers as the same stack on DummyVecEnv."""

    def stack(venv: vecenv.VecEnv) -> vecenv.VecEnv:
        return vecenv.VecNormalize(vecenv.VecFrameStack(vecenv.VecMonitor(venv), n_stack=2))

    fns = counter_fns(3, episode_len=2)
    ray_venv = stack(vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED))
    dummy = stack(vecenv.DummyVecEnv(fns))
    ray_venvs += [ray_venv, dummy]
    ray_venv.seed(5)
    dummy.seed(5)
    np.testing.assert_allclose(ray_venv.reset(), dummy.reset())
    for t in range(6):
        actions = np.full(3, t % 3)
        obs, rewards, dones, infos = ray_venv.step(actions)
        e_obs, e_rewards, e_dones, e_infos = dummy.step(actions)
        np.testing.assert_allclose(obs, e_obs)
        np.testing.assert_allclose(rewards, e_rewards)
        np.testing.assert_array_equal(dones, e_dones)
        assert [monitor_record(info) for info in infos] == [monitor_record(info) for info in e_infos]
    np.testing.assert_allclose(ray_venv.obs_rms.mean, dummy.obs_rms.mean)


def test_calls_by_global_index(ray_venvs) -> None:
    venv = vecenv.RayVecEnv(counter_fns(5), n_workers=2, actor_options=SHARED)
    ray_venvs.append(venv)
    assert venv.get_attr("offset") == [0, 1, 2, 3, 4]
    assert venv.get_attr("custom_attr", indices=[4, 0]) == ["custom-4", "custom-0"]
    venv.set_attr("episode_len", 9, indices=[1, 3])
    assert venv.get_attr("episode_len") == [3, 9, 3, 9, 3]
    assert venv.env_method("get_wrapper_attr", "offset", indices=-1) == [4]
    assert venv.has_attr("custom_attr") and not venv.has_attr("nope")


def test_make_vec_env_and_to_gymnasium(ray_session) -> None:
    venv = vecenv.make_vec_env(
        "CartPole-v1", n_envs=3, seed=0, vec_env_cls=vecenv.RayVecEnv, vec_env_kwargs={"actor_options": SHARED}
    )
    try:
        assert isinstance(venv, vecenv.RayVecEnv) and venv.n_workers == 2
        obs = venv.reset()
        assert obs.shape == (3, 4)
        envs = to_gymnasium(venv)
        obs, _ = envs.reset(seed=[1, 2, 3])
        reference = [gym.make("CartPole-v1").reset(seed=s)[0] for s in (1, 2, 3)]
        np.testing.assert_array_equal(obs, np.stack(reference))
        obs, rewards, terminations, truncations, _ = envs.step(np.array([0, 1, 0]))
        assert obs.shape == (3, 4) and rewards.dtype == np.float64
        assert terminations.dtype == truncations.dtype == np.bool_
    finally:
        venv.close()


# --- failures ---------------------------------------------------------------------------------------------


def test_env_exception_keeps_its_type_and_names_the_env(ray_venvs) -> None:
    fns = [functools.partial(FaultEnv, offset=i, fail_in="step" if i == 3 else None, after=2) for i in range(4)]
    venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED)
    ray_venvs.append(venv)
    venv.reset()
    venv.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(EnvFaultError, match="custom fault in step") as info:
        venv.step(np.zeros(4, dtype=np.int64))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "env 3" in notes and "Ray actor" in notes
    assert "Traceback" in str(info.value.__cause__)
    assert venv.get_attr("t") == [2, 2, 2, 1]  # the actors live on; env 3 did not step


def test_an_info_that_cannot_be_copied_loses_no_episode_end(ray_venvs) -> None:
    """Env 3 (the second actor) ends its episode with a lock in its info, env 1 returns a value only pickle refuses:
    the step raises naming both; the next step returns what every env did (the values left out), once."""
    fns = [functools.partial(make_script_env, i) for i in range(4)]
    venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED)
    ray_venvs.append(venv)
    venv.reset()
    step_actions = np.array([STEP, TERMINATE_UNPICKLABLE_INFO, STEP, TERMINATE_LOCK_INFO])
    with pytest.raises(vecenv.UncopyableInfoError) as info:
        venv.step(step_actions)
    assert sorted(info.value.entries) == [(1, "native", "tests.envs_failure.NoPickle"), (3, "handle", "_thread.lock")]
    obs, rewards, dones, infos = venv.step(np.full(4, STEP))
    np.testing.assert_array_equal(dones, [False, True, False, True])
    np.testing.assert_array_equal(rewards, [1.0, 1.0, 1.0, 1.0])
    expected = [script_obs(0, 0, 1), script_obs(1, 1, 0), script_obs(2, 0, 1), script_obs(3, 1, 0)]
    np.testing.assert_array_equal(obs, expected)
    np.testing.assert_array_equal(infos[3]["terminal_observation"], script_obs(3, 0, 1))
    assert infos[1]["vecenv.uncopyable_info"] == {"native": "tests.envs_failure.NoPickle"} and "native" not in infos[1]
    assert infos[3]["vecenv.uncopyable_info"] == {"handle": "_thread.lock"} and "handle" not in infos[3]
    assert venv.get_attr("steps_taken") == [1, 1, 1, 1]


def test_factory_exception_says_so_with_the_original_message(ray_session) -> None:
    fns = [functools.partial(make_env, offset=i, where="factory" if i == 1 else None) for i in range(2)]
    with pytest.raises(InjectedFault, match=re.escape(fault_message("factory", 1, 1))) as info:
        vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED)
    assert "env 1 during env construction" in "\n".join(info.value.__notes__)
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


def test_refused_nested_space_ends_the_actors_and_keeps_a_running_ray(ray_session) -> None:
    """The nested Dict is refused once the actors have reported their spaces: they are ended, Ray (not started
    by the vector env) keeps running."""
    with pytest.raises(NotImplementedError, match="Nested observation spaces are not supported"):
        vecenv.RayVecEnv([functools.partial(SpaceEnv, "nested_dict")] * 2, n_workers=2, actor_options=SHARED)
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


def test_dead_actor_is_worker_died_error_naming_the_envs(ray_venvs) -> None:
    fns = [functools.partial(FaultEnv, offset=i, fail_in="exit" if i == 2 else None, after=1) for i in range(4)]
    venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED)
    ray_venvs.append(venv)
    venv.reset()
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match=r"envs \[2, 3\]"):
        venv.step(np.zeros(4, dtype=np.int64))
    assert time.monotonic() - start < 30
    with pytest.raises(WorkerDiedError):
        venv.step(np.zeros(4, dtype=np.int64))


def test_hung_step_times_out_and_the_actor_is_killed(ray_venvs) -> None:
    fns = [functools.partial(FaultEnv, offset=i, fail_in="hang" if i == 0 else None, after=1) for i in range(2)]
    venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED, step_timeout=1.0)
    ray_venvs.append(venv)
    venv.reset()
    actor = venv.actors[0]
    with pytest.raises(TimeoutError, match=r"envs \[0\]"):
        venv.step(np.zeros(2, dtype=np.int64))
    ray = pytest.importorskip("ray")
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actor.where.remote(), timeout=30)


def test_max_restarts_rebuilds_a_dead_actor(ray_venvs) -> None:
    fns = [functools.partial(make_env, offset=i, where="step" if i else None, fault="exit", at=2) for i in range(2)]
    venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED, max_restarts=1)
    ray_venvs.append(venv)
    venv.seed(10)
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    old_actor = venv.actors[1]
    with pytest.warns(RuntimeWarning, match="restarting the worker of envs \\[1\\]"):
        obs, rewards, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
    assert rewards.tolist() == [2.0, 0.0]  # env 0's reward for its step 2; the restarted env reports none
    assert venv.restarts == 1 and venv.actors[1] is not old_actor
    assert dones.tolist() == [False, True]
    assert infos[1]["vecenv.restarted"] and infos[1]["TimeLimit.truncated"]
    np.testing.assert_array_equal(obs[1], [1, 0, 0])  # a fresh episode of the rebuilt env
    obs, _, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(obs[1], [1, 0, 1])
    # the profile and the errors name the actor now running the envs, which Ray finds by that name
    name = venv.step_stats().workers[1].where.split()[2]
    assert name.endswith("-restart1")
    pytest.importorskip("ray").get_actor(name, namespace="vecenv")  # (raises ValueError for a name it lacks)


@pytest.mark.timeout(120)
def test_env_construction_past_reset_timeout_names_it(ray_session) -> None:
    """A factory that never returns, reset_timeout=1: TimeoutError naming reset_timeout and its value (the
    message said ``within None s``)."""
    fns = [functools.partial(make_env, offset=i, where="factory" if i else None, fault="hang") for i in range(2)]
    with pytest.raises(TimeoutError) as info:
        vecenv.RayVecEnv(fns, n_workers=2, actor_options=SHARED, reset_timeout=1.0)
    assert "did not finish env construction within 1.0 s (reset_timeout)" in str(info.value)
    assert "Raise reset_timeout, which bounds building the envs too" in str(info.value)


def _vecenv_actors(ray: Any) -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "vecenv"]


def test_close_ends_every_actor_and_keeps_a_ray_it_did_not_start(ray_session) -> None:
    venv = vecenv.RayVecEnv(counter_fns(3), n_workers=3, actor_options=SHARED)
    actors = venv.actors
    assert len(_vecenv_actors(ray_session)) == 3 and not venv.started_ray
    venv.close()
    venv.close()  # idempotent
    assert _vecenv_actors(ray_session) == []
    for actor in actors:
        with pytest.raises(ray_session.exceptions.RayActorError):
            ray_session.get(actor.where.remote(), timeout=30)
    assert ray_session.is_initialized()


def test_garbage_collection_ends_the_actors(ray_session) -> None:
    import gc

    venv = vecenv.RayVecEnv(counter_fns(2), n_workers=2, actor_options=SHARED)
    assert len(_vecenv_actors(ray_session)) == 2
    del venv
    gc.collect()
    assert _vecenv_actors(ray_session) == []


# --- arguments --------------------------------------------------------------------------------------------


def test_actor_options_are_checked(ray_session) -> None:
    with pytest.raises(ValueError, match=r"must not set \['max_restarts'\]"):
        vecenv.RayVecEnv(counter_fns(2), actor_options={"max_restarts": 3})
    with pytest.raises(TypeError, match="actor_options must be a dict"):
        vecenv.RayVecEnv(counter_fns(2), actor_options=[("num_cpus", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="need 6 CPUs, but the Ray cluster has 2"):
        vecenv.RayVecEnv(counter_fns(3), n_workers=3, actor_options={"num_cpus": 2})
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


def test_default_n_workers_follows_the_cluster_cpus(ray_venvs) -> None:
    assert vecenv.ray_vec_env.default_ray_workers(64, 8.0, 1.0) == 8
    assert vecenv.ray_vec_env.default_ray_workers(3, 8.0, 1.0) == 3
    assert vecenv.ray_vec_env.default_ray_workers(64, 8.0, 0.0) == 8
    assert vecenv.ray_vec_env.default_ray_workers(64, 1.0, 4.0) == 1
    venv = vecenv.RayVecEnv(counter_fns(5), actor_options={"num_cpus": 1})  # the session's 2 CPUs: 2 actors
    ray_venvs.append(venv)
    assert venv.n_workers == 2 and venv.actor_options["scheduling_strategy"] == "SPREAD"


@pytest.mark.parametrize(
    ("value", "error", "shown"),
    [
        (0, ValueError, "got 0"),
        (-2.5, ValueError, "got -2.5"),
        (float("nan"), ValueError, "got nan"),
        (float("inf"), ValueError, "got inf"),
        ("60", TypeError, "got str '60'"),
        (True, TypeError, "got bool True"),
    ],
    ids=["0", "negative", "nan", "inf", "str", "bool"],
)
def test_connect_timeout_is_checked(value: Any, error: type[Exception], shown: str) -> None:
    """A bad connect_timeout is refused before Ray is touched, naming the argument, what it takes and the value."""
    with pytest.raises(error) as info:
        vecenv.RayVecEnv(counter_fns(2), connect_timeout=value)
    message = str(info.value)
    assert message.startswith("connect_timeout must be a positive") and "seconds or None" in message, message
    assert message.endswith(shown), message


def _assert_names_ray(message: str, doing: str, timeout: str, address: str) -> None:
    """The TimeoutError of a wait on Ray: what Ray did not do, the bound, the address, what to check."""
    assert message.startswith(f"Ray did not {doing}"), message
    assert f"within connect_timeout={timeout} s (Ray at {address})" in message, message
    assert f"`ray status --address {address}`" in message and "RAY_ADDRESS" in message, message
    assert "overloaded" in message and "raise connect_timeout" in message, message


def test_a_cluster_query_that_never_returns_raises_naming_ray(ray_venvs, ray_session, monkeypatch) -> None:
    """``ray.cluster_resources()`` that never returns (a GCS that does not answer): TimeoutError once
    connect_timeout passed, naming Ray's address; no actor is left and the running Ray is kept. Actors that use
    no CPU, in a number given, need no query of the cluster."""
    release, entered = threading.Event(), threading.Event()

    def stuck() -> dict[str, float]:
        entered.set()
        release.wait()
        return {"CPU": 2.0}

    monkeypatch.setattr(ray_session, "cluster_resources", stuck)
    ray_venvs.append(vecenv.RayVecEnv(counter_fns(2), n_workers=2, actor_options=SHARED))
    np.testing.assert_array_equal(ray_venvs[-1].reset()[:, 0], [0, 1])  # (CounterEnv's obs[0]: its offset)
    assert not entered.is_set()
    try:
        with pytest.raises(TimeoutError) as info:  # the default n_workers needs the cluster's CPUs
            vecenv.RayVecEnv(counter_fns(2), actor_options=SHARED, connect_timeout=0.5)
    finally:
        release.set()
    assert entered.is_set()
    ray_venvs.pop().close()
    address = ray_session.get_runtime_context().gcs_address
    _assert_names_ray(str(info.value), "answer the query of the cluster's CPUs (ray.cluster_resources)", "0.5", address)
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


def test_an_actor_registration_that_never_returns_raises_and_the_late_actor_is_ended(ray_session, monkeypatch):
    """The second actor's registration with Ray never returns (in time): TimeoutError naming that actor and Ray's
    address; the first actor is ended, and so is the late one once Ray has made it."""
    real = vecenv.workers.ray_actors._remote_actor_class(ray_session)
    release, registering, registered = threading.Event(), threading.Event(), threading.Event()

    class SlowRegistration:
        def __init__(self, **options: Any) -> None:
            self.options = options

        def remote(self, *args: Any) -> Any:
            late = self.options["name"].endswith("-1")
            if late:
                registering.set()
                release.wait()
            actor = real.options(**self.options).remote(*args)
            if late:
                registered.set()
            return actor

    class SlowClass:
        def options(self, **options: Any) -> SlowRegistration:
            return SlowRegistration(**options)

    monkeypatch.setattr(vecenv.workers.ray_actors, "_remote_actor_class", lambda ray: SlowClass())
    try:
        with pytest.raises(TimeoutError) as info:
            vecenv.RayVecEnv(counter_fns(3), n_workers=2, actor_options=SHARED, connect_timeout=1)
    finally:
        release.set()
    assert registering.is_set()
    message = str(info.value)
    assert re.match(r"Ray did not register the Ray actor vecenv-\d+-[0-9a-f]+-1 \(envs \[2\]\) within", message)
    _assert_names_ray(message, "register", "1", ray_session.get_runtime_context().gcs_address)
    assert registered.wait(60)  # Ray made the late actor (after the error): vecenv kills it
    deadline = time.monotonic() + 60
    while _vecenv_actors(ray_session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


def test_an_actor_that_no_node_can_host_raises_naming_its_resources(ray_session) -> None:
    """An actor asking for a resource no node has stays pending in Ray: TimeoutError once connect_timeout passed,
    naming the actor, its resources and Ray's address; the pending actor is ended."""
    options = {"num_cpus": 0, "resources": {"vecenv_test_missing": 1}}
    with pytest.raises(TimeoutError) as info:
        vecenv.RayVecEnv(counter_fns(2), n_workers=1, actor_options=options, connect_timeout=1.0)
    message = str(info.value)
    assert re.match(r"Ray did not start the Ray actor vecenv-\d+-[0-9a-f]+-0 \(envs \[0, 1\]\)", message), message
    assert "num_cpus=0, resources={'vecenv_test_missing': 1}" in message
    _assert_names_ray(message, "start", "1", ray_session.get_runtime_context().gcs_address)
    assert _vecenv_actors(ray_session) == [] and ray_session.is_initialized()


@pytest.mark.parametrize("given", ["ray_init_kwargs", "RAY_ADDRESS"])
def test_a_ray_init_that_never_returns_raises_naming_the_address(monkeypatch, given: str) -> None:
    """``ray.init`` that never returns (in time): TimeoutError naming the address it was given (argument or
    ``RAY_ADDRESS``); when it returns after all, the Ray it started is shut down again."""
    ray = pytest.importorskip("ray")
    release, started, shut_down = threading.Event(), threading.Event(), threading.Event()
    calls: list[dict[str, Any]] = []

    def init(**kwargs: Any) -> None:
        calls.append(kwargs)
        started.set()
        release.wait()

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # (whether or not the tests' Ray runs)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", shut_down.set)
    address = "192.0.2.7:6379"  # (a documentation address: nothing answers there)
    init_kwargs: dict[str, Any] = {"num_cpus": 1}
    if given == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", address)
    else:
        init_kwargs["address"] = address
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(TimeoutError) as info:
            vecenv.RayVecEnv(counter_fns(2), ray_init_kwargs=init_kwargs, connect_timeout=0.5)
        assert started.is_set() and not shut_down.is_set()
    finally:
        release.set()
        assert shut_down.wait(60), "the late ray.init was not shut down"
        signal.signal(signal.SIGTERM, sigterm)
    assert calls == [init_kwargs]
    _assert_names_ray(str(info.value), "start or join a Ray instance (ray.init)", "0.5", address)


def test_import_vecenv_does_not_import_ray_and_a_missing_ray_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        import vecenv
        assert "ray" not in sys.modules, "import vecenv imported ray"
        sys.modules["ray"] = None  # as if ray were not installed
        try:
            vecenv.RayVecEnv([lambda: None])
        except vecenv.MissingExtraError as exc:
            print(exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "RayVecEnv needs ray" in result.stdout and '"ray" extra' in result.stdout


# --- Ray's lifecycle and a simulated cluster (a child process with its own Ray) ----------------------------


def _child_lines(script: str) -> dict[str, str]:
    """Run ``script`` in a fresh interpreter (its own Ray starts); its ``KEY value`` lines of standard output."""
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)


FAILED_START_SCRIPT = """
import functools, os, secrets, shutil, tempfile
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
import ray
import vecenv
from tests.envs import CounterEnv, SpaceEnv
from tests.envs_faults import make_env

# each constructor starts a Ray (none is running), then fails: it must shut that Ray down again
cases = {
    "NESTED": ([functools.partial(SpaceEnv, "nested_dict")] * 2, {}),
    "FACTORY": ([functools.partial(make_env, offset=i, where="factory" if i else None) for i in range(2)], {}),
    "CPUS": ([CounterEnv] * 2, {"n_workers": 2, "actor_options": {"num_cpus": 1}}),
}
for case, (fns, kwargs) in cases.items():
    temp_dir = tempfile.mkdtemp(prefix="vecenv-ray-")
    init = {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False, "_temp_dir": temp_dir}
    kwargs = {"actor_options": {"num_cpus": 0}, "n_workers": 2, **kwargs}
    try:
        vecenv.RayVecEnv(fns, ray_init_kwargs=init, **kwargs)
        raised = "nothing"
    except Exception as exc:
        raised = type(exc).__name__
    print(case, raised, ray.is_initialized(), flush=True)
    ray.shutdown()  # (a no-op when the constructor did its job)
    shutil.rmtree(temp_dir, ignore_errors=True)
"""


def test_failed_constructor_shuts_down_the_ray_it_started() -> None:
    """A refused nested observation space, an env factory that raises, and actors the cluster cannot hold: each
    constructor started Ray (none was running) and leaves it shut down (in a child process, three Ray starts)."""
    lines = _child_lines(FAILED_START_SCRIPT)
    assert lines["NESTED"] == "NotImplementedError False"
    assert lines["FACTORY"] == "InjectedFault False"
    assert lines["CPUS"] == "ValueError False"


SHUT_DOWN_SCRIPT = """
import os, secrets, shutil, tempfile
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
import numpy as np, ray
import vecenv
from tests.envs import CounterEnv
from vecenv.errors import WorkerDiedError

temp_dir = tempfile.mkdtemp(prefix="vecenv-ray-")
init = {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False, "_temp_dir": temp_dir}
# the program's own Ray, shut down under an open vector env: close() and the next step start no new Ray
ray.init(**init)
venv = vecenv.RayVecEnv([CounterEnv] * 2, n_workers=2, actor_options={"num_cpus": 0})
venv.reset()
ray.shutdown()
try:
    venv.step(np.zeros(2, dtype=np.int64))
    print("STEP nothing", flush=True)
except WorkerDiedError as exc:
    print("STEP", "Ray was shut down" in str(exc), ray.is_initialized(), flush=True)
venv.close()
print("CLOSE", ray.is_initialized(), flush=True)
# a vector env that started Ray and one that joined it: closing the first shuts Ray down, the second's calls
# and close() start no new Ray
train = vecenv.RayVecEnv([CounterEnv] * 2, n_workers=1, actor_options={"num_cpus": 0}, ray_init_kwargs=init)
evaluate = vecenv.RayVecEnv([CounterEnv] * 2, n_workers=1, actor_options={"num_cpus": 0})
evaluate.reset()
train.close()
try:
    evaluate.step(np.zeros(2, dtype=np.int64))
except WorkerDiedError:
    pass
evaluate.close()
print("JOINED", train.started_ray, ray.is_initialized(), flush=True)
shutil.rmtree(temp_dir, ignore_errors=True)
"""


def test_ray_shut_down_under_an_open_vector_env_is_not_started_again() -> None:
    """``ray.shutdown()`` while a RayVecEnv is open: its next step raises WorkerDiedError saying so, and neither
    the step nor close() starts a new local Ray, which nothing would shut down (in a child process)."""
    lines = _child_lines(SHUT_DOWN_SCRIPT)
    assert lines["STEP"] == "True False"
    assert lines["CLOSE"] == "False"
    assert lines["JOINED"] == "True False"


CLUSTER_SCRIPT = """
import os, secrets, shutil, sys, tempfile, time
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
import numpy as np, ray
from ray.cluster_utils import Cluster
import vecenv
from tests.envs import CounterEnv
from vecenv.errors import WorkerDiedError

# RayVecEnv starts a Ray it does not find, and shuts it down on close
temp_dir = tempfile.mkdtemp(prefix="vecenv-ray-")
venv = vecenv.RayVecEnv([CounterEnv] * 2, actor_options={"num_cpus": 0},
                        ray_init_kwargs={"num_cpus": 1, "include_dashboard": False, "_temp_dir": temp_dir})
print("STARTED", venv.started_ray, ray.is_initialized(), flush=True)
venv.close()
print("AFTER_CLOSE", ray.is_initialized(), flush=True)
shutil.rmtree(temp_dir, ignore_errors=True)

config = {"health_check_period_ms": 200, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "_system_config": config})
nodes = [cluster.add_node(num_cpus=1) for _ in range(3)]
cluster.wait_for_nodes()
ray.init(address=cluster.address, log_to_driver=False)
try:
    fns = [lambda i=i: CounterEnv(episode_len=100, offset=i) for i in range(4)]
    # a node is lost: without restarts, a WorkerDiedError naming its envs; with one, an actor rebuilt elsewhere
    for max_restarts in (0, 1):
        venv = vecenv.RayVecEnv(fns, n_workers=2, actor_options={"num_cpus": 0.5}, max_restarts=max_restarts)
        print(f"NODES{max_restarts}", len(set(venv.node_ids)), flush=True)
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        victim = [n for n in nodes if n.node_id == venv.node_ids[1]][0]
        cluster.remove_node(victim)
        nodes.remove(victim)
        start = time.monotonic()
        try:
            obs, rewards, dones, infos = venv.step(np.zeros(4, dtype=np.int64))
            restarted = bool(infos[2].get("vecenv.restarted"))
            print(f"RESTARTED{max_restarts}", dones.tolist(), restarted, len(set(venv.node_ids)), flush=True)
        except WorkerDiedError as exc:
            print(f"DIED{max_restarts}", "envs [2, 3]" in str(exc), round(time.monotonic() - start), flush=True)
        venv.close()
finally:
    ray.shutdown()
    cluster.shutdown()
"""


def test_simulated_cluster_spread_and_lost_node() -> None:
    """SPREAD puts the two actors on two nodes; removing a node is a WorkerDiedError naming the envs within a
    few seconds, or with max_restarts a rebuilt actor on a remaining node (one simulated cluster of three nodes,
    for both cases). Also: a Ray that RayVecEnv starts is shut down by close."""
    lines = _child_lines(CLUSTER_SCRIPT)
    assert lines["STARTED"] == "True True" and lines["AFTER_CLOSE"] == "False"
    assert lines["NODES0"] == lines["NODES1"] == "2"
    died, seconds = lines["DIED0"].split()
    assert died == "True" and int(seconds) < 20
    assert lines["RESTARTED1"] == "[False, False, True, True] True 1"


def garbage_collecting_env() -> gym.Env:
    """A CounterEnv built after a full garbage collection in the worker process (which, forked, inherited its
    parent's objects: garbage among them)."""
    gc.collect()
    return CounterEnv()


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_a_forked_worker_never_finalizes_the_drivers_ray_objects(ray_session: Any, ray_venvs: list) -> None:
    """A worker process forked from a Ray driver never runs the finalizers of the Ray objects it inherited: a Ray
    actor handle finalized in the child acts on the driver's own connection to Ray's GCS, and the driver's next
    lookup of a named actor then waits forever (this hung the test suite under load; the child's collection is
    forced here)."""

    @ray_session.remote(num_cpus=0)
    class Pinger:
        def ping(self) -> int:
            return 1

    handles = [Pinger.options(name=f"vecenv-fork-gc-{i}").remote() for i in range(2)]  # type: ignore[attr-defined]
    assert ray_session.get([handle.ping.remote() for handle in handles]) == [1, 1]
    cycle: dict[str, Any] = {"handles": handles}
    cycle["self"] = cycle  # garbage that only the cyclic collector frees: still there when the worker forks
    del handles, cycle
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        venv = vecenv.SubprocVecEnv([garbage_collecting_env] * 2, start_method="fork", n_workers=2)
    finally:
        if was_enabled:
            gc.enable()
    venv.reset()
    venv.close()
    gc.collect()  # the driver finalizes its own copies
    ray_venv = vecenv.RayVecEnv(counter_fns(2), connect_timeout=20, actor_options=SHARED)
    ray_venvs.append(ray_venv)
    obs = ray_venv.reset()
    np.testing.assert_array_equal(obs[:, 0], [0, 1])

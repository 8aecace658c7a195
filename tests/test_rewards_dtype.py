"""``rewards_dtype``: float32 rewards (SB3's DummyVecEnv, the default) or float64 (SB3's SubprocVecEnv).

The rewards are checked against :class:`FractionEnv` instances stepped by hand, and :class:`vecenv.VecNormalize`'s
return statistics against the same statistics computed with numpy from those rewards: equal bit for bit with
float64 rewards, and different in the last bits with float32 ones (the rewards float32 rounds), which is why the
argument exists. Where stable-baselines3 is installed, the same run is compared with SB3's own classes.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from tests.conftest import RAY_TEST_OPTIONS

HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None
FORK = "fork" if "fork" in mp.get_all_start_methods() else None
N_ENVS = 3
STEPS = 40
GAMMA = 0.99


class FractionEnv(gym.Env):
    """Rewards that float32 cannot hold exactly: ``(action + 1) / 3 + t / 7 + index / 11`` at step ``t`` of an
    episode of ``4 + index`` steps (terminated at its end); the observation is ``[t, index]``."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = spaces.Discrete(3)

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.index], dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        reward = (int(action) + 1) / 3 + self.t / 7 + self.index / 11
        return self._obs(), reward, self.t >= 4 + self.index, False, {}


def env_fns(n: int = N_ENVS) -> list[Callable[[], gym.Env]]:
    return [partial(FractionEnv, i) for i in range(n)]


def actions(step: int, n: int = N_ENVS) -> np.ndarray:
    return np.array([(step + i) % 3 for i in range(n)])


def hand_rewards(n: int = N_ENVS, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """The rewards ``(steps, n)`` (float64, as the envs return them) and dones of envs stepped by hand with
    SB3's rule (an env whose episode ends is reset at once)."""
    envs = [FractionEnv(i) for i in range(n)]
    for env in envs:
        env.reset()
    rewards, dones = np.zeros((steps, n)), np.zeros((steps, n), dtype=bool)
    for s in range(steps):
        for i, env in enumerate(envs):
            _, rewards[s, i], terminated, truncated, _ = env.step(actions(s, n)[i])
            dones[s, i] = terminated or truncated
            if dones[s, i]:
                env.reset()
    return rewards, dones


def return_statistics(rewards: np.ndarray, dones: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(mean, var, count)`` of the discounted returns as SB3's VecNormalize accumulates them in float64
    (``returns = returns * gamma + reward``, zeroed at episode ends), one batch per step, merged with SB3's
    ``RunningMeanStd.update_from_moments`` (prior: mean 0, var 1, count 1e-4), all in numpy."""
    mean, var, count = np.zeros(()), np.ones(()), 1e-4
    returns = np.zeros(rewards.shape[1])
    for s in range(rewards.shape[0]):
        returns = returns * GAMMA + rewards[s]
        batch_mean, batch_var, batch_count = np.mean(returns, axis=0), np.var(returns, axis=0), returns.shape[0]
        delta = batch_mean - mean
        total = count + batch_count
        new_mean = mean + delta * batch_count / total
        m_2 = var * count + batch_var * batch_count + np.square(delta) * count * batch_count / total
        mean, var, count = new_mean, m_2 / total, batch_count + count
        returns[dones[s]] = 0
    return mean, var, count


def build(backend: str, **kwargs: Any) -> vecenv.VecEnv:
    if backend == "dummy":
        return vecenv.DummyVecEnv(env_fns(), **kwargs)
    if backend == "ray":
        return vecenv.RayVecEnv(env_fns(), **RAY_TEST_OPTIONS, **kwargs)  # type: ignore[arg-type]
    options = {
        "subproc": {"start_method": FORK, "n_workers": 2},
        "subproc-pickled": {"start_method": FORK, "n_workers": 2, "shared_memory": False},
        "subproc-parent": {"start_method": FORK, "n_workers": 1, "parent_envs": 1},
        "subproc-default-start": {"n_workers": 1},
    }[backend]
    return vecenv.SubprocVecEnv(env_fns(), **options, **kwargs)


SB3_BACKENDS = ["dummy", "subproc", "subproc-pickled", "subproc-parent", "subproc-default-start"]
BACKENDS = [*SB3_BACKENDS, "ray"]


@pytest.fixture
def ray_if_needed(request: pytest.FixtureRequest) -> None:
    if request.node.callspec.params.get("backend") == "ray":
        request.getfixturevalue("ray_session")


def run(venv: vecenv.VecEnv, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    venv.reset()
    rewards, dones = [], []
    for s in range(steps):
        _, r, d, _ = venv.step(actions(s, venv.num_envs))
        rewards.append(r.copy())
        dones.append(d.copy())
    return np.array(rewards), np.array(dones)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("ray_if_needed")
def test_float64_rewards_are_the_envs_rewards_bit_for_bit(backend: str) -> None:
    expected, expected_dones = hand_rewards()
    assert np.any(expected.astype(np.float32).astype(np.float64) != expected)  # float32 would round them
    venv = build(backend, rewards_dtype=np.float64)
    try:
        assert venv.rewards_dtype is np.float64  # type: ignore[attr-defined]
        rewards, dones = run(venv)
    finally:
        venv.close()
    assert rewards.dtype == np.float64
    np.testing.assert_array_equal(dones, expected_dones)
    assert rewards.tobytes() == expected.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("ray_if_needed")
def test_default_rewards_are_float32_rounded(backend: str) -> None:
    expected, _ = hand_rewards()
    venv = build(backend)
    try:
        assert venv.rewards_dtype is np.float32  # type: ignore[attr-defined]
        rewards, _ = run(venv)
    finally:
        venv.close()
    assert rewards.dtype == np.float32
    assert rewards.tobytes() == expected.astype(np.float32).tobytes()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, np.float32),
        (np.float32, np.float32),
        ("float32", np.float32),
        (np.dtype(np.float32), np.float32),
        (np.float64, np.float64),
        ("float64", np.float64),
        (np.dtype(np.float64), np.float64),
        (float, np.float64),
    ],
)
def test_accepted_values(value: Any, expected: type) -> None:
    venv = vecenv.DummyVecEnv(env_fns(2), rewards_dtype=value)
    try:
        assert venv.rewards_dtype is expected
        venv.reset()
        assert venv.step(actions(0, 2))[1].dtype == expected
    finally:
        venv.close()


@pytest.mark.parametrize("value", [np.float16, "int64", int, np.longdouble, "nonsense", 1.5, np.dtype(">f8"), True])
@pytest.mark.parametrize("cls", ["DummyVecEnv", "SubprocVecEnv", "RayVecEnv"])
def test_other_values_are_refused_before_anything_starts(cls: str, value: Any) -> None:
    built: list[int] = []

    def counting_env() -> gym.Env:
        built.append(1)
        return FractionEnv()

    children = set(mp.active_children())
    with pytest.raises(ValueError, match="rewards_dtype") as caught:
        getattr(vecenv, cls)([counting_env], rewards_dtype=value)
    message = str(caught.value)
    assert "numpy.float32 or numpy.float64" in message and message.endswith(f"got {value!r}")
    assert not built and set(mp.active_children()) == children


def test_gymnasium_backends_keep_float64() -> None:
    """vecenv.gymnasium's backends subclass DummyVecEnv / SubprocVecEnv with float64 as their class default:
    the constructor's None keeps it."""
    import vecenv.gymnasium as vg

    envs = vg.SyncVectorEnv(env_fns(2))
    try:
        envs.reset()
        assert envs.step(actions(0, 2))[1].dtype == np.float64
    finally:
        envs.close()


def test_recv_returns_rewards_in_the_dtype() -> None:
    expected, _ = hand_rewards(steps=1)
    venv = vecenv.SubprocVecEnv(env_fns(), start_method=FORK, n_workers=N_ENVS, rewards_dtype="float64")
    try:
        venv.reset()
        venv.send(actions(0), np.arange(N_ENVS))
        got: dict[int, np.float64] = {}
        while len(got) < N_ENVS:
            _, rewards, _, _, env_ids = venv.recv()
            assert rewards.dtype == np.float64
            got.update(zip(env_ids.tolist(), rewards, strict=True))
    finally:
        venv.close()
    assert np.array([got[i] for i in range(N_ENVS)]).tobytes() == expected[0].tobytes()


def test_make_vec_env_passes_rewards_dtype() -> None:
    venv = vecenv.make_vec_env(
        FractionEnv,
        n_envs=2,
        vec_env_cls=vecenv.SubprocVecEnv,
        vec_env_kwargs={"rewards_dtype": np.float64, "start_method": FORK},
    )
    try:
        venv.reset()
        assert venv.step(actions(0, 2))[1].dtype == np.float64
    finally:
        venv.close()


def normalized_run(venv: Any, steps: int = STEPS) -> tuple[Any, np.ndarray]:
    """Step ``VecNormalize(venv)`` (SB3's defaults, ``gamma=GAMMA``); return it (closed) and its rewards."""
    norm = vecenv.VecNormalize(venv, gamma=GAMMA)
    norm.reset()
    rewards = []
    for s in range(steps):
        rewards.append(norm.step(actions(s, venv.num_envs))[1])
    norm.close()
    return norm, np.array(rewards)


@pytest.mark.parametrize("backend", ["dummy", "subproc", "subproc-pickled"])
def test_vec_normalize_statistics_equal_numpy_on_float64_rewards(backend: str) -> None:
    rewards, dones = hand_rewards()
    mean, var, count = return_statistics(rewards, dones)
    norm, _ = normalized_run(build(backend, rewards_dtype=np.float64))
    assert (norm.ret_rms.mean.tobytes(), norm.ret_rms.var.tobytes(), norm.ret_rms.count) == (
        mean.tobytes(),
        var.tobytes(),
        count,
    )
    # the default float32 rewards: the statistics of the rewards float32 rounded, which differ in the last bits
    norm32, _ = normalized_run(build(backend))
    mean32, var32, _ = return_statistics(rewards.astype(np.float32).astype(np.float64), dones)
    assert (norm32.ret_rms.mean.tobytes(), norm32.ret_rms.var.tobytes()) == (mean32.tobytes(), var32.tobytes())
    assert norm32.ret_rms.var != var and abs(norm32.ret_rms.var - var) < 1e-6 * var


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
def test_vec_normalize_over_float64_rewards_matches_sb3_subproc_vec_env() -> None:
    """SB3's VecNormalize over SB3's SubprocVecEnv and vecenv's over ``SubprocVecEnv(rewards_dtype=np.float64)``:
    the same rewards (dtype and bits), normalized rewards and return statistics."""
    from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as SB3VecNormalize

    ref = SB3SubprocVecEnv(env_fns(), start_method=FORK)
    ref_raw, _ = run(ref)
    ref_norm = SB3VecNormalize(SB3SubprocVecEnv(env_fns(), start_method=FORK), gamma=GAMMA)
    ref_norm.reset()
    ref_rewards = np.array([ref_norm.step(actions(s))[1] for s in range(STEPS)])
    ref_norm.close()
    ref.close()

    ours = vecenv.SubprocVecEnv(env_fns(), start_method=FORK, n_workers=2, rewards_dtype=np.float64)
    try:
        raw, _ = run(ours)
    finally:
        ours.close()
    norm, rewards = normalized_run(build("subproc", rewards_dtype=np.float64))
    assert raw.dtype == ref_raw.dtype == np.float64 and raw.tobytes() == ref_raw.tobytes()
    assert rewards.dtype == ref_rewards.dtype and rewards.tobytes() == ref_rewards.tobytes()
    assert (norm.ret_rms.mean.tobytes(), norm.ret_rms.var.tobytes(), norm.ret_rms.count) == (
        ref_norm.ret_rms.mean.tobytes(),
        ref_norm.ret_rms.var.tobytes(),
        ref_norm.ret_rms.count,
    )


class ShapedRewardEnv(gym.Env):
    """Reward ``t`` at step ``t`` of 3-step episodes, returned as ``shape(t)``: a number, ``np.array([t])`` or a
    multi-objective vector ``np.array([t, -t])``; observation ``[t]``."""

    observation_space = spaces.Box(0, 10, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, shape: Callable[[float], Any] = float) -> None:
        self.shape = shape

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], np.float32), self.shape(float(self.t)), self.t == 3, False, {}


SHAPED_BACKENDS = {
    "dummy": vecenv.DummyVecEnv,
    "subproc": partial(vecenv.SubprocVecEnv, n_workers=1),
}


@pytest.mark.parametrize("backend", sorted(SHAPED_BACKENDS))
def test_one_element_array_rewards_are_stored_as_their_element(backend: str) -> None:
    """An env whose reward is an array of one element (``np.array([t])``): rewards ``(num_envs,)`` of that element,
    as SB3's ``DummyVecEnv`` stores them; beside envs that return plain numbers."""
    one = partial(ShapedRewardEnv, lambda t: np.array([t]))
    venv = SHAPED_BACKENDS[backend]([one, ShapedRewardEnv, one])
    try:
        venv.reset()
        rewards = [venv.step(np.zeros(3, dtype=np.int64))[1] for _ in range(4)]
    finally:
        venv.close()
    np.testing.assert_array_equal(np.array(rewards), [[1, 1, 1], [2, 2, 2], [3, 3, 3], [1, 1, 1]])
    assert rewards[0].dtype == np.float32


@pytest.mark.parametrize("backend", sorted(SHAPED_BACKENDS))
def test_vector_rewards_are_refused_naming_the_env(backend: str) -> None:
    """A multi-objective env's vector reward is a ``ValueError`` naming the env, its reward and what to do; the
    other envs keep their step, those before it and after it (the next step returns it, their observations go on
    in order: none is stepped twice)."""
    vector = partial(ShapedRewardEnv, lambda t: np.array([t, -t]) if t == 2 else t)
    venv = SHAPED_BACKENDS[backend]([ShapedRewardEnv, vector, ShapedRewardEnv])
    try:
        venv.reset()
        obs, *_ = venv.step(np.zeros(3, dtype=np.int64))
        with pytest.raises(ValueError, match=r"env 1 returned a reward of ndarray \(2,\).*one number per env") as info:
            venv.step(np.zeros(3, dtype=np.int64))
        assert "vecenv: raised by env 1 during step" in getattr(info.value, "__notes__", [])
        obs, rewards, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
    finally:
        venv.close()
    assert obs[0, 0] == 2 and rewards[0] == 2  # env 0's second step, kept from the step that raised
    assert obs[2, 0] == 2 and rewards[2] == 2  # env 2's too, though it stepped after env 1
    assert dones[1] and infos[1]["terminal_observation"][0] == 3  # env 1 stepped again: its episode's last step


class FailingShapedRewardEnv(ShapedRewardEnv):
    """:class:`ShapedRewardEnv` that raises in a step whose action is 1."""

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict]:
        if action == 1:
            raise RuntimeError("the env failed")
        return super().step(action)


@pytest.mark.parametrize("backend", sorted(SHAPED_BACKENDS))
@pytest.mark.parametrize("other", ["one-element", "vector"])
def test_an_env_error_after_odd_rewards_is_raised_and_the_other_envs_keep_their_step(backend: str, other: str) -> None:
    """Envs whose rewards are arrays (of one element, or a vector) step before an env that raises: the env's own
    error is raised, naming it; envs whose reward is one number (an array of one included) keep their step,
    which the next step returns, and an env whose reward is a vector is stepped again."""
    one = partial(FailingShapedRewardEnv, lambda t: np.array([t]))
    vector_at_2 = partial(FailingShapedRewardEnv, lambda t: np.array([t, -t]) if t == 2 else np.array([t]))
    venv = SHAPED_BACKENDS[backend]([one, one if other == "one-element" else vector_at_2, FailingShapedRewardEnv])
    try:
        venv.reset()
        venv.step(np.zeros(3, dtype=np.int64))
        with pytest.raises(RuntimeError, match="the env failed") as info:
            venv.step(np.array([0, 0, 1]))  # envs 0 and 1 take their second step, env 2 raises
        assert "vecenv: raised by env 2 during step" in getattr(info.value, "__notes__", [])
        obs, rewards, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
    finally:
        venv.close()
    assert rewards[0] == 2 and obs[0, 0] == 2  # held from the step that raised
    assert rewards[2] == 2 and obs[2, 0] == 2  # env 2's second step
    if other == "one-element":
        assert rewards[1] == 2 and obs[1, 0] == 2 and not dones[1]  # held
    else:  # stepped again: its third step, the episode's last
        assert rewards[1] == 3 and dones[1] and infos[1]["terminal_observation"][0] == 3

"""``make_vec_env`` with Stable-Baselines3's semantics, for ``DummyVecEnv`` and ``SubprocVecEnv``."""

from __future__ import annotations

import csv
import functools
import json
import multiprocessing as mp
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import ClipReward, TimeAwareObservation

from vecenv import DummyVecEnv, SubprocVecEnv, VecEnv, make_vec_env
from vecenv.monitor import Monitor

VEC_ENV_CLASSES = [DummyVecEnv, SubprocVecEnv]
NO_RENDER_MODE_ID = "vecenv-test-make-vec-env/NoRenderMode-v0"


class NoRenderModeEnv(gym.Env):
    """A tiny env whose constructor does not accept ``render_mode`` (an old-style env)."""

    def __init__(self, size: int = 3) -> None:
        self.size = size
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self.np_random.random(self.size, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.np_random.random(self.size, dtype=np.float32), 1.0, False, False, {}


class MarkerWrapper(gym.Wrapper):
    """A wrapper with a keyword argument, to check ``wrapper_class``/``wrapper_kwargs``."""

    def __init__(self, env: gym.Env, marker: str = "default") -> None:
        super().__init__(env)
        self.marker = marker


def _build(vec_env_cls: type[VecEnv], env_id: Any, **kwargs: Any) -> VecEnv:
    return make_vec_env(env_id, vec_env_cls=vec_env_cls, **kwargs)


@pytest.fixture
def no_render_mode_id():
    """Register :class:`NoRenderModeEnv` for the duration of one test."""
    gym.register(NO_RENDER_MODE_ID, entry_point=NoRenderModeEnv)
    try:
        yield NO_RENDER_MODE_ID
    finally:
        del gym.registry[NO_RENDER_MODE_ID]


# --------------------------------------------------------------------------------------------- env construction


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_string_id_uses_rgb_array_render_mode(vec_env_cls):
    """A string id is built with ``render_mode="rgb_array"`` by default."""
    venv = _build(vec_env_cls, "CartPole-v1", n_envs=2)
    try:
        assert isinstance(venv, vec_env_cls)
        assert venv.num_envs == 2
        assert venv.render_mode == "rgb_array"
        assert venv.get_attr("render_mode") == ["rgb_array", "rgb_array"]
        assert venv.observation_space == gym.make("CartPole-v1").observation_space
        assert venv.action_space == spaces.Discrete(2)
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_string_id_env_kwargs_reach_env(vec_env_cls):
    """``env_kwargs`` go to ``gym.make``: ``max_episode_steps`` and CartPole's ``sutton_barto_reward`` take effect."""
    venv = _build(
        vec_env_cls,
        "CartPole-v1",
        n_envs=2,
        seed=0,
        env_kwargs={"max_episode_steps": 4, "sutton_barto_reward": True},
    )
    try:
        assert venv.get_attr("_max_episode_steps") == [4, 4]
        assert venv.get_attr("_sutton_barto_reward") == [True, True]
        assert venv.render_mode == "rgb_array"
        venv.reset()
        all_dones = []
        for _ in range(4):
            # action 0 only: the pole does not fall within 4 steps from a near-upright start
            _, rewards, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
            all_dones.append(dones.copy())
            # Sutton & Barto reward: 0 while the pole is up
            assert rewards.tolist() == [0.0, 0.0]
        # truncated after exactly 4 steps by the TimeLimit built from max_episode_steps
        assert [d.tolist() for d in all_dones] == [[False, False]] * 3 + [[True, True]]
        assert [info["TimeLimit.truncated"] for info in infos] == [True, True]
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_user_env_kwargs_override_render_mode(vec_env_cls):
    """A ``render_mode`` in ``env_kwargs`` wins over the ``rgb_array`` default."""
    venv = _build(vec_env_cls, "CartPole-v1", n_envs=2, env_kwargs={"render_mode": None})
    try:
        assert venv.get_attr("render_mode") == [None, None]
        assert venv.render_mode is None
    finally:
        venv.close()


@pytest.mark.filterwarnings("ignore:.*render_mode")
@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_env_without_render_mode_falls_back(vec_env_cls, no_render_mode_id):
    """An env whose constructor rejects ``render_mode`` is built with ``gym.make(id, **env_kwargs)``."""
    # fork: the child processes inherit this test's registration of the custom id
    vec_env_kwargs = {"start_method": "fork"} if vec_env_cls is SubprocVecEnv else None
    venv = _build(vec_env_cls, no_render_mode_id, n_envs=2, env_kwargs={"size": 5}, vec_env_kwargs=vec_env_kwargs)
    try:
        assert venv.get_attr("size") == [5, 5]
        assert venv.observation_space.shape == (5,)
        assert venv.render_mode is None
        obs = venv.reset()
        assert obs.shape == (2, 5)
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_env_kwargs_rejected_by_env_raise_type_error(vec_env_cls):
    """An ``env_kwargs`` key the env does not accept raises TypeError (after the ``render_mode`` fallback)."""
    with pytest.raises(TypeError, match="foo"):
        _build(vec_env_cls, "CartPole-v1", n_envs=2, env_kwargs={"foo": 1})


def test_callable_env_id_called_with_env_kwargs():
    """A callable ``env_id`` is called once per env with ``env_kwargs`` (and no injected ``render_mode``)."""
    calls: list[dict[str, Any]] = []

    def factory(**kwargs: Any) -> gym.Env:
        calls.append(kwargs)
        return gym.make("CartPole-v1", **kwargs)

    venv = make_vec_env(factory, n_envs=3, env_kwargs={"max_episode_steps": 9})
    try:
        assert calls == [{"max_episode_steps": 9}] * 3
        assert venv.get_attr("_max_episode_steps") == [9, 9, 9]
        assert venv.render_mode is None
        # each call built its own env
        assert len({id(env.unwrapped) for env in venv.envs}) == 3
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_callable_env_id_in_workers(vec_env_cls):
    """Callables (a partial of ``gym.make`` and an env class) get ``env_kwargs`` with either backend."""
    factory = functools.partial(gym.make, "CartPole-v1")
    venv = _build(vec_env_cls, factory, n_envs=2, env_kwargs={"max_episode_steps": 6})
    try:
        assert venv.get_attr("_max_episode_steps") == [6, 6]
        assert venv.get_attr("render_mode") == [None, None]
    finally:
        venv.close()
    venv = _build(vec_env_cls, CartPoleEnv, n_envs=2, env_kwargs={"sutton_barto_reward": True})
    try:
        assert venv.get_attr("_sutton_barto_reward") == [True, True]
        assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [False, False]
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_callable_returning_non_env_raises_type_error(vec_env_cls):
    """A callable ``env_id`` that returns something other than a ``gymnasium.Env`` raises TypeError."""
    with pytest.raises(TypeError):
        _build(vec_env_cls, lambda: 42, n_envs=2)


# ------------------------------------------------------------------------------------------------------ seeding


def _reference_first_obs(env_id: str, seed: int) -> Any:
    obs, _ = gym.make(env_id).reset(seed=seed)
    return obs


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
@pytest.mark.parametrize("start_index", [0, 3])
def test_seed_first_reset_matches_hand_seeded_env(vec_env_cls, start_index):
    """With ``seed``, env ``i``'s first reset equals a hand-made env reset with ``seed + i`` (any start_index)."""
    seed, n = 17, 3
    venv = _build(vec_env_cls, "CartPole-v1", n_envs=n, seed=seed, start_index=start_index)
    try:
        assert list(venv._seeds) == [seed + i for i in range(n)]
        obs = venv.reset()
        for i in range(n):
            np.testing.assert_array_equal(obs[i], _reference_first_obs("CartPole-v1", seed + i))
        # the seeds apply to the first reset only
        obs2 = venv.reset()
        assert not np.array_equal(obs2[0], _reference_first_obs("CartPole-v1", seed))
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
@pytest.mark.parametrize("start_index", [0, 3])
def test_seed_action_spaces_seeded_with_rank(vec_env_cls, start_index):
    """Env ``i``'s action space is seeded with ``seed + start_index + i`` (its rank), like SB3."""
    seed, n = 11, 3
    venv = _build(vec_env_cls, "Pendulum-v1", n_envs=n, seed=seed, start_index=start_index)
    try:
        action_spaces = venv.get_attr("action_space")
        for i, space in enumerate(action_spaces):
            reference = spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32, seed=seed + start_index + i)
            got = np.stack([space.sample() for _ in range(20)])
            expected = np.stack([reference.sample() for _ in range(20)])
            np.testing.assert_array_equal(got, expected)
    finally:
        venv.close()


def test_seed_action_space_discrete_dummy():
    """Discrete action spaces too: env ``i`` samples like ``Discrete(2, seed=seed + start_index + i)``."""
    seed, n, start_index = 5, 4, 2
    venv = make_vec_env("CartPole-v1", n_envs=n, seed=seed, start_index=start_index)
    try:
        for i, env in enumerate(venv.envs):
            reference = spaces.Discrete(2, seed=seed + start_index + i)
            assert [int(env.action_space.sample()) for _ in range(64)] == [int(reference.sample()) for _ in range(64)]
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_seed_none_gives_distinct_seeds(vec_env_cls):
    """``seed=None`` still gives each env its own random seed: distinct first observations."""
    n = 6 if vec_env_cls is DummyVecEnv else 3
    venv = _build(vec_env_cls, "CartPole-v1", n_envs=n, seed=None)
    try:
        seeds = list(venv._seeds)
        assert all(isinstance(s, int) for s in seeds)
        assert len(set(seeds)) == n
        obs = venv.reset()
        assert len({tuple(row.tolist()) for row in obs}) == n
    finally:
        venv.close()
    # two separately built vector envs do not share their seeds
    a = make_vec_env("CartPole-v1", n_envs=8)
    b = make_vec_env("CartPole-v1", n_envs=8)
    try:
        assert not np.array_equal(a.reset(), b.reset())
    finally:
        a.close()
        b.close()


# ----------------------------------------------------------------------------------------------------- wrappers


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_wrapper_class_and_kwargs(vec_env_cls):
    """``wrapper_class(env, **wrapper_kwargs)`` wraps every env (seen by env_is_wrapped, get_attr and rewards)."""
    venv = _build(
        vec_env_cls,
        "CartPole-v1",
        n_envs=2,
        seed=0,
        wrapper_class=ClipReward,
        wrapper_kwargs={"min_reward": 0.0, "max_reward": 0.25},
    )
    try:
        assert venv.env_is_wrapped(ClipReward) == [True, True]
        assert venv.env_is_wrapped(TimeAwareObservation) == [False, False]
        assert venv.get_attr("_saved_kwargs") == [{"min_reward": 0.0, "max_reward": 0.25}] * 2
        venv.reset()
        _, rewards, _, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert rewards.tolist() == [0.25, 0.25]
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_custom_wrapper_is_outermost(vec_env_cls):
    """A custom wrapper with kwargs is applied outermost, with its kwargs, to each env."""
    venv = _build(vec_env_cls, "CartPole-v1", n_envs=2, wrapper_class=MarkerWrapper, wrapper_kwargs={"marker": "x"})
    try:
        assert venv.env_is_wrapped(MarkerWrapper) == [True, True]
        assert venv.get_attr("marker") == ["x", "x"]
        assert venv.get_attr("__class__") == [MarkerWrapper, MarkerWrapper]
    finally:
        venv.close()


def test_wrapper_applied_per_env():
    """``wrapper_class`` is called once per env, each time on a fresh env (no shared wrapper instance)."""
    wrapped: list[gym.Env] = []

    def wrapper(env: gym.Env, marker: str) -> gym.Env:
        wrapped.append(env)
        return MarkerWrapper(env, marker=marker)

    venv = make_vec_env("CartPole-v1", n_envs=3, wrapper_class=wrapper, wrapper_kwargs={"marker": "m"})
    try:
        assert len(wrapped) == 3
        assert len({id(env) for env in wrapped}) == 3
        assert [type(env) for env in venv.envs] == [MarkerWrapper] * 3
        assert [env.env for env in venv.envs] == wrapped
    finally:
        venv.close()


# ------------------------------------------------------------------------------------------- vec_env_cls/kwargs


def test_default_vec_env_cls_is_dummy():
    """Without ``vec_env_cls`` the result is a ``DummyVecEnv``."""
    venv = make_vec_env("CartPole-v1", n_envs=2)
    try:
        assert type(venv) is DummyVecEnv
        assert venv.num_envs == 2
    finally:
        venv.close()


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_vec_env_kwargs_forwarded_to_subproc(start_method):
    """``vec_env_kwargs`` reach the vector env class: SubprocVecEnv uses the requested start method."""
    venv = make_vec_env(
        "CartPole-v1", n_envs=2, seed=1, vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": start_method}
    )
    try:
        assert venv.start_method == start_method
        process_cls = type(mp.get_context(start_method).Process())
        assert all(type(p) is process_cls for p in venv.processes)
        obs = venv.reset()
        np.testing.assert_array_equal(obs[1], _reference_first_obs("CartPole-v1", 2))
    finally:
        venv.close()


def test_dummy_vec_env_rejects_vec_env_kwargs():
    """``DummyVecEnv`` takes no extra arguments: ``vec_env_kwargs`` raise TypeError (as in SB3)."""
    with pytest.raises(TypeError):
        make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=DummyVecEnv, vec_env_kwargs={"start_method": "fork"})


def test_invalid_start_method_raises_value_error():
    """An unknown start method in ``vec_env_kwargs`` raises ValueError."""
    with pytest.raises(ValueError):
        make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "bogus"})


# ------------------------------------------------------------------------------------------------ bad arguments


@pytest.mark.parametrize(
    ("n_envs", "error"), [(0, ValueError), (-1, ValueError), (True, ValueError), (1.5, TypeError), ("2", TypeError)]
)
def test_invalid_n_envs(n_envs, error):
    """``n_envs`` must be a positive int: what is not an integer raises TypeError (as SB3's ``range(n_envs)``),
    an integer below 1 (or a bool) ValueError; both name ``n_envs``."""
    with pytest.raises(error, match="n_envs must be a positive integer"):
        make_vec_env("CartPole-v1", n_envs=n_envs)


def test_empty_optional_kwargs_accepted():
    """Empty dicts for all the optional keyword-argument dicts behave like None."""
    venv = make_vec_env(
        "CartPole-v1", n_envs=2, seed=3, env_kwargs={}, vec_env_kwargs={}, monitor_kwargs={}, wrapper_kwargs={}
    )
    try:
        obs = venv.reset()
        np.testing.assert_array_equal(obs[0], _reference_first_obs("CartPole-v1", 3))
    finally:
        venv.close()


# ----------------------------------------------------------------------------------------- dummy/subproc parity


def _as_arrays(obs: Any) -> list[np.ndarray]:
    return [np.asarray(part) for part in obs] if isinstance(obs, tuple) else [np.asarray(obs)]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Blackjack-v1"])
def test_dummy_and_subproc_identical(env_id):
    """Dummy and Subproc from ``make_vec_env`` with one seed give identical trajectories over 300 random steps."""
    n, seed = 3, 42
    dummy = make_vec_env(env_id, n_envs=n, seed=seed)
    subproc = make_vec_env(env_id, n_envs=n, seed=seed, vec_env_cls=SubprocVecEnv)
    try:
        assert dummy.observation_space == subproc.observation_space
        actions = batch_space(dummy.action_space, n)
        actions.seed(seed)
        obs_d, obs_s = dummy.reset(), subproc.reset()
        if env_id == "Blackjack-v1":
            assert isinstance(obs_d, tuple)
            assert isinstance(obs_s, tuple)
            assert len(obs_s) == 3
            assert all(np.asarray(part).shape == (n,) for part in obs_s)
        for a, b in zip(_as_arrays(obs_d), _as_arrays(obs_s), strict=True):
            np.testing.assert_array_equal(a, b)
        episodes = 0
        for _ in range(300):
            action = actions.sample()
            obs_d, rew_d, done_d, info_d = dummy.step(action)
            obs_s, rew_s, done_s, info_s = subproc.step(action)
            for a, b in zip(_as_arrays(obs_d), _as_arrays(obs_s), strict=True):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(rew_d, rew_s)
            np.testing.assert_array_equal(done_d, done_s)
            for i in np.flatnonzero(done_d):
                episodes += 1
                for a, b in zip(
                    _as_arrays(info_d[i]["terminal_observation"]),
                    _as_arrays(info_s[i]["terminal_observation"]),
                    strict=True,
                ):
                    np.testing.assert_array_equal(a, b)
                assert info_d[i]["TimeLimit.truncated"] == info_s[i]["TimeLimit.truncated"]
        assert episodes > 0
    finally:
        dummy.close()
        subproc.close()


# ------------------------------------------------------------------------------------------------------ Monitor


class TickEnv(gym.Env):
    """Episodes of exactly 3 steps (terminated); reward ``0.25 * t``; step info ``{"tick": t}``."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 3.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full(1, self.t, dtype=np.float32), 0.25 * self.t, self.t >= 3, False, {"tick": self.t}


def _read_monitor_csv(path: Any) -> tuple[dict, list[str], list[dict[str, str]]]:
    """JSON header, column names and rows of a monitor file, parsed with the json and csv modules."""
    with open(path, newline="") as file:
        header = json.loads(file.readline()[1:])
        reader = csv.DictReader(file)
        rows = list(reader)
    return header, list(reader.fieldnames or []), rows


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_monitor_dir_writes_one_file_per_rank(vec_env_cls, tmp_path):
    """``monitor_dir`` (created if missing) gets ``<rank>.monitor.csv`` per env, rows matching the rewards/dones."""
    monitor_dir = tmp_path / "logs" / "run"
    n, start_index = 2, 3
    venv = _build(
        vec_env_cls,
        "CartPole-v1",
        n_envs=n,
        seed=0,
        start_index=start_index,
        monitor_dir=str(monitor_dir),
        env_kwargs={"max_episode_steps": 5},
    )
    try:
        assert venv.env_is_wrapped(Monitor) == [True, True]
        returns, lengths = [0.0] * n, [0] * n
        episodes: list[list[tuple[float, int]]] = [[] for _ in range(n)]
        venv.reset()
        for _ in range(12):
            _, rewards, dones, infos = venv.step(np.zeros(n, dtype=np.int64))
            for i in range(n):
                returns[i] += float(rewards[i])
                lengths[i] += 1
                if dones[i]:
                    episodes[i].append((returns[i], lengths[i]))
                    assert infos[i]["episode"]["r"] == round(returns[i], 6)
                    assert infos[i]["episode"]["l"] == lengths[i]
                    returns[i], lengths[i] = 0.0, 0
        assert all(len(env_episodes) >= 2 for env_episodes in episodes)
    finally:
        venv.close()
    assert sorted(os.listdir(monitor_dir)) == ["3.monitor.csv", "4.monitor.csv"]
    for i in range(n):
        header, columns, rows = _read_monitor_csv(monitor_dir / f"{start_index + i}.monitor.csv")
        assert set(header) == {"t_start", "env_id"}
        assert header["env_id"] == "CartPole-v1"
        assert columns == ["r", "l", "t"]
        assert [(float(row["r"]), int(row["l"])) for row in rows] == [(round(r, 6), ln) for r, ln in episodes[i]]
        times = [float(row["t"]) for row in rows]
        assert times == sorted(times)
        assert times[0] >= 0.0


def test_monitor_always_applied_without_monitor_dir(tmp_path, monkeypatch):
    """Without ``monitor_dir`` every env is still monitored (``info["episode"]``), and no file is written."""
    monkeypatch.chdir(tmp_path)
    venv = make_vec_env(TickEnv, n_envs=2)
    try:
        assert venv.env_is_wrapped(Monitor) == [True, True]
        assert [env.results_writer for env in venv.envs] == [None, None]
        venv.reset()
        for _ in range(3):
            _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert dones.tolist() == [True, True]
        assert [info["episode"]["r"] for info in infos] == [0.25 + 0.5 + 0.75] * 2
        assert [info["episode"]["l"] for info in infos] == [3, 3]
    finally:
        venv.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("vec_env_cls", VEC_ENV_CLASSES)
def test_monitor_kwargs_forwarded(vec_env_cls, tmp_path):
    """``monitor_kwargs`` reach each Monitor: an ``info_keywords`` column and key, ``allow_early_resets``."""
    venv = _build(
        vec_env_cls,
        TickEnv,
        n_envs=2,
        monitor_dir=str(tmp_path),
        monitor_kwargs={"info_keywords": ("tick",), "allow_early_resets": False},
    )
    try:
        assert venv.get_attr("info_keywords") == [("tick",), ("tick",)]
        assert venv.get_attr("allow_early_resets") == [False, False]
        venv.reset()
        for _ in range(3):
            _, _, _, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert [info["episode"]["tick"] for info in infos] == [3, 3]
    finally:
        venv.close()
    for rank in range(2):
        _, columns, rows = _read_monitor_csv(tmp_path / f"{rank}.monitor.csv")
        assert columns == ["r", "l", "t", "tick"]
        assert [(row["r"], row["l"], row["tick"]) for row in rows] == [("1.5", "3", "3")]


def test_wrapper_class_is_applied_outside_monitor(tmp_path):
    """The Monitor is inside ``wrapper_class`` (SB3 order): env -> Monitor -> wrapper."""
    venv = make_vec_env(TickEnv, n_envs=2, monitor_dir=str(tmp_path), wrapper_class=MarkerWrapper)
    try:
        assert [type(env) for env in venv.envs] == [MarkerWrapper] * 2
        assert [type(env.env) for env in venv.envs] == [Monitor] * 2
        assert [type(env.env.env) for env in venv.envs] == [TickEnv] * 2
    finally:
        venv.close()


def test_n_envs_takes_numpy_integers() -> None:
    """As SB3's make_vec_env (``range(n_envs)``): a numpy integer is a count."""
    venv = make_vec_env("CartPole-v1", n_envs=np.int64(2))
    try:
        assert venv.num_envs == 2
    finally:
        venv.close()

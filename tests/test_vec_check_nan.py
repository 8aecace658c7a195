"""VecCheckNan: NaN / inf in actions, observations (array, Dict, Tuple) and rewards, with origin and env index."""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from vecenv.wrappers.vec_check_nan import VecCheckNan

OBS_KINDS = ["box", "dict", "tuple"]
#: the name VecCheckNan gives the float part of each kind of observation
BAD_OBS_NAME = {"box": "observations", "dict": "observations.pos", "tuple": "observations.0"}


def _pos_space() -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, (2,), np.float32)


OBS_SPACES = {
    "box": _pos_space,
    "dict": lambda: spaces.Dict({"pos": _pos_space(), "count": spaces.Discrete(100)}),
    "tuple": lambda: spaces.Tuple((_pos_space(), spaces.Discrete(100))),
}
ACTION_SPACES = {
    "box": lambda: spaces.Box(-1.0, 1.0, (2,), np.float32),
    "tuple": lambda: spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(2))),
    "discrete": lambda: spaces.Discrete(2),
    "dict": lambda: spaces.Dict({"a": spaces.Discrete(2)}),
}


class BadValueEnv(gym.Env):
    """Observation ``pos = [t, 0.5]`` (``t``: steps since reset), reward 1.

    At ``bad_at`` (0: the reset, k: the k-th step after a reset) it puts ``bad_value`` into ``pos[1]``
    (``bad_in="obs"``) or the reward (``bad_in="reward"``). Episodes last ``episode_len`` steps (None: forever).
    """

    def __init__(
        self,
        obs_kind: str = "box",
        action_kind: str = "box",
        bad_in: str | None = None,
        bad_at: int = 1,
        bad_value: float = np.nan,
        episode_len: int | None = None,
    ) -> None:
        self.obs_kind = obs_kind
        self.episode_len = episode_len
        self.bad_in = bad_in
        self.bad_at = bad_at
        self.bad_value = bad_value
        self.observation_space = OBS_SPACES[obs_kind]()
        self.action_space = ACTION_SPACES[action_kind]()
        self.t = 0

    def _obs(self) -> Any:
        pos = np.array([self.t, 0.5], np.float32)
        if self.bad_in == "obs" and self.t == self.bad_at:
            pos[1] = self.bad_value
        if self.obs_kind == "dict":
            return {"pos": pos, "count": self.t}
        if self.obs_kind == "tuple":
            return (pos, self.t)
        return pos

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        reward = self.bad_value if self.bad_in == "reward" and self.t == self.bad_at else 1.0
        terminated = self.episode_len is not None and self.t >= self.episode_len
        return self._obs(), reward, terminated, False, {}


def env_fns(n: int = 2, bad_envs: tuple[int, ...] = (), **kwargs: Any) -> list:
    """``n`` BadValueEnv factories; only the envs in ``bad_envs`` inject bad values (``bad_in`` etc. from kwargs)."""
    bad_in = kwargs.pop("bad_in", None)
    return [functools.partial(BadValueEnv, bad_in=bad_in if i in bad_envs else None, **kwargs) for i in range(n)]


def zero_actions(venv: vecenv.VecEnv) -> np.ndarray:
    return np.zeros((venv.num_envs, 2), np.float32)


@pytest.mark.parametrize("obs_kind", OBS_KINDS)
def test_nan_observation_at_reset(obs_kind, make_venv):
    venv = VecCheckNan(
        make_venv("dummy", env_fns(2, bad_envs=(1,), obs_kind=obs_kind, bad_in="obs", bad_at=0)),
        raise_exception=True,
    )
    with pytest.raises(ValueError) as info:
        venv.reset()
    message = str(info.value)
    assert message.startswith(f"found nan in {BAD_OBS_NAME[obs_kind]} (env 1).\n")
    assert "Originated from the environment observation (at reset)." in message
    assert "reset a single copy of the env(s) above" in message


@pytest.mark.parametrize("obs_kind", OBS_KINDS)
def test_inf_observation_after_step(obs_kind, make_venv):
    venv = VecCheckNan(
        make_venv("dummy", env_fns(3, bad_envs=(1,), obs_kind=obs_kind, bad_in="obs", bad_at=2, bad_value=np.inf)),
        raise_exception=True,
    )
    venv.reset()
    venv.step(zero_actions(venv))
    actions = np.array([[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]], np.float32)
    with pytest.raises(ValueError) as info:
        venv.step(actions)
    message = str(info.value)
    assert message.startswith(f"found inf in {BAD_OBS_NAME[obs_kind]} (env 1).\n")
    assert "Originated from the environment, after the last given actions:\n" in message
    # the action given to the bad env, and only to it
    assert f"  env 1: action={actions[1]!r}\n" in message
    assert "env 0:" not in message and "env 2:" not in message
    assert "step a single copy of the env(s) above with these actions" in message


def test_bad_observation_from_an_automatic_reset(make_venv):
    """A bad first observation of a new episode (autoreset inside step) says the episode ended."""
    venv = VecCheckNan(
        make_venv("dummy", env_fns(2, bad_envs=(1,), bad_in="obs", bad_at=0, episode_len=2)), warn_once=False
    )
    with pytest.warns(UserWarning, match="at reset"):
        venv.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv.step(zero_actions(venv))
    with pytest.warns(UserWarning) as record:
        _, _, dones, _ = venv.step(zero_actions(venv))
    assert dones.tolist() == [True, True]
    message = str(record[0].message)
    assert message.startswith("found nan in observations (env 1).\nOriginated from the environment, after")
    assert "(episode ended for env 1: its observation is the first of the next episode" in message


def test_negative_inf_is_inf(make_venv):
    venv = VecCheckNan(
        make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=0, bad_value=-np.inf)), raise_exception=True
    )
    with pytest.raises(ValueError, match=r"^found inf in observations \(env 0\)\."):
        venv.reset()


@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_bad_reward(bad_value, make_venv):
    venv = VecCheckNan(
        make_venv("dummy", env_fns(2, bad_envs=(0,), bad_in="reward", bad_at=1, bad_value=bad_value)),
        raise_exception=True,
    )
    venv.reset()
    kind = "nan" if np.isnan(bad_value) else "inf"
    with pytest.raises(ValueError, match=rf"^found {kind} in rewards \(env 0\)\.\nOriginated from the environment"):
        venv.step(zero_actions(venv))


def test_nan_action_from_the_model(make_venv):
    """NaN actions are reported before the envs see them, with the observation the model was given."""
    base = make_venv("dummy", env_fns(3))
    venv = VecCheckNan(base, raise_exception=True)
    venv.reset()
    obs, _, _, _ = venv.step(zero_actions(venv))
    actions = np.array([[0.0, 0.0], [np.nan, 0.0], [0.0, np.nan]], np.float32)
    with pytest.raises(ValueError) as info:
        venv.step(actions)
    message = str(info.value)
    assert message.startswith(
        "found nan in actions (envs 1, 2).\nOriginated from the RL model, given the last observations:"
    )
    assert f"  env 1: observation={obs[1]!r}\n" in message
    assert f"  env 2: observation={obs[2]!r}\n" in message
    assert "env 0:" not in message
    assert "VecNormalize" in message
    # the bad action never reached the envs
    assert base.get_attr("t") == [1, 1, 1]


def test_nan_action_with_dict_observations(make_venv):
    """With Dict observations, the message shows the bad env's entry of each key."""
    venv = VecCheckNan(make_venv("dummy", env_fns(2, obs_kind="dict")), raise_exception=True)
    venv.reset()
    with pytest.raises(ValueError) as info:
        venv.step(np.array([[0.0, 0.0], [0.0, np.nan]], np.float32))
    line = next(line for line in str(info.value).splitlines() if line.startswith("  env 1: observation={"))
    assert "'pos': array([0. , 0.5], dtype=float32)" in line
    assert "'count': np.int64(0)" in line


def test_nan_in_tuple_actions(make_venv):
    venv = VecCheckNan(make_venv("dummy", env_fns(2, action_kind="tuple")), raise_exception=True)
    venv.reset()
    with pytest.raises(ValueError, match=r"^found nan in actions\.0 \(env 0\)\.\nOriginated from the RL model"):
        venv.step((np.array([[np.nan, 0.0], [0.0, 0.0]], np.float32), np.array([0, 1])))


def test_nan_in_list_actions(make_venv):
    """Actions given as a list of per-env arrays are checked too (SB3)."""
    venv = VecCheckNan(make_venv("dummy", env_fns(2)), raise_exception=True)
    venv.reset()
    with pytest.raises(ValueError, match=r"^found nan in actions \(env 1\)\."):
        venv.step([np.zeros(2, np.float32), np.array([0.0, np.nan], np.float32)])


def test_nan_action_before_any_reset(make_venv):
    venv = VecCheckNan(make_venv("dummy", env_fns(1)), raise_exception=True)
    with pytest.raises(ValueError, match="no observation seen yet"):
        venv.step_async(np.full((1, 2), np.nan, np.float32))


def test_several_findings_in_one_message(make_venv):
    """Every bad array is listed (SB3's order: inf before nan for one array), then the origin."""
    fns = [
        functools.partial(BadValueEnv, bad_in="obs", bad_at=1, bad_value=np.inf),
        functools.partial(BadValueEnv, bad_in="obs", bad_at=1, bad_value=np.nan),
        functools.partial(BadValueEnv, bad_in="reward", bad_at=1, bad_value=np.nan),
    ]
    venv = VecCheckNan(make_venv("dummy", fns), raise_exception=True)
    venv.reset()
    with pytest.raises(ValueError) as info:
        venv.step(zero_actions(venv))
    first_line = str(info.value).splitlines()[0]
    assert first_line == (
        "found inf in observations (env 0), found nan in observations (env 1), found nan in rewards (env 2)."
    )
    for i in range(3):
        assert f"  env {i}: action=" in str(info.value)


def test_warns_once_by_default(make_venv):
    """Default: a UserWarning the first time, then no more checks (SB3's warn_once)."""
    venv = VecCheckNan(make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=1)))
    venv.reset()
    with pytest.warns(UserWarning, match=r"^found nan in observations \(env 0\)\.\nOriginated from the environment"):
        venv.step(zero_actions(venv))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv.step(np.full((1, 2), np.nan, np.float32))
        venv.reset()
        venv.step(zero_actions(venv))


def test_warns_every_time_without_warn_once(make_venv):
    venv = VecCheckNan(make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=0)), warn_once=False)
    for _ in range(3):
        with pytest.warns(UserWarning, match="at reset"):
            venv.reset()
    with pytest.warns(UserWarning, match="found nan in actions"):
        venv.step(np.full((1, 2), np.nan, np.float32))


def test_warning_points_at_the_caller(make_venv):
    venv = VecCheckNan(make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=0)), warn_once=False)
    for call in (venv.reset, lambda: venv.step(np.full((1, 2), np.nan, np.float32))):
        with pytest.warns(UserWarning) as record:
            call()
        assert record[0].filename == __file__


def test_raises_every_time(make_venv):
    """raise_exception ignores warn_once: every bad value raises."""
    venv = VecCheckNan(make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=0)), raise_exception=True)
    for _ in range(2):
        with pytest.raises(ValueError, match="at reset"):
            venv.reset()


def test_check_inf_false_ignores_inf(make_venv):
    venv = VecCheckNan(
        make_venv("dummy", env_fns(1, bad_envs=(0,), bad_in="obs", bad_at=1, bad_value=np.inf)),
        raise_exception=True,
        check_inf=False,
    )
    venv.reset()
    obs, _, _, _ = venv.step(zero_actions(venv))
    assert np.isinf(obs).any()
    with pytest.raises(ValueError, match="found nan in actions"):
        venv.step(np.full((1, 2), np.nan, np.float32))


def test_check_array_value():
    """SB3's helper: ``(name, kind)`` pairs, inf before nan; integers and booleans never hold NaN."""
    venv = VecCheckNan(vecenv.DummyVecEnv(env_fns(2)))
    assert venv.check_array_value("x", np.array([np.nan, np.inf])) == [("x", "inf"), ("x", "nan")]
    assert venv.check_array_value("x", np.array([1.0, -np.inf])) == [("x", "inf")]
    assert venv.check_array_value("x", np.array([1.0, 2.0])) == []
    assert venv.check_array_value("x", np.array([1, 2])) == []
    assert venv.check_array_value("x", np.array([True, False])) == []
    assert venv.check_array_value("x", [0.0, float("nan")]) == [("x", "nan")]
    venv.check_inf = False
    assert venv.check_array_value("x", np.array([np.nan, np.inf])) == [("x", "nan")]
    venv.close()


def test_clean_values_pass_unchanged(backend, make_venv):
    """Finite values: no warning, and reset / step return exactly what the venv returns (both backends)."""
    for obs_kind in ("dict", "tuple"):
        venv = VecCheckNan(make_venv(backend, env_fns(2, obs_kind=obs_kind, action_kind="discrete")), warn_once=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            obs = venv.reset()
            for _ in range(3):
                obs, rewards, _, _ = venv.step(np.array([0, 1]))
        first = obs["pos"] if obs_kind == "dict" else obs[0]
        np.testing.assert_array_equal(first, [[3, 0.5], [3, 0.5]])
        np.testing.assert_array_equal(rewards, [1.0, 1.0])


def test_subproc_backend(make_venv):
    """The same reports with worker processes."""
    venv = VecCheckNan(
        make_venv("subproc", env_fns(2, bad_envs=(1,), obs_kind="dict", bad_in="obs", bad_at=1)), raise_exception=True
    )
    venv.reset()
    with pytest.raises(ValueError, match=re.escape("found nan in observations.pos (env 1).")):
        venv.step(zero_actions(venv))


def test_dict_action_space_not_supported(make_venv):
    with pytest.raises(NotImplementedError, match="Dict action spaces"):
        VecCheckNan(make_venv("dummy", env_fns(1, action_kind="dict")))


def test_unsupported_value_type(make_venv):
    venv = VecCheckNan(make_venv("dummy", env_fns(1, action_kind="discrete")))
    venv.reset()
    with pytest.raises(TypeError, match="actions is a str"):
        venv.step_async("left")  # type: ignore[arg-type]

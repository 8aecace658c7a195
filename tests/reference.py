"""An independent, deliberately naive implementation of SB3's VecEnv step rule on plain gymnasium envs.

Tests compare vecenv against it: each env is reset and stepped by hand, exactly as the SB3 docs describe.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np


class ReferenceVecEnv:
    """Steps ``envs`` one by one with SB3's rule (done = terminated or truncated, autoreset in the same step)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.reset_infos: list[dict] = [{} for _ in self.envs]

    def reset(self, seed: int | None = None, options: dict | None = None) -> np.ndarray:
        obs = []
        for i, env in enumerate(self.envs):
            kwargs = {"options": options} if options else {}
            o, self.reset_infos[i] = env.reset(seed=None if seed is None else seed + i, **kwargs)
            obs.append(copy.deepcopy(o))
        return np.stack(obs)

    def step(self, actions: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        obs, rewards, dones, infos = [], [], [], []
        for i, env in enumerate(self.envs):
            o, r, terminated, truncated, info = env.step(actions[i])
            info = copy.deepcopy(info)
            info["TimeLimit.truncated"] = truncated and not terminated
            if terminated or truncated:
                info["terminal_observation"] = copy.deepcopy(o)
                o, self.reset_infos[i] = env.reset()
            obs.append(copy.deepcopy(o))
            rewards.append(r)
            dones.append(terminated or truncated)
            infos.append(info)
        return np.stack(obs), np.array(rewards, dtype=np.float32), np.array(dones, dtype=bool), infos


def assert_infos_equal(actual: Sequence[dict], expected: Sequence[dict]) -> None:
    """Infos match key by key (arrays compared exactly)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert set(got) == set(want), (got, want)
        for key, value in want.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(got[key], value)
                assert np.asarray(got[key]).dtype == value.dtype
            else:
                assert got[key] == value, (key, got[key], value)


def assert_step_equal(venv: Any, reference: ReferenceVecEnv, actions: Sequence[Any]) -> None:
    """``venv.step(actions)`` returns what ``reference`` does for the same actions, reset infos included."""
    obs, rewards, dones, infos = venv.step(actions)
    exp_obs, exp_rewards, exp_dones, exp_infos = reference.step(actions)
    np.testing.assert_array_equal(obs, exp_obs)
    np.testing.assert_array_equal(rewards, exp_rewards)
    np.testing.assert_array_equal(dones, exp_dones)
    assert_infos_equal(infos, exp_infos)
    assert_infos_equal(venv.reset_infos, reference.reset_infos)

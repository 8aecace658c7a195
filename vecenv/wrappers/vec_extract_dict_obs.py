"""``VecExtractDictObs``: keep one entry of Dict observations."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.base import VecEnv, VecEnvStepReturn
from vecenv.wrappers.base import VecEnvWrapper

__all__ = ["VecExtractDictObs"]


class VecExtractDictObs(VecEnvWrapper):
    """Reduce Dict observations to the entry ``key`` (Stable-Baselines3's ``VecExtractDictObs``).

    The observation space becomes ``venv.observation_space[key]``; ``reset`` and ``step`` return
    ``obs[key]``, and ``infos[i]["terminal_observation"]`` is reduced the same way.

    :param venv: a vectorized environment with a ``gymnasium.spaces.Dict`` observation space.
    :param key: the entry to keep.
    :raises TypeError: if the observation space is not a ``Dict`` space (SB3 raises ``AssertionError``).
    :raises KeyError: if ``key`` is not in the ``Dict`` space; the message lists the available keys.

    >>> import gymnasium as gym
    >>> from vecenv import DummyVecEnv
    >>> class TwoViews(gym.Env):
    ...     observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "goal": gym.spaces.Discrete(4)})
    ...     action_space = gym.spaces.Discrete(2)
    ...     def reset(self, *, seed=None, options=None):
    ...         return {"pos": np.zeros(2, np.float32), "goal": 3}, {}
    >>> venv = VecExtractDictObs(DummyVecEnv([TwoViews, TwoViews]), key="pos")
    >>> venv.observation_space
    Box(-1.0, 1.0, (2,), float32)
    >>> venv.reset().shape
    (2, 2)
    >>> venv.close()
    """

    def __init__(self, venv: VecEnv, key: str) -> None:
        self.key = key
        space = venv.observation_space
        if not isinstance(space, spaces.Dict):
            raise TypeError(
                f"VecExtractDictObs needs a venv with a Dict observation space, got {space}. "
                "Use it only on envs whose observations are dicts, or drop it."
            )
        if key not in space.spaces:
            raise KeyError(
                f"VecExtractDictObs: key {key!r} is not in the Dict observation space; "
                f"available keys: {', '.join(map(repr, space.spaces))}"
            )
        super().__init__(venv=venv, observation_space=space.spaces[key])

    def _extract(self, obs: Any) -> np.ndarray:
        """``obs[key]``, or a :class:`TypeError` naming what the wrapped venv returned instead of a dict."""
        if not isinstance(obs, dict):
            raise TypeError(
                f"VecExtractDictObs expected dict observations from {type(self.venv).__name__}, "
                f"got {type(obs).__name__}"
            )
        return obs[self.key]

    def reset(self) -> np.ndarray:
        """Reset all envs.

        :return: ``obs[key]``, ``(num_envs, *space[key].shape)``.
        """
        return self._extract(self.venv.reset())

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step; observations and terminal observations are reduced to ``key``.

        :return: ``(obs[key], rewards, dones, infos)``.
        """
        obs, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = self._extract(info["terminal_observation"])
        return self._extract(obs), rewards, dones, infos

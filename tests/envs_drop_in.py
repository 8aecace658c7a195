"""Envs that record how the vector env calls them, for tests/test_drop_in.py.

They live in an importable module so worker processes (fork, forkserver and spawn) unpickle them by reference.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class RecordingEnv(gym.Env):
    """Records every ``reset`` call as ``(positional args, keyword args)`` and every action it is given.

    Observation ``[offset, resets, t]`` (float32); the episode terminates after ``episode_steps`` steps.
    The record is read through ``get_attr("resets_seen")`` / ``get_attr("actions_seen")``: actions as
    ``(type name, dtype name or None, repr)``.

    :param action_space: the env's action space (default ``Box(-1, 1, (2,), float32)``).
    """

    def __init__(self, offset: int = 0, episode_steps: int = 3, action_space: spaces.Space | None = None) -> None:
        self.offset = offset
        self.episode_steps = episode_steps
        self.observation_space = spaces.Box(-1e6, 1e6, shape=(3,), dtype=np.float32)
        self.action_space = action_space or spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.resets_seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.actions_seen: list[tuple[str, str | None, str]] = []
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.offset, len(self.resets_seen), self.t], dtype=np.float32)

    def reset(self, *args: Any, **kwargs: Any) -> tuple[np.ndarray, dict]:
        self.resets_seen.append((args, dict(kwargs)))
        super().reset(seed=kwargs.get("seed"))
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        dtype = getattr(action, "dtype", None)
        self.actions_seen.append((type(action).__name__, None if dtype is None else dtype.name, repr(action)))
        self.t += 1
        return self._obs(), 0.0, self.t >= self.episode_steps, False, {}


class RequiredOptionsEnv(gym.Env):
    """An env whose ``reset`` takes ``seed`` and ``options`` as required positional parameters (allowed by
    Gymnasium's vector envs, which always pass both keywords). Its episodes never end."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed, options):  # type: ignore[override]
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {"options": options}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(1, dtype=np.float32), 0.0, False, False, {}


class SleepEnv(gym.Env):
    """Sleeps ``action`` seconds in ``step`` with :func:`time.sleep` and returns ``action * 2`` computed in
    Python as its reward: the action must reach it as the caller's value (a Box(0, 1, (), float32) action)."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    action_space = spaces.Box(0.0, 1.0, shape=(), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(action)
        return np.zeros(1, dtype=np.float32), float(action * 2), False, False, {"action_type": type(action).__name__}


class RecordActions(gym.Wrapper):
    """Records every action its env is given, as :class:`RecordingEnv` does (``actions_seen``), and seeds the
    env's action space on ``reset(seed=s)``: SB3's identity envs draw their states from their action space, so
    their episodes then repeat under the same seeds whatever vector env runs them."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.actions_seen: list[tuple[str, str | None, str]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self.env.unwrapped.action_space.seed(seed)
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        dtype = getattr(action, "dtype", None)
        self.actions_seen.append((type(action).__name__, None if dtype is None else dtype.name, repr(action)))
        return self.env.step(action)  # type: ignore[return-value]


def make_sb3_identity(kind: str, ep_length: int = 8) -> RecordActions:
    """One of Stable-Baselines3's identity envs (``stable_baselines3.common.envs``, whose action space is its
    observation space), recording its actions: ``kind`` is "discrete" (``Discrete(3)``), "box" (``Box(-1, 1,
    (1,))``), "multidiscrete" (``MultiDiscrete([3, 3])``) or "multibinary" (``MultiBinary(4)``)."""
    from stable_baselines3.common import envs as sb3_envs

    builders = {
        "discrete": lambda: sb3_envs.IdentityEnv(3, ep_length=ep_length),
        "box": lambda: sb3_envs.IdentityEnvBox(ep_length=ep_length),
        "multidiscrete": lambda: sb3_envs.IdentityEnvMultiDiscrete(3, ep_length=ep_length),
        "multibinary": lambda: sb3_envs.IdentityEnvMultiBinary(4, ep_length=ep_length),
    }
    return RecordActions(builders[kind]())


def make_recording(offset: int = 0, **kwargs: Any) -> RecordingEnv:
    return RecordingEnv(offset, **kwargs)


def make_required_options() -> RequiredOptionsEnv:
    return RequiredOptionsEnv()


def make_sleep() -> SleepEnv:
    return SleepEnv()

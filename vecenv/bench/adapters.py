"""The backends of ``vecenv bench`` behind one interface, :class:`BenchBackend`, for the timing loop.

:class:`PlainLoop` is the baseline (envs stepped in a Python loop, no vector env); :class:`VecEnvAdapter`
wraps a vecenv or Stable-Baselines3 ``VecEnv`` and :class:`GymVectorAdapter` a Gymnasium ``VectorEnv``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

__all__ = ["BenchBackend", "EnvFn", "GymVectorAdapter", "PlainLoop", "VecEnvAdapter"]

EnvFn = Callable[[], gym.Env]


class BenchBackend(Protocol):
    """What the timing loop needs from a backend: every backend is wrapped to this interface."""

    #: The action space of one env.
    action_space: gym.Space

    def reset(self) -> None:
        """Reset every env (seeded)."""

    def prepare(self, actions: np.ndarray) -> Any:
        """Turn a batch of actions ``(num_envs, ...)`` into what :meth:`step` takes (done before timing)."""

    def step(self, actions: Any) -> None:
        """Step every env once; finished envs are reset (by the backend or by this call)."""

    def close(self) -> None:
        """Release the envs and any worker processes."""


class PlainLoop:
    """The baseline: a list of envs stepped in a plain Python loop, no vector env at all.

    :param env_fns: env factories, called here.
    :param seed: env ``i`` is reset with ``seed + i`` by :meth:`reset`.
    """

    def __init__(self, env_fns: Sequence[EnvFn], seed: int = 0) -> None:
        self.envs = [env_fn() for env_fn in env_fns]
        self.action_space = self.envs[0].action_space
        self.seed = seed

    def reset(self) -> None:
        """Reset env ``i`` with seed ``seed + i``."""
        for i, env in enumerate(self.envs):
            env.reset(seed=self.seed + i)

    def prepare(self, actions: np.ndarray) -> list[Any]:
        """One action per env, as the elements of the batch (the same objects a vector env passes on)."""
        return list(actions)

    def step(self, actions: Sequence[Any]) -> None:
        """``obs, r, term, trunc, info = env.step(a)`` for every env; reset it when its episode ends."""
        for env, action in zip(self.envs, actions, strict=False):
            _obs, _reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                env.reset()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


class _VectorEnvAdapter:
    """What the vector-env adapters share: the batch is stepped as is, the envs reset themselves."""

    def __init__(self, venv: Any, seed: int, action_space: gym.Space) -> None:
        self.venv = venv
        self.action_space = action_space
        self.seed = seed

    def prepare(self, actions: np.ndarray) -> np.ndarray:
        """The batch as is."""
        return actions

    def step(self, actions: np.ndarray) -> None:
        """One vector step (finished envs are reset by the vector env)."""
        self.venv.step(actions)

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()


class VecEnvAdapter(_VectorEnvAdapter):
    """A vecenv or Stable-Baselines3 ``VecEnv`` (``obs = reset()``, ``obs, r, done, info = step(a)``; envs
    reset themselves).

    :param venv: the vector env.
    :param seed: passed to ``venv.seed`` before the reset (env ``i`` gets ``seed + i``).
    """

    def __init__(self, venv: Any, seed: int = 0) -> None:
        super().__init__(venv, seed, venv.action_space)

    def reset(self) -> None:
        """Seed, then reset."""
        self.venv.seed(self.seed)
        self.venv.reset()


class GymVectorAdapter(_VectorEnvAdapter):
    """A Gymnasium ``VectorEnv`` (``obs, info = reset(seed=)``, 5-tuple ``step``, its own autoreset mode:
    Gymnasium's default is next-step autoreset).

    :param venv: the vector env.
    :param seed: ``reset(seed=seed)`` seeds env ``i`` with ``seed + i``.
    """

    def __init__(self, venv: Any, seed: int = 0) -> None:
        super().__init__(venv, seed, venv.single_action_space)

    def reset(self) -> None:
        """Reset every env."""
        self.venv.reset(seed=self.seed)


class EnvPoolAdapter(_VectorEnvAdapter):
    """An EnvPool pool or a vecenv VecEnv over one (:func:`~vecenv.adapters.from_gymnasium`): both are seeded by
    ``envpool.make(..., seed=)``, so reset takes no seed.

    :param venv: the pool (``reset()`` returns ``(obs, info)``) or the VecEnv over it (``reset()`` returns obs).
    :param action_space: the single-env action space.
    """

    def __init__(self, venv: Any, action_space: gym.Space) -> None:
        super().__init__(venv, 0, action_space)

    def reset(self) -> None:
        """Reset every env (with the seeds the pool was made with)."""
        self.venv.reset()

"""Checks of the constructor arguments the backends share; each error names the argument, what was expected and
what was received."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = ["check_env_fns", "checked_autoreset_mode", "checked_batch_size"]


def checked_batch_size(value: Any, num_envs: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= num_envs:
        raise ValueError(f"batch_size must be an integer in 1..{num_envs} (num_envs), got {value!r}")
    return int(value)


def checked_autoreset_mode(value: Any) -> AutoresetMode:
    try:
        return AutoresetMode(value)
    except ValueError:
        raise ValueError(
            f"autoreset_mode must be a gymnasium.vector.AutoresetMode or one of "
            f"{[mode.value for mode in AutoresetMode]}, got {value!r}"
        ) from None


def check_env_fns(env_fns: Sequence[Callable[[], gym.Env]]) -> list[Callable[[], gym.Env]]:
    if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Sequence):
        raise TypeError(
            f"env_fns must be a list of callables that each return a gymnasium.Env, got {type(env_fns).__name__}"
        )
    env_fns = list(env_fns)
    if not env_fns:
        raise ValueError("env_fns must contain at least one env factory, got an empty list")
    for i, env_fn in enumerate(env_fns):
        if not callable(env_fn):
            raise TypeError(
                f"env_fns[{i}] must be a callable returning a gymnasium.Env, got {type(env_fn).__name__}: {env_fn!r}. "
                "Pass e.g. `lambda: gymnasium.make('CartPole-v1')`, not the env itself."
            )
    return env_fns

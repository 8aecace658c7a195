"""Checks of the constructor arguments the backends share; each error names the argument, what was expected and
what was received."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vecenv.base import is_int

__all__ = [
    "REWARDS_DTYPES",
    "check_env_fns",
    "checked_autoreset_mode",
    "checked_batch_size",
    "checked_max_restarts",
    "checked_n_workers",
    "checked_parent_envs",
    "checked_rewards_dtype",
    "checked_timeout",
]


def checked_batch_size(value: Any, num_envs: int) -> int:
    if not is_int(value) or not 1 <= value <= num_envs:
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


def checked_parent_envs(value: Any, num_envs: int) -> int:
    if not is_int(value) or not 0 <= value < num_envs:
        raise ValueError(
            f"parent_envs must be an integer in 0..{num_envs - 1} (at least one env must run in a worker "
            f"process; DummyVecEnv steps every env in this process), got {value!r}"
        )
    return int(value)


def checked_timeout(name: str, value: Any) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return value


def checked_max_restarts(value: Any) -> int:
    if not is_int(value) or value < 0:
        raise ValueError(f"max_restarts must be a non-negative integer, got {value!r}")
    return int(value)


def checked_obs_slots(value: Any) -> int | None:
    """``obs_slots`` as given: None (the default count) or a non-negative int (0 and 1: no slots, copies).

    :raises ValueError: for anything else, naming the argument and the value received.
    """
    if value is None:
        return None
    if not is_int(value) or value < 0:
        raise ValueError(
            f"obs_slots must be None (the default) or a non-negative integer (0 or 1: every step returns a copy), "
            f"got {value!r}"
        )
    return int(value)


def checked_n_workers(value: Any) -> int:
    if not is_int(value) or value < 1:
        raise ValueError(f"n_workers must be a positive integer or None, got {value!r}")
    return int(value)


#: the dtypes a vector env's rewards may have
REWARDS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def checked_rewards_dtype(value: Any, default: Any) -> type[np.floating[Any]]:
    """The rewards dtype asked for, as its numpy scalar type (``np.float32`` or ``np.float64``).

    :param value: ``np.float32`` / ``np.float64``, their ``np.dtype`` or their names (``"float32"``,
        ``"float64"``; what :class:`numpy.dtype` reads as one of them); None: ``default``.
    :param default: the class's own rewards dtype, used for None.
    :raises ValueError: for anything else, naming the argument, the accepted values and the value received.
    """
    if value is None:
        return np.dtype(default).type
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        dtype = np.dtype(object)  # (a dtype that is refused below)
    if dtype not in REWARDS_DTYPES:  # (None never gets here: ``np.dtype("float64") == None`` is True)
        raise ValueError(
            "rewards_dtype must be numpy.float32 or numpy.float64 (or their names 'float32' / 'float64'), "
            f"got {value!r}"
        )
    return dtype.type

"""Observation modes of :mod:`vecenv.gymnasium`'s vector envs: ``"same"``, ``"different"`` or ``(batched, single)``.

The checked env factories raise the ``RuntimeError`` of Gymnasium's vector envs for envs whose spaces do not
match; the space override shows vecenv one observation space for envs whose spaces differ in bounds only;
:func:`check_shared_memory_space` refuses what ``gymnasium.vector.AsyncVectorEnv(shared_memory=True)`` refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector.utils import create_shared_memory

__all__ = [
    "CheckedFactory",
    "ObservationSpaceOverride",
    "SpaceHolder",
    "check_observation_mode",
    "check_shared_memory_space",
    "not_equivalent_error",
    "unwrap_space_override",
]


class ObservationSpaceOverride(gym.Wrapper):
    """Shows vecenv the vector env's single observation space instead of the env's own (equivalent) one.

    Used with ``observation_mode="different"`` or a tuple of spaces, where the envs' spaces may differ in
    bounds but share shape and dtype: vecenv batches envs of one space. ``get_wrapper_attr`` /
    ``set_wrapper_attr`` of ``observation_space`` reach the env's own space, so ``call`` / ``get_attr`` /
    ``set_attr`` see the env as Gymnasium's classes do.
    """

    def __init__(self, env: gym.Env, observation_space: spaces.Space) -> None:
        super().__init__(env)
        self.observation_space = observation_space

    def get_wrapper_attr(self, name: str) -> Any:
        if name == "observation_space":
            return self.env.get_wrapper_attr(name)
        return super().get_wrapper_attr(name)

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        if name == "observation_space":
            return self.env.set_wrapper_attr(name, value, force=force)
        return super().set_wrapper_attr(name, value, force=force)


def unwrap_space_override(env: gym.Env) -> gym.Env:
    """The user's env: ``env`` without the :class:`ObservationSpaceOverride` the vector env may have put on it."""
    return env.env if isinstance(env, ObservationSpaceOverride) else env


class SpaceHolder:
    """The spaces every env must match: set from the first env built, or given (picklable)."""

    def __init__(self, observation_space: spaces.Space | None = None, action_space: spaces.Space | None = None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space


def not_equivalent_error(owner: str, single: spaces.Space, space: spaces.Space) -> RuntimeError:
    """Gymnasium's error for an env whose observation space does not share the single space's shape and dtype."""
    if owner == "AsyncVectorEnv":
        return RuntimeError(
            "AsyncVectorEnv(..., observation_mode='different' or custom space) however the sub-environment's "
            "observation spaces do not share a common shape and dtype."
        )
    return RuntimeError(
        f"{owner}(..., observation_mode='different' or custom space) however the sub-environments observation spaces "
        f"do not share a common shape and dtype, single_observation_space={single}, sub-environment observation "
        f"space={space}"
    )


class CheckedFactory:
    """Builds an env and checks its spaces as Gymnasium's vector envs do, raising their ``RuntimeError``.

    :param env_fn: the user's factory.
    :param holder: the spaces to match; the first env built fills what is not set (in-process use only).
    :param mode: ``"same"``: the observation spaces must be equal; ``"equiv"``: they must share shape and dtype;
        ``"defer"``: not checked here (the caller checks once every env is built). With ``"equiv"`` and
        ``"defer"`` an env whose space differs is shown to vecenv with the holder's space (see
        :class:`ObservationSpaceOverride`).
    :param owner: ``"SyncVectorEnv"`` or ``"AsyncVectorEnv"``, for the messages.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], holder: SpaceHolder, mode: str, owner: str) -> None:
        self.env_fn = env_fn
        self.holder = holder
        self.mode = mode
        self.owner = owner

    def __call__(self) -> gym.Env:
        env = self.env_fn()
        holder = self.holder
        if not isinstance(env, gym.Env):
            return env  # vecenv refuses it with its own TypeError
        if holder.observation_space is None:
            holder.observation_space = env.observation_space
        if holder.action_space is None:
            holder.action_space = env.action_space
        single = holder.observation_space
        if self.mode == "same":
            if env.observation_space != single:
                env.close()
                raise RuntimeError(
                    f"{self.owner}(..., observation_mode='same') however the sub-environments observation spaces are "
                    f"not equivalent. single_observation_space={single}, sub-environment "
                    f"observation_space={env.observation_space}. If this is intentional, use "
                    "`observation_mode='different'` instead."
                )
        elif env.observation_space != single:
            if self.mode == "equiv" and not is_space_dtype_shape_equiv(env.observation_space, single):
                env.close()
                raise not_equivalent_error(self.owner, single, env.observation_space)
            env = ObservationSpaceOverride(env, single)
        if env.action_space != holder.action_space:
            env.close()
            raise RuntimeError(
                "Sub-environment action space doesn't make the `single_action_space`, "
                f"action_space={env.action_space}, single_action_space={holder.action_space}"
            )
        return env


def check_observation_mode(observation_mode: Any) -> tuple[spaces.Space, spaces.Space] | None:
    """``(batched, single)`` for a tuple of spaces, None for ``"same"`` / ``"different"``; Gymnasium's errors."""
    if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
        if not isinstance(observation_mode[0], spaces.Space) or not isinstance(observation_mode[1], spaces.Space):
            raise TypeError(
                f"Expected both elements of observation_mode to be Spaces, got {type(observation_mode[0])} and "
                f"{type(observation_mode[1])}"
            )
        return observation_mode[0], observation_mode[1]
    if isinstance(observation_mode, str) and observation_mode in ("same", "different"):
        return None
    raise ValueError(
        "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch observation space, "
        f"actual got {observation_mode}"
    )


def check_shared_memory_space(space: spaces.Space) -> None:
    """Raise what ``gymnasium.vector.AsyncVectorEnv(shared_memory=True)`` raises for observation space ``space``.

    Gymnasium keeps Box, Discrete, MultiDiscrete, MultiBinary, Text and OneOf observations (in Dict / Tuple
    too) in shared memory; Graph and Sequence raise its ``TypeError``; any other space its ``ValueError``
    caused by a :class:`gymnasium.error.CustomSpaceError`. vecenv itself could run them all (it pickles what
    does not fit in shared memory): the refusal is kept so that code behaves as with Gymnasium.
    """

    def walk(sub: spaces.Space) -> None:
        if isinstance(sub, spaces.Dict):
            for value in sub.spaces.values():
                walk(value)
        elif isinstance(sub, (spaces.Tuple, spaces.OneOf)):
            for value in sub.spaces:
                walk(value)
        elif isinstance(sub, (spaces.Graph, spaces.Sequence)) or create_shared_memory.dispatch(
            type(sub)
        ) is create_shared_memory.dispatch(object):
            create_shared_memory(sub, n=1)  # raises for these spaces, before allocating anything

    try:
        walk(space)
    except CustomSpaceError as e:
        raise ValueError(
            "Using `AsyncVector(..., shared_memory=True)` caused an error, you can disable this feature with "
            "`shared_memory=False` however this is slower."
        ) from e

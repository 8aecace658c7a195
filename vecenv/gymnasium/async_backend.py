"""The worker-process backend of ``vecenv.gymnasium.AsyncVectorEnv`` and the steps of building it.

Gymnasium's constructor arguments are checked and turned into vecenv's: the observation spaces of
``observation_mode="different"``, the number of workers for ``max_concurrency``, Gymnasium's errors for envs
whose spaces differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_differing_spaces, batch_space

from vecenv.gymnasium.observation_modes import (
    CheckedFactory,
    SpaceHolder,
    check_shared_memory_space,
    not_equivalent_error,
)
from vecenv.vec_env import SubprocVecEnv, default_n_workers

__all__ = [
    "GymSubprocVecEnv",
    "check_async_arguments",
    "checked_env_fns",
    "observation_spaces",
    "spaces_of_different_envs",
    "start_backend",
    "worker_count",
]

#: the start of vecenv's error for envs whose spaces differ
_SPACES_DIFFER = "All sub-envs must share the same spaces"


class GymSubprocVecEnv(SubprocVecEnv):
    """The worker-process backend of :class:`AsyncVectorEnv`: float64 rewards, nested spaces allowed."""

    rewards_dtype = np.float64
    nested_spaces = True
    gymnasium_resets = True
    mixed_render_modes = True


# --- the constructor's steps ----------------------------------------------------------------------------


def check_async_arguments(max_concurrency: int | None, worker: Callable[..., None] | None, daemon: bool) -> None:
    """Refuse what vecenv's workers cannot honour: an invalid ``max_concurrency``, a custom ``worker``,
    ``daemon=False``."""
    if max_concurrency is not None:
        if not isinstance(max_concurrency, (int, np.integer)):
            raise ValueError(f"`max_concurrency` must be an integer or None, got {type(max_concurrency)}.")
        if max_concurrency < 1:
            raise ValueError(f"`max_concurrency` must be a positive or None, got {max_concurrency}.")
    if worker is not None:
        raise ValueError(
            "vecenv.gymnasium.AsyncVectorEnv does not take a custom `worker`: its worker processes run several "
            "envs each and speak vecenv's protocol. Use gymnasium.vector.AsyncVectorEnv for a custom worker."
        )
    if not daemon:
        raise ValueError(
            "vecenv.gymnasium.AsyncVectorEnv(daemon=False) is not supported: vecenv's worker processes are always "
            "daemonic (they end with the parent), so envs in them cannot start processes of their own. Use "
            "gymnasium.vector.AsyncVectorEnv(daemon=False) for such envs."
        )


def spaces_of_different_envs(env_fns: Sequence[Callable[[], gym.Env]]) -> tuple[spaces.Space, spaces.Space]:
    """``(batched, single)`` observation spaces for ``observation_mode="different"``: Gymnasium builds every env in
    the parent process to read its space, so do we (each env is closed at once)."""
    env_spaces: list[spaces.Space] = []
    for fn in env_fns:
        env = fn()
        env_spaces.append(env.observation_space)
        env.close()
    batched = batch_differing_spaces(env_spaces)
    if not all(is_space_dtype_shape_equiv(space, env_spaces[0]) for space in env_spaces):
        raise not_equivalent_error("AsyncVectorEnv", env_spaces[0], env_spaces[0])
    return batched, env_spaces[0]


def checked_env_fns(
    env_fns: list[Callable[[], gym.Env]], single: spaces.Space, shared_memory: bool
) -> list[Callable[[], gym.Env]]:
    """The factories, each checking that its env's spaces match ``single`` (Gymnasium's errors), once ``single``
    passed Gymnasium's shared-memory check (with ``shared_memory``)."""
    if shared_memory:
        check_shared_memory_space(single)
    holder = SpaceHolder(single)
    return [CheckedFactory(fn, holder, "equiv", "AsyncVectorEnv") if callable(fn) else fn for fn in env_fns]


def worker_count(n_workers: int | None, max_concurrency: int | None, parent_envs: int) -> Any:
    """``SubprocVecEnv``'s ``n_workers``: ``n_workers`` capped so that at most ``max_concurrency`` envs step at a
    time (this process counts as one with ``parent_envs``); None: SubprocVecEnv's default."""
    workers: Any = n_workers
    if max_concurrency is not None:
        if workers is None:
            workers = default_n_workers(parent_envs)
        if parent_envs and max_concurrency < 2:
            raise ValueError(
                f"`max_concurrency` must be at least 2 with parent_envs={parent_envs!r} (this process steps its "
                f"envs while at least one worker steps the others), got {max_concurrency}."
            )
        if isinstance(workers, (int, np.integer)):  # this process is one of the concurrent steppers
            workers = min(int(workers), int(max_concurrency) - (1 if parent_envs else 0))
    return workers


def start_backend(
    env_fns: list[Callable[[], gym.Env]],
    context: str | None,
    n_workers: Any,
    autoreset_mode: AutoresetMode,
    parent_envs: int,
) -> GymSubprocVecEnv:
    """Start the worker processes; vecenv's error for envs whose spaces differ becomes Gymnasium's."""
    try:
        # always vecenv's shared memory: it pickles only what cannot live there (Text, Sequence, ...), and
        # keeps the float64 rewards exact (SubprocVecEnv(shared_memory=False) rounds them to float32)
        return GymSubprocVecEnv(
            env_fns,
            start_method=context,
            n_workers=n_workers,
            shared_memory=True,
            autoreset_mode=autoreset_mode,
            parent_envs=parent_envs,
        )
    except ValueError as exc:
        if not str(exc).startswith(_SPACES_DIFFER):
            raise
        if "has action_space" in str(exc):
            raise RuntimeError(
                "Some environments have an action space different from the first env's. In order to batch "
                f"actions, the action spaces from all environments must be equal. ({exc})"
            ) from exc
        raise RuntimeError(
            "AsyncVectorEnv(..., observation_mode='same') however some of the sub-environments observation spaces "
            "are not equivalent. If this is intentional, use `observation_mode='different'` instead. "
            f"({exc})"
        ) from exc


def observation_spaces(
    venv: GymSubprocVecEnv, given_spaces: tuple[spaces.Space, spaces.Space] | None, shared_memory: bool
) -> tuple[spaces.Space, spaces.Space]:
    """``(batched, single)``: the spaces given, else those of the envs (checked for Gymnasium's shared memory)."""
    if given_spaces is not None:
        return given_spaces
    single = venv.observation_space
    if shared_memory:
        check_shared_memory_space(single)
    return batch_space(single, venv.num_envs), single

"""``vecenv.pettingzoo.make_vec_env``: ``n_envs`` copies of a PettingZoo ``ParallelEnv`` in a vecenv vector env,
seeded as Stable-Baselines3's ``make_vec_env`` seeds its envs, as one :class:`~vecenv.pettingzoo.AgentVecEnv`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from vecenv.base import VecEnv, is_int
from vecenv.pettingzoo.agent_stack_env import AgentStackEnv
from vecenv.pettingzoo.agent_vec_env import AgentVecEnv
from vecenv.vec_env import DummyVecEnv

__all__ = ["make_vec_env"]


def _make_env_fn(
    env_fn: Callable[..., Any], env_kwargs: dict[str, Any], seed: int | None, rank: int
) -> Callable[[], AgentStackEnv]:
    def _init() -> AgentStackEnv:
        return AgentStackEnv(env_fn(**env_kwargs), seed, rank)

    return _init


def make_vec_env(
    env_fn: Callable[..., Any],
    n_envs: int = 1,
    *,
    seed: int | None = None,
    start_index: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: Callable[..., VecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
) -> AgentVecEnv:
    """``n_envs`` copies of a PettingZoo ``ParallelEnv`` as one vector env with one row per agent.

    Env ``i`` is ``env_fn(**env_kwargs)`` wrapped in :class:`AgentStackEnv`, built where ``vec_env_cls`` runs it
    (in a worker process for :class:`~vecenv.SubprocVecEnv`). As SB3's ``make_vec_env``, ``vec_env.seed(seed)``
    makes env ``i``'s first reset use ``seed + i`` (later resets are unseeded; ``seed=None`` still gives distinct
    random seeds), and with a ``seed`` the action space of agent ``j`` of the env of rank ``r = start_index + i``
    is seeded with ``seed + r * num_agents + j``.

    >>> from mpe2 import simple_spread_v3
    >>> venv = make_vec_env(simple_spread_v3.parallel_env, n_envs=2, seed=0, env_kwargs={"max_cycles": 5})
    >>> venv.num_envs, venv.possible_agents
    (6, ['agent_0', 'agent_1', 'agent_2'])
    >>> venv.reset().shape
    (6, 18)
    >>> venv.close()

    :param env_fn: a callable returning a PettingZoo ``ParallelEnv`` (e.g. ``simple_spread_v3.parallel_env``);
        every agent must have the same observation and action space.
    :param n_envs: number of env copies (``num_envs = n_envs * num_agents``).
    :param seed: base seed, or None.
    :param start_index: rank of the first env (only the action-space seeds use it, as in SB3).
    :param env_kwargs: keyword arguments for ``env_fn``.
    :param vec_env_cls: the vector env that runs the envs: :class:`~vecenv.DummyVecEnv` (default),
        :class:`~vecenv.SubprocVecEnv`, :class:`~vecenv.RayVecEnv`.
    :param vec_env_kwargs: keyword arguments for ``vec_env_cls`` (e.g. ``n_workers``, ``max_restarts``).
    :return: the :class:`AgentVecEnv`, seeded for its first reset.
    :raises ValueError: if ``n_envs`` is not a positive integer, the agents' spaces differ, or an observation space
        without zero is not a Box.
    :raises TypeError: if ``env_fn`` returns an AEC env or anything else that is not a ``ParallelEnv``.
    """
    if not is_int(n_envs) or n_envs < 1:
        raise ValueError(f"make_vec_env(n_envs): expected a positive integer, got {n_envs!r}")
    if not callable(env_fn):
        raise TypeError(f"make_vec_env(env_fn): expected a callable returning a ParallelEnv, got {env_fn!r}")
    env_kwargs = dict(env_kwargs or {})
    env_fns: list[Callable[[], gym.Env]] = [
        _make_env_fn(env_fn, env_kwargs, seed, start_index + i) for i in range(int(n_envs))
    ]
    if vec_env_cls is None:
        vec_env_cls = DummyVecEnv
    venv = vec_env_cls(env_fns, **(vec_env_kwargs or {}))
    try:
        agent_venv = AgentVecEnv(venv)
    except BaseException:
        venv.close()
        raise
    agent_venv.seed(seed)
    return agent_venv

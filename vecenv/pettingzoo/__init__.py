"""Multi-agent PettingZoo ``ParallelEnv``\\ s as one Stable-Baselines3-style vector env, one row per agent.

:func:`make_vec_env` builds ``n_envs`` copies of a PettingZoo ``ParallelEnv``; each copy runs as one
:class:`AgentStackEnv` (a ``gymnasium.Env`` whose observation stacks every agent's) inside an ordinary vecenv
vector env (:class:`~vecenv.DummyVecEnv`, :class:`~vecenv.SubprocVecEnv` with its shared memory, timeouts and
restarts, :class:`~vecenv.RayVecEnv`), and :class:`AgentVecEnv` turns its batches into one row per agent:
row ``k`` is env ``k // num_agents``, agent ``possible_agents[k % num_agents]``.

Agents that leave early or join late are rows whose observations and rewards are zeros while the agent is not
in ``env.agents``; ``infos[k]["active"]`` says whether row ``k``'s agent acted in the step (see
:class:`AgentVecEnv` for the rules). Needs the ``pettingzoo`` extra.

The package's modules: :mod:`~vecenv.pettingzoo.agent_stack_env` (one PettingZoo env as one ``gymnasium.Env``),
:mod:`~vecenv.pettingzoo.agent_vec_env` (the rows) and :mod:`~vecenv.pettingzoo.env_util` (:func:`make_vec_env`).
"""

from __future__ import annotations

# (agent_stack_env imports pettingzoo first: without it, importing this package raises MissingExtraError)
from vecenv.pettingzoo.agent_stack_env import AECEnv as AECEnv
from vecenv.pettingzoo.agent_stack_env import AgentStackEnv
from vecenv.pettingzoo.agent_stack_env import ParallelEnv as ParallelEnv
from vecenv.pettingzoo.agent_stack_env import check_parallel_env as check_parallel_env
from vecenv.pettingzoo.agent_vec_env import AgentVecEnv
from vecenv.pettingzoo.env_util import make_vec_env

__all__ = ["AgentStackEnv", "AgentVecEnv", "make_vec_env"]

"""One PettingZoo ``ParallelEnv`` as one ``gymnasium.Env`` (:class:`AgentStackEnv`) whose observation, reward and
flags stack every agent's, and the check that an env can be one (:func:`check_parallel_env`): a ``ParallelEnv``
whose agents share one observation and one action space, of the kinds whose batches are plain arrays.

This is what each env of the inner vector env of :class:`vecenv.pettingzoo.AgentVecEnv` is (built where that
vector env runs it, e.g. in a worker process). Needs the ``pettingzoo`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from vecenv.optional import import_optional

_pettingzoo = import_optional("pettingzoo", "vecenv.pettingzoo", extra="pettingzoo")
ParallelEnv = _pettingzoo.ParallelEnv
AECEnv = _pettingzoo.AECEnv
__all__ = ["AgentStackEnv", "check_parallel_env"]

#: spaces whose batches are plain arrays (the ones an agent's observation / action may have)
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
#: the per-agent flags an :class:`AgentStackEnv` observation carries beside ``"obs"`` and ``"reward"``
_FLAGS = ("terminated", "truncated", "acted", "alive")


def _zero_element(space: spaces.Space, what: str) -> np.ndarray:
    """The all-zeros observation of ``space`` (what a row shows while its agent is absent).

    :raises ValueError: if zeros are not an element of a non-Box ``space`` (Box observations may be zeros anyway,
        as SuperSuit's ``black_death``).
    """
    if not isinstance(space, _ARRAY_SPACES):
        raise TypeError(
            f"{what}: vecenv.pettingzoo supports agents whose spaces are Box, Discrete, MultiDiscrete or MultiBinary, "
            f"got {space}"
        )
    zero: np.ndarray = np.zeros(tuple(space.shape or ()), dtype=space.dtype)
    if not isinstance(space, spaces.Box) and not space.contains(zero if zero.ndim else zero.item()):
        raise ValueError(
            f"{what}: absent agents' rows are filled with zeros, so the observation space must contain zero; got "
            f"{space}, which does not (e.g. Discrete(n, start=s) needs s <= 0 < s + n). Shift the space to start at "
            "0, or wrap the env so that its observations do"
        )
    return zero


def check_parallel_env(env: Any, argument: str = "env_fn(**env_kwargs)") -> tuple[spaces.Space, spaces.Space]:
    """Check that ``env`` is a PettingZoo ``ParallelEnv`` whose agents share one observation and one action space.

    :return: ``(observation_space, action_space)`` of every agent.
    :raises TypeError: for an AEC env (convert it with ``pettingzoo.utils.conversions.aec_to_parallel``) or anything
        that is not a ``ParallelEnv``.
    :raises ValueError: if the agents' spaces differ, there are no agents, or an observation space has no zero.
    """
    if isinstance(env, AECEnv):
        raise TypeError(
            f"{argument} must return a pettingzoo.ParallelEnv, got the AEC env {type(env).__name__}: convert it with "
            "pettingzoo.utils.conversions.aec_to_parallel(env) (or use the env module's parallel_env())"
        )
    if not isinstance(env, ParallelEnv):
        raise TypeError(f"{argument} must return a pettingzoo.ParallelEnv, got {type(env).__name__}")
    agents = list(env.possible_agents)
    if not agents:
        raise ValueError(f"{argument}: the env's possible_agents must not be empty")
    for kind in ("observation", "action"):
        space_of = getattr(env, f"{kind}_space")
        by_agent = {agent: space_of(agent) for agent in agents}
        first = by_agent[agents[0]]
        differ = {agent: space for agent, space in by_agent.items() if space != first}
        if differ:
            listed = ", ".join(f"{agent!r}: {space}" for agent, space in by_agent.items())
            raise ValueError(
                f"{argument}: every agent must have the same {kind} space (one row per agent in one batch), got "
                f"{listed}. Pad them to one space first (e.g. supersuit.pad_observations_v0 / pad_action_space_v0)"
            )
    obs_space, action_space = env.observation_space(agents[0]), env.action_space(agents[0])
    _zero_element(obs_space, f"{argument}: observation space")
    if not isinstance(action_space, _ARRAY_SPACES):
        raise TypeError(
            f"{argument}: vecenv.pettingzoo supports agents whose action spaces are Box, Discrete, MultiDiscrete or "
            f"MultiBinary, got {action_space}"
        )
    return obs_space, action_space


class AgentStackEnv(gym.Env):
    """One PettingZoo ``ParallelEnv`` as one ``gymnasium.Env`` whose observation stacks all agents' (A agents).

    Observation (a Dict): ``"obs"`` the agents' observations ``(A, *obs_shape)`` in ``possible_agents`` order, zeros
    for agents not in ``env.agents`` (and, at the end of an episode, the last observation of the agents that acted);
    ``"reward"`` float32 ``(A,)``; ``"terminated"``, ``"truncated"`` (the agent's flags this step), ``"acted"`` (the
    agent was in ``env.agents`` when the step began: its action was used) and ``"alive"`` (it is in ``env.agents``
    now), int8 ``(A,)``; as a ``dict`` in the observation space's key order (gymnasium sorts them), so that a worker
    process passes the last observation of an episode through shared memory. Action: the agents' actions ``(A,
    *action_shape)``; only those of agents in ``env.agents`` reach the env. The episode ends (``terminated``) when
    ``env.agents`` is empty; the reward is the agents' sum. Info: agent ``j``'s info under the key ``j`` (int;
    ``{}`` when the env gave none) and, when agents leave before the episode ends,
    ``"agent_terminal_observations"``: ``(A, *obs_shape)``, the last observation of each agent (read the rows of the
    agents that left). (Flat, so that vector envs copy it cheaply.) A value in agent ``j``'s info that a vector env
    cannot copy (or, from a worker process, pickle) is left out of agent ``j``'s info alone and named in its
    ``"vecenv.uncopyable_info"`` (see :attr:`nests_agent_infos`).

    Attributes and methods a vector env's ``get_attr`` / ``env_method`` ask for are looked up on the PettingZoo env
    first (:meth:`get_wrapper_attr`).

    :param env: the PettingZoo env (closed with this one).
    :param seed: if not None, agent ``j``'s action space is seeded with ``seed + rank * A + j``.
    :param rank: the env's rank (see ``seed``).
    """

    #: read by vecenv's vector envs: the info holds each agent's info under its int index, so the rule for info
    #: values that cannot be copied applies within each agent's info (:func:`vecenv.errors.drop_uncopyable`)
    nests_agent_infos = True

    def __init__(self, env: Any, seed: int | None = None, rank: int = 0) -> None:
        self.agent_observation_space, self.agent_action_space = check_parallel_env(env)
        self.par_env = env
        self.possible_agents: list[str] = list(env.possible_agents)
        n = len(self.possible_agents)
        self._index = {agent: j for j, agent in enumerate(self.possible_agents)}
        self._obs_zero = _zero_element(self.agent_observation_space, "observation space")
        self._last_obs = np.zeros((n, *self._obs_zero.shape), dtype=self._obs_zero.dtype)
        flag = spaces.MultiBinary(n)
        self.observation_space = spaces.Dict(
            {
                "obs": batch_space(self.agent_observation_space, n),
                "reward": spaces.Box(-np.inf, np.inf, (n,), np.float32),
                **{name: flag for name in _FLAGS},
            }
        )
        self.action_space = batch_space(self.agent_action_space, n)
        self.render_mode = getattr(env, "render_mode", None)
        self.metadata = getattr(env, "metadata", {})
        if seed is not None:
            for j, agent in enumerate(self.possible_agents):
                env.action_space(agent).seed(seed + rank * n + j)

    def _write_obs(self, observations: dict[str, Any]) -> None:
        index, last = self._index, self._last_obs
        for agent, obs in observations.items():
            j = index.get(agent)
            if j is not None:
                last[j] = obs

    def _alive(self) -> list[int]:
        """1 for each agent (in ``possible_agents`` order) in ``env.agents`` now, else 0."""
        alive = [0] * len(self.possible_agents)
        index = self._index
        for agent in self.par_env.agents:
            k = index.get(agent)
            if k is not None:
                alive[k] = 1
        return alive

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the PettingZoo env (``env.reset(seed=seed, options=options)``).

        :return: the stacked observation (zeros for agents not in ``env.agents``) and the agents' infos by index.
        """
        observations, infos = self.par_env.reset(seed=seed, options=options)
        self._last_obs[...] = self._obs_zero
        self._write_obs(observations)
        alive = self._alive()
        n = len(self.possible_agents)
        obs = {  # (the observation space's key order: see step)
            "acted": np.zeros(n, dtype=np.int8),
            "alive": np.array(alive, dtype=np.int8),
            "obs": self._masked_obs(alive),
            "reward": np.zeros(n, dtype=np.float32),
            "terminated": np.zeros(n, dtype=np.int8),
            "truncated": np.zeros(n, dtype=np.int8),
        }
        return obs, self._agent_infos(infos)

    def _agent_infos(self, infos: dict[str, Any]) -> dict[Any, Any]:
        """The agents' non-empty infos by agent index (an agent left out has an empty info: the info of a step
        where no agent has one is empty, and a worker process then sends none)."""
        index = self._index
        return {index[agent]: info for agent, info in infos.items() if info and agent in index}

    def _masked_obs(self, shown: Sequence[int] | np.ndarray) -> np.ndarray:
        """The last observations, the zero observation in the rows of the agents not ``shown`` (0 / 1 each)."""
        obs = self._last_obs.copy()
        for j, show in enumerate(shown):
            if not show:
                obs[j] = self._obs_zero
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the agents in ``env.agents`` with their rows of ``action`` (the others' rows are ignored)."""
        env, index, n = self.par_env, self._index, len(self.possible_agents)
        acting = [agent for agent in env.agents if agent in index]
        observations, rewards, terminations, truncations, infos = env.step(
            {agent: action[index[agent]] for agent in acting}
        )
        # the flags in Python lists, then one array each: for a few agents, cheaper than numpy calls per flag
        acted, terminated, truncated = [0] * n, [0] * n, [0] * n
        reward = np.zeros(n, dtype=np.float32)
        acted_ids = [index[agent] for agent in acting]
        for agent, j in zip(acting, acted_ids, strict=True):
            acted[j] = 1
            reward[j] = rewards.get(agent, 0.0)
            if terminations.get(agent, False):
                terminated[j] = 1
            if truncations.get(agent, False):
                truncated[j] = 1
        self._write_obs(observations)
        alive = self._alive()
        over = 1 not in alive
        ended = False  # an agent that acted ended its episode
        for j in acted_ids:
            if not alive[j] and not terminated[j] and not truncated[j]:
                truncated[j] = 1  # it acted and is gone without a flag (the env dropped it): it ends as truncated
            ended = ended or bool(terminated[j] or truncated[j])
        info = self._agent_infos(infos)
        if over:
            obs = self._masked_obs(acted)
        else:
            if ended:
                info["agent_terminal_observations"] = self._last_obs.copy()
            obs = self._masked_obs(alive)
        # in the observation space's key order (gymnasium sorts a Dict's keys), so that a worker process writes the
        # last observation of an episode into shared memory as it is (vecenv.spaces.make_row_writer)
        stacked = {
            "acted": np.array(acted, dtype=np.int8),
            "alive": np.array(alive, dtype=np.int8),
            "obs": obs,
            "reward": reward,
            "terminated": np.array(terminated, dtype=np.int8),
            "truncated": np.array(truncated, dtype=np.int8),
        }
        return stacked, float(reward.sum()), over, False, info

    def render(self) -> Any:
        """The PettingZoo env's ``render()``."""
        return self.par_env.render()

    def close(self) -> None:
        """Close the PettingZoo env."""
        self.par_env.close()

    def get_wrapper_attr(self, name: str) -> Any:
        """Attribute ``name`` of the PettingZoo env, else of this env."""
        try:
            return getattr(self.par_env, name)
        except AttributeError:
            return getattr(self, name)

    def set_parallel_env_attr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` of the PettingZoo env (what :meth:`AgentVecEnv.set_attr` calls)."""
        setattr(self.par_env, name, value)

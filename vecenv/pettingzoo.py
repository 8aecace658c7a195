"""Multi-agent PettingZoo ``ParallelEnv``\\ s as one Stable-Baselines3-style vector env, one row per agent.

:func:`make_vec_env` builds ``n_envs`` copies of a PettingZoo ``ParallelEnv``; each copy runs as one
:class:`AgentStackEnv` (a ``gymnasium.Env`` whose observation stacks every agent's) inside an ordinary vecenv
vector env (:class:`~vecenv.DummyVecEnv`, :class:`~vecenv.SubprocVecEnv` with its shared memory, timeouts and
restarts, :class:`~vecenv.RayVecEnv`), and :class:`AgentVecEnv` turns its batches into one row per agent:
row ``k`` is env ``k // num_agents``, agent ``possible_agents[k % num_agents]``.

Agents that leave early or join late are rows whose observations and rewards are zeros while the agent is not
in ``env.agents``; ``infos[k]["active"]`` says whether row ``k``'s agent acted in the step (see
:class:`AgentVecEnv` for the rules). Needs the ``pettingzoo`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn, is_int
from vecenv.errors import UNCOPYABLE_INFO_KEY, AgentInfoKey, UncopyableInfoError, add_note
from vecenv.interrupts import guarded
from vecenv.optional import import_optional
from vecenv.spaces import make_actions_checker
from vecenv.stats import StepStats
from vecenv.vec_env import DummyVecEnv

_pettingzoo = import_optional("pettingzoo", "vecenv.pettingzoo", extra="pettingzoo")
ParallelEnv = _pettingzoo.ParallelEnv
AECEnv = _pettingzoo.AECEnv

__all__ = ["AgentStackEnv", "AgentVecEnv", "make_vec_env"]

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

    Observation (a Dict): ``"obs"`` the agents' observations ``(A, *obs_shape)`` in ``possible_agents`` order,
    zeros for agents not in ``env.agents`` (and, at the end of an episode, the last observation of the agents that
    acted); ``"reward"`` float32 ``(A,)``; ``"terminated"``, ``"truncated"`` (the agent's flags this step),
    ``"acted"`` (the agent was in ``env.agents`` when the step began: its action was used) and ``"alive"`` (it is
    in ``env.agents`` now), int8 ``(A,)``. Action: the agents' actions ``(A, *action_shape)``; only those of agents
    in ``env.agents`` reach the env. The episode ends (``terminated``) when ``env.agents`` is empty; the reward is
    the agents' sum. Info: agent ``j``'s info under the key ``j`` (int; ``{}`` when the env gave none) and, when
    agents leave before the episode ends, ``"agent_terminal_observations"``: ``(A, *obs_shape)``, the last
    observation of each agent (read the rows of the agents that left). (Flat, so that vector envs copy it cheaply.)
    A value in agent ``j``'s info that a vector env cannot copy (or, from a worker process, pickle) is left out
    of agent ``j``'s info alone and named in its ``"vecenv.uncopyable_info"`` (see :attr:`nests_agent_infos`).

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

    def _alive(self) -> np.ndarray:
        alive = np.zeros(len(self.possible_agents), dtype=np.int8)
        index = self._index
        alive[[index[agent] for agent in self.par_env.agents if agent in index]] = 1
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
        obs = {
            "obs": self._masked_obs(alive),
            "reward": np.zeros(n, dtype=np.float32),
            "terminated": np.zeros(n, dtype=np.int8),
            "truncated": np.zeros(n, dtype=np.int8),
            "acted": np.zeros(n, dtype=np.int8),
            "alive": alive,
        }
        return obs, self._agent_infos(infos)

    def _agent_infos(self, infos: dict[str, Any]) -> dict[Any, Any]:
        index = self._index
        return {index[agent]: info for agent, info in infos.items() if agent in index}

    def _masked_obs(self, shown: np.ndarray) -> np.ndarray:
        obs = self._last_obs.copy()
        obs[shown == 0] = self._obs_zero
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the agents in ``env.agents`` with their rows of ``action`` (the others' rows are ignored)."""
        env, index, n = self.par_env, self._index, len(self.possible_agents)
        acting = [agent for agent in env.agents if agent in index]
        observations, rewards, terminations, truncations, infos = env.step(
            {agent: action[index[agent]] for agent in acting}
        )
        acted = np.zeros(n, dtype=np.int8)
        acted_ids = [index[agent] for agent in acting]
        acted[acted_ids] = 1
        reward = np.zeros(n, dtype=np.float32)
        terminated = np.zeros(n, dtype=np.int8)
        truncated = np.zeros(n, dtype=np.int8)
        for agent, j in zip(acting, acted_ids, strict=True):
            reward[j] = rewards.get(agent, 0.0)
            terminated[j] = bool(terminations.get(agent, False))
            truncated[j] = bool(truncations.get(agent, False))
        self._write_obs(observations)
        alive = self._alive()
        over = not alive.any()
        # an agent that acted and is gone without a flag (the env dropped it) ends as truncated
        gone = (acted == 1) & (alive == 0) & (terminated == 0) & (truncated == 0)
        truncated[gone] = 1
        info = self._agent_infos(infos)
        if over:
            obs = self._masked_obs(acted)
        else:
            if ((acted == 1) & ((terminated == 1) | (truncated == 1))).any():
                info["agent_terminal_observations"] = self._last_obs.copy()
            obs = self._masked_obs(alive)
        stacked = {
            "obs": obs,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "acted": acted,
            "alive": alive,
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


_NO_INFO: dict[str, Any] = {}  # (never modified: rows copy it)


def _add_env_keys(info: dict[str, Any], env_keys: dict[str, Any]) -> None:
    """Add the ``"vecenv."`` keys of the env's own info to a row's ``info``, merging ``"vecenv.uncopyable_info"``
    with the agent's own (values left out of the env's info and of the agent's)."""
    own = info.get(UNCOPYABLE_INFO_KEY)
    info.update(env_keys)
    listed = env_keys.get(UNCOPYABLE_INFO_KEY)
    if isinstance(own, dict) and isinstance(listed, dict):
        info[UNCOPYABLE_INFO_KEY] = {**own, **listed}


def _stacked(batch: VecEnvObs) -> dict[str, np.ndarray]:
    """The inner vector env's batch of :class:`AgentStackEnv` observations (a dict, checked in ``__init__``)."""
    assert isinstance(batch, dict)
    return batch


def _rows_of(value: np.ndarray) -> np.ndarray:
    """``(n_envs, A, *shape)`` -> ``(n_envs * A, *shape)`` (a view)."""
    return value.reshape((value.shape[0] * value.shape[1], *value.shape[2:]))


class AgentVecEnv(VecEnv):
    """A vector env of PettingZoo envs with one row per agent (build it with :func:`make_vec_env`).

    ``num_envs = n_envs * num_agents``; row ``k`` is env ``k // num_agents``, agent ``possible_agents[k %
    num_agents]``. ``observation_space`` / ``action_space`` are one agent's. ``step`` returns observations
    ``(num_envs, *obs_shape)``, float32 rewards and bool dones ``(num_envs,)`` and one info dict per row: the
    agent's own PettingZoo info for the step plus ``"env_index"`` (int), ``"agent_id"`` (str), ``"active"``
    (bool: the agent was in ``env.agents`` when the step began, so its action was used and its reward / done are
    real), ``"TimeLimit.truncated"`` (bool: truncated and not terminated, as SB3) and, when the row is done,
    ``"terminal_observation"``.

    - An agent that terminates or truncates before the others: its row is done at that step with its last
      observation as ``terminal_observation``; then it shows zero observations, zero rewards and ``"active":
      False`` until the env's episode ends.
    - When ``env.agents`` is empty the episode ends: every row of the env is done (rows whose agent had already
      left are done again, with ``"active": False`` and a zero ``terminal_observation``), and the env resets
      (seeded only by its first reset, as SB3's ``make_vec_env`` and SuperSuit).
    - An agent not in ``env.agents`` yet (one that joins later) shows zeros until it appears.
    - Actions of rows whose agent is not in ``env.agents`` are ignored.

    :class:`~vecenv.VecMonitor` counts in a row's episode length only the steps where its agent acted, and records
    no episode for a row done without such a step (a row done with ``"active": False``).

    ``get_attr`` / ``set_attr`` / ``env_method`` / ``env_is_wrapped`` take row indices and act once on each env
    those rows belong to (on the PettingZoo env, e.g. ``env_method("state")``), returning one value per row.

    :param venv: a vector env of :class:`AgentStackEnv` (closed with this one), in SB3's same-step autoreset mode.
    :raises ValueError: if ``venv``'s envs are not :class:`AgentStackEnv` or it does not autoreset in the same step.
    """

    #: read by VecMonitor: episodes of rows count only the steps in :attr:`row_active`
    marks_inactive_rows = True

    def __init__(self, venv: VecEnv) -> None:
        mode = getattr(venv, "autoreset_mode", AutoresetMode.SAME_STEP)
        if AutoresetMode(mode) is not AutoresetMode.SAME_STEP:
            raise ValueError(
                f"AgentVecEnv(venv): venv must autoreset in the same step (AutoresetMode.SAME_STEP), got {mode}"
            )
        space = venv.observation_space
        if not isinstance(space, spaces.Dict) or set(space.spaces) != {"obs", "reward", *_FLAGS}:
            raise ValueError(f"AgentVecEnv(venv): venv's envs must be AgentStackEnv, got observation space {space}")
        self.venv = venv
        #: the PettingZoo env's ``possible_agents``, the order of the rows of each env
        self.possible_agents: list[str] = list(venv.get_attr("possible_agents", [0])[0])
        #: number of agents (rows) per env
        self.num_agents = len(self.possible_agents)
        #: number of PettingZoo env copies
        self.n_envs = venv.num_envs
        self._env_ids = np.arange(self.n_envs)  # every env, in order: a full batch's env ids
        obs_space, action_space = (
            venv.get_attr("agent_observation_space", [0])[0],
            venv.get_attr("agent_action_space", [0])[0],
        )
        num_envs = self.n_envs * self.num_agents
        #: int64 ``(num_envs,)``: the env of each row
        self.row_env_indices = np.repeat(np.arange(self.n_envs, dtype=np.int64), self.num_agents)
        #: the agent of each row
        self.row_agents: list[str] = self.possible_agents * self.n_envs
        self._check_actions = make_actions_checker(action_space)
        self.autoreset_mode = AutoresetMode.SAME_STEP
        #: bool ``(num_envs,)``: the rows whose agent acted in the last step (``infos[k]["active"]``)
        self.row_active = np.zeros(num_envs, dtype=bool)
        self._resetting: set[int] = set()  # partial batches: envs whose reset recv() has not returned yet
        super().__init__(num_envs, obs_space, action_space)
        self.metadata = venv.metadata

    # --- rows and envs --------------------------------------------------------------------------------

    def _envs_of(self, indices: VecEnvIndices) -> tuple[list[int], list[int]]:
        """``(envs, position)``: the distinct envs of the rows ``indices`` (in first-seen order) and, per row, the
        position of its env in that list."""
        envs: list[int] = []
        where: dict[int, int] = {}
        position = []
        for row in self._normalize_indices(indices):
            env = row // self.num_agents
            if env not in where:
                where[env] = len(envs)
                envs.append(env)
            position.append(where[env])
        return envs, position

    def _per_row(self, indices: VecEnvIndices, call: Callable[[list[int]], list[Any]]) -> list[Any]:
        envs, position = self._envs_of(indices)
        values = call(envs) if envs else []
        return [values[p] for p in position]

    def _row_info(self, agent_info: dict[str, Any], row: int, active: bool) -> dict[str, Any]:
        info = dict(agent_info)
        info["env_index"] = row // self.num_agents
        info["agent_id"] = self.row_agents[row]
        info["active"] = active
        return info

    def _rows(self, batch: Any, env_dones: np.ndarray, env_infos: Sequence[dict[Any, Any]], env_ids: np.ndarray) -> Any:
        """Turn the inner envs' results (envs ``env_ids``) into ``(obs, rewards, dones, infos, active)`` by row."""
        agents = self.num_agents
        obs, rewards = batch["obs"], batch["reward"]
        terminated, truncated, acted = batch["terminated"], batch["truncated"], batch["acted"]
        finished = np.flatnonzero(env_dones)
        finals: dict[int, Any] = {}
        if finished.size:
            rewards, terminated, truncated, acted = rewards.copy(), terminated.copy(), truncated.copy(), acted.copy()
            for e in finished.tolist():
                final = env_infos[e].get("terminal_observation")
                if final is None:  # e.g. a restarted worker: no step happened
                    rewards[e] = 0.0
                    terminated[e] = 0
                    truncated[e] = 1
                    acted[e] = 0
                    continue
                finals[e] = final
                rewards[e], terminated[e], truncated[e], acted[e] = (
                    final["reward"],
                    final["terminated"],
                    final["truncated"],
                    final["acted"],
                )
        row_terminated = _rows_of(terminated).astype(bool)
        row_truncated = _rows_of(truncated).astype(bool)
        row_active = _rows_of(acted).astype(bool)
        row_acted = row_active.tolist()
        dones = row_terminated | row_truncated
        if finished.size:
            dones.reshape(len(env_infos), agents)[finished] = True
        time_limit = (row_truncated & ~row_terminated).tolist()
        infos: list[dict[str, Any]] = []
        for e, env_info in enumerate(env_infos):
            first_row = int(env_ids[e]) * agents
            extra = {key: value for key, value in env_info.items() if isinstance(key, str) and key[:7] == "vecenv."}
            for j in range(agents):
                k = e * agents + j
                info = self._row_info(env_info.get(j, _NO_INFO), first_row + j, bool(row_acted[k]))
                info["TimeLimit.truncated"] = bool(time_limit[k])
                if extra:
                    _add_env_keys(info, extra)
                infos.append(info)
        for k in np.flatnonzero(dones).tolist():
            e, j = divmod(k, agents)
            if e in finals:
                terminal = finals[e]["obs"][j]
            elif env_dones[e]:
                continue  # a restarted worker: no step happened, no last observation (as vecenv's own envs)
            else:
                terminal = env_infos[e]["agent_terminal_observations"][j]
            infos[k]["terminal_observation"] = terminal
        return _rows_of(obs), _rows_of(rewards), dones, infos, row_active

    def _reset_rows(
        self, alive: np.ndarray, env_infos: Sequence[dict[Any, Any]], env_ids: np.ndarray
    ) -> list[dict[str, Any]]:
        """The rows' reset infos of the envs ``env_ids`` (``alive``: their agents' flags, ``(len(env_ids), A)``)."""
        infos = []
        for e, env_info in enumerate(env_infos):
            first_row = int(env_ids[e]) * self.num_agents
            for j in range(self.num_agents):
                infos.append(self._row_info(env_info.get(j, _NO_INFO), first_row + j, bool(alive[e, j])))
        return infos

    def _env_actions(self, actions: Any, rows: int) -> np.ndarray:
        """Check ``rows`` actions and group them by env: ``(rows // A, A, *action_shape)``."""
        self._check_actions(actions, rows)
        batch = np.asarray(actions)
        shape = tuple(self.action_space.shape or ())
        return batch.reshape((rows // self.num_agents, self.num_agents, *shape))

    # --- the VecEnv API -------------------------------------------------------------------------------

    @guarded()
    def reset(self) -> VecEnvObs:
        """Reset every env (with the seeds / options set by :meth:`seed` / :meth:`set_options`, then forgotten).

        :return: observations ``(num_envs, *obs_shape)``, zeros for agents not in ``env.agents``; the rows' reset
            infos (the agent's PettingZoo reset info, ``"env_index"``, ``"agent_id"``, ``"active"``: the agent is in
            ``env.agents``) are in :attr:`reset_infos`.
        """
        batch = _stacked(self.venv.reset())
        self._resetting = set()
        self.reset_infos = self._reset_rows(batch["alive"], self.venv.reset_infos, self._env_ids)
        self.row_active = np.zeros(self.num_envs, dtype=bool)
        return _rows_of(batch["obs"])

    @guarded(raise_at_end=False)
    def step_async(self, actions: np.ndarray) -> None:
        """Start a step: one action per row ``(num_envs, *action_shape)``; rows of absent agents are ignored.

        :raises ValueError: if ``actions`` does not hold ``num_envs`` valid actions of one agent's action space.
        """
        self.venv.step_async(self._env_actions(actions, self.num_envs))

    @guarded(raise_at_end=False)
    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step: ``(obs, rewards, dones, infos)`` by row (see the class docstring).

        :raises UncopyableInfoError: as the inner vector env (the step happened; the next one returns it), its
            ``entries`` naming rows: ``(row, key, type name)`` (see :meth:`_name_rows`).
        """
        try:
            inner_obs, _, env_dones, env_infos = self.venv.step_wait()
        except UncopyableInfoError as exc:
            self._name_rows(exc)
            raise
        batch = _stacked(inner_obs)
        obs, rewards, dones, infos, self.row_active = self._rows(batch, env_dones, env_infos, self._env_ids)
        self._update_reset_infos(np.flatnonzero(env_dones), self._env_ids, batch["alive"])
        return obs, rewards, dones, infos

    def _name_rows(self, exc: UncopyableInfoError) -> None:
        """Make the inner vector env's ``exc`` name rows: its ``entries`` ``(env index, key, type name)`` become
        ``(row, key, type name)``, each row whose info names ``key`` in ``"vecenv.uncopyable_info"``: the agent's
        row for a value left out of an agent's info, every row of the env for one left out of the env's own info.
        A note says which env and agent each of those rows is."""
        agents, rows, named = self.num_agents, [], {}
        for env_index, key, type_name in exc.entries:
            first_row = env_index * agents
            if isinstance(key, AgentInfoKey) and 0 <= key.agent < agents:
                row = first_row + key.agent
                rows.append((row, key.key, type_name))
                agent = self.possible_agents[key.agent]
                named[row] = f"env {env_index}'s info[{key.agent}] is agent {agent!r} (row {row})"
            else:
                rows += [(first_row + j, key, type_name) for j in range(agents)]
        exc.entries = rows
        if named:
            add_note(exc, f"vecenv.pettingzoo: entries name rows; {'; '.join(named.values())}")

    def _update_reset_infos(self, positions: np.ndarray, env_ids: np.ndarray, alive: np.ndarray) -> None:
        """The rows' reset infos of the envs at ``positions`` of a batch of envs ``env_ids`` (``alive``: the
        batch's flags), after their reset."""
        if not positions.size:
            return
        inner, agents = self.venv.reset_infos, self.num_agents
        envs = env_ids[positions]
        rows = self._reset_rows(alive[positions], [inner[e] for e in envs.tolist()], envs)
        for k, e in enumerate(envs.tolist()):
            self.reset_infos[e * agents : (e + 1) * agents] = rows[k * agents : (k + 1) * agents]

    # --- partial batches (EnvPool's contract, by rows) ------------------------------------------------

    def _partial(self, what: str) -> Any:
        if not hasattr(self.venv, "send"):
            raise NotImplementedError(
                f"{what}() needs an inner vector env with partial batches (DummyVecEnv, SubprocVecEnv, RayVecEnv), "
                f"got {type(self.venv).__name__}"
            )
        return self.venv

    @guarded(raise_at_end=False)
    def async_reset(self) -> None:
        """Start resetting every env; collect the first observations by row with :meth:`recv`."""
        self._partial("async_reset").async_reset()
        self._resetting = set(range(self.n_envs))

    @guarded(raise_at_end=False)
    def send(self, actions: Any, env_ids: VecEnvIndices) -> None:
        """Start stepping the envs of the rows ``env_ids``, which must hold every row of each of those envs; row
        ``env_ids[k]`` receives ``actions[k]`` (EnvPool's ``send``, by rows).

        :param actions: one action per row id, ``(len(env_ids), *action_shape)``.
        :param env_ids: row indices (as :meth:`recv` returns them).
        :raises ValueError: if the rows miss some rows of an env they name, repeat a row, or the actions do not
            match them.
        """
        venv = self._partial("send")
        agents = self.num_agents
        rows = self._normalize_indices(env_ids)
        if len(set(rows)) != len(rows):
            raise ValueError(f"send(env_ids): rows must not repeat, got {rows}")
        envs, _ = self._envs_of(rows)
        missing = sorted({e * agents + j for e in envs for j in range(agents)} - set(rows))
        if missing:
            raise ValueError(
                f"send(env_ids): expected every row of each env sent (an env steps all its agents at once: rows "
                f"e * {agents} .. e * {agents} + {agents - 1} of env e), got rows {rows}, which miss rows {missing}"
            )
        grouped = self._env_actions(actions, len(rows))
        position = {row: k for k, row in enumerate(rows)}
        order = [position[e * agents + j] for e in envs for j in range(agents)]
        flat = grouped.reshape((len(rows), *grouped.shape[2:]))
        venv.send(flat[order].reshape(grouped.shape), envs)
        self._resetting.difference_update(envs)

    @guarded(raise_at_end=False)
    def recv(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Wait for at least the inner vector env's ``batch_size`` envs and return all their rows.

        :return: ``(obs, rewards, dones, infos, env_ids)`` by row as :meth:`step_wait`, for the rows of the envs that
            finished, ``env_ids`` their row indices (int64, increasing). Rows of envs coming back from
            :meth:`async_reset` have rewards 0, dones False and their reset info.
        """
        try:
            inner_obs, _, env_dones, env_infos, env_ids = self._partial("recv").recv()
        except UncopyableInfoError as exc:
            self._name_rows(exc)
            raise
        batch = _stacked(inner_obs)
        obs, rewards, dones, infos, _ = self._rows(batch, env_dones, env_infos, env_ids)
        resets = np.array([e in self._resetting for e in env_ids.tolist()], dtype=bool)
        if resets.any():
            positions = np.flatnonzero(resets)
            self._update_reset_infos(positions, env_ids, batch["alive"])
            for p, e in zip(positions.tolist(), env_ids[positions].tolist(), strict=True):
                infos[p * self.num_agents : (p + 1) * self.num_agents] = self.reset_infos[
                    e * self.num_agents : (e + 1) * self.num_agents
                ]
            self._resetting.difference_update(env_ids[positions].tolist())
        self._update_reset_infos(np.flatnonzero(env_dones), env_ids, batch["alive"])
        rows = (env_ids[:, None] * self.num_agents + np.arange(self.num_agents)).reshape(-1)
        return obs, rewards, dones, infos, rows

    def seed(self, seed: int | Sequence[int | None] | None = None) -> Sequence[int | None]:
        """Set the seeds of the next :meth:`reset`: env ``i`` (all its rows) gets ``seed + i`` (SB3's ``seed``).

        :param seed: the base seed; None (a random base); or one seed per env (``n_envs`` values).
        :return: the seed of each row (its env's).
        :raises ValueError: if a sequence does not hold ``n_envs`` seeds.
        """
        if isinstance(seed, Sequence) and not isinstance(seed, str) and len(seed) != self.n_envs:
            raise ValueError(
                f"seed([...]) must give one seed (or None) per env: expected {self.n_envs}, got {len(seed)}"
            )
        env_seeds = self.venv.seed(seed)
        return [env_seeds[e] for e in self.row_env_indices.tolist()]

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Set the ``options`` of each env's next reset: one dict for all envs, None, or one dict per env
        (``n_envs`` dicts).

        :raises ValueError: if a list does not hold ``n_envs`` dicts.
        """
        if isinstance(options, list) and len(options) != self.n_envs:
            raise ValueError(
                f"set_options([...]) must give one dict per env: expected {self.n_envs}, got {len(options)}"
            )
        self.venv.set_options(options)

    def close(self) -> None:
        """Close the inner vector env and the PettingZoo envs."""
        self.venv.close()

    @property
    def closed(self) -> bool:
        """Whether the inner vector env is closed."""
        return bool(getattr(self.venv, "closed", False))

    def step_stats(self, reset: bool = False) -> StepStats:
        """The inner vector env's step accounts (see :meth:`vecenv.DummyVecEnv.step_stats`)."""
        return self.venv.step_stats(reset)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attribute ``attr_name`` of the PettingZoo env of each row ``indices`` (one value per row)."""
        return self._per_row(indices, lambda envs: self.venv.get_attr(attr_name, envs))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set attribute ``attr_name`` of the PettingZoo env of the rows ``indices`` (once per env)."""
        envs, _ = self._envs_of(indices)
        if envs:
            self.venv.env_method("set_parallel_env_attr", attr_name, value, indices=envs)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call ``method_name`` of the PettingZoo env of the rows ``indices``, once per env; one value per row."""
        return self._per_row(
            indices, lambda envs: self.venv.env_method(method_name, *method_args, indices=envs, **method_kwargs)
        )

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether the env of each row is wrapped with the gymnasium wrapper ``wrapper_class`` (one bool per row)."""
        return self._per_row(indices, lambda envs: self.venv.env_is_wrapped(wrapper_class, envs))

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One frame per env (not per row): the inner vector env's ``get_images()``."""
        return self.venv.get_images()

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The inner vector env's ``render(mode)`` (one tile per env)."""
        return self.venv.render(mode)


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

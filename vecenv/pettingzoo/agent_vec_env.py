"""The vector env of PettingZoo envs with one row per agent (:class:`AgentVecEnv`): it turns the batches of an
inner vector env of :class:`~vecenv.pettingzoo.agent_stack_env.AgentStackEnv` (one per env, every agent stacked)
into rows, row ``k`` being env ``k // num_agents``, agent ``possible_agents[k % num_agents]``, for steps, resets,
partial batches, seeds and the attribute and method calls of the SB3 ``VecEnv`` API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from vecenv.actions import make_actions_checker
from vecenv.base import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from vecenv.errors import UNCOPYABLE_INFO_KEY, AgentInfoKey, UncopyableInfoError, add_note
from vecenv.interrupts import guarded
from vecenv.pettingzoo.agent_stack_env import _FLAGS
from vecenv.stats import StepStats

__all__ = ["AgentVecEnv"]

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
        # each row's info keys that name it, copied for every step's info (cheaper than setting them one by one)
        self._row_keys = [
            {"env_index": row // self.num_agents, "agent_id": agent} for row, agent in enumerate(self.row_agents)
        ]
        # each row's step info in the common case, prebuilt: the agent acted and was not truncated by a time limit
        # (a step copies it, then sets "active" and "TimeLimit.truncated" in the rows where they differ)
        self._row_templates = [{**keys, "active": True, "TimeLimit.truncated": False} for keys in self._row_keys]
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
        """Row ``row``'s info: the agent's own keys, then ``env_index``, ``agent_id`` and ``active``."""
        info = {**agent_info, **self._row_keys[row]} if agent_info else self._row_keys[row].copy()
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
        dones = row_terminated | row_truncated
        if finished.size:
            dones.reshape(len(env_infos), agents)[finished] = True
        # hot path (one dict per row and step): each row's info is a copy of its prebuilt template; "active" and
        # "TimeLimit.truncated" (truncated and not terminated, as SB3) are set only in the rows where they differ
        # from it; only the envs whose info holds more than "TimeLimit.truncated" (an agent's own info, "vecenv."
        # keys, agent terminal observations) are gone through row by row
        time_limit = row_truncated & ~row_terminated
        templates = self._row_templates
        if len(env_ids) == self.n_envs and env_ids is self._env_ids:
            infos: list[dict[str, Any]] = list(map(dict.copy, templates))
        else:
            rows = (env_ids[:, None] * agents + np.arange(agents)).reshape(-1).tolist()
            infos = list(map(dict.copy, map(templates.__getitem__, rows)))
        for k in np.flatnonzero(time_limit | ~row_active).tolist():
            info = infos[k]
            info["active"] = bool(row_active[k])
            info["TimeLimit.truncated"] = bool(time_limit[k])
        plain_key = "TimeLimit.truncated"  # (an env's info that holds this key alone adds nothing to its rows)
        for e in [e for e, info in enumerate(env_infos) if len(info) > 1 or (info and plain_key not in info)]:
            env_info = env_infos[e]
            extra = {k: value for k, value in env_info.items() if isinstance(k, str) and k[:7] == "vecenv."}
            for k in range(e * agents, (e + 1) * agents):
                agent_info = env_info.get(k - e * agents)
                if agent_info:  # the agent's keys first, then the row's (as the template's order)
                    infos[k] = {**agent_info, **infos[k]}
                if extra:
                    _add_env_keys(infos[k], extra)
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

"""Small scripted PettingZoo ``ParallelEnv``\\ s for tests/test_pettingzoo.py (importable by worker processes).

:class:`ScriptedAgentsEnv`: agents ``a``, ``b``, ``c`` (indices 0, 1, 2). At reset ``a`` and ``b`` are in
``agents``; ``c`` joins after step ``join`` (default 1); ``b`` terminates at step ``leave`` (default 2); ``a`` and
``c`` truncate at step ``length`` (default 4), which ends the episode. Agent ``j``'s observation at step ``t`` is
``[j, t + offset]`` (float32), where ``offset`` is drawn from ``np_random`` at each reset (so seeds show); its
reward is ``10 * j + action``; its info ``{"t": t, "action": action}``. Receiving an action for an agent that is
not in ``agents`` raises.

:class:`DroppingAgentsEnv`: the same, but ``b`` leaves without a flag.

:class:`LockInfoEnv`: agents ``a0``, ``a1``; a lock in ``a1``'s info (and, optionally, in its reset infos).
:class:`IntKeyedLockInfoEnv`: a single-agent gymnasium env whose info nests a dict holding a lock under an int key.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

AGENTS = ["a", "b", "c"]


class ScriptedAgentsEnv(ParallelEnv):  # type: ignore[misc]
    """See the module docstring."""

    metadata = {"name": "scripted_agents_v0", "render_modes": []}

    def __init__(self, join: int = 1, leave: int = 2, length: int = 4, render_mode: str | None = None) -> None:
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.join, self.leave, self.length = join, leave, length
        self.render_mode = render_mode
        self.t = 0
        self.offset = 0
        self.np_random, _ = seeding.np_random(None)
        self.custom = "custom"
        self.resets: list[int | None] = []

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(5)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([AGENTS.index(agent), self.t + self.offset], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.resets.append(seed)
        self.offset = int(self.np_random.integers(0, 1000)) + int((options or {}).get("shift", 0))
        self.t = 0
        self.agents = ["a", "b"]
        return {agent: self._obs(agent) for agent in self.agents}, {agent: {"reset": True} for agent in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if set(actions) != set(self.agents):
            raise ValueError(f"actions for {sorted(actions)}, agents are {self.agents}")
        self.t += 1
        rewards = {agent: 10.0 * AGENTS.index(agent) + float(action) for agent, action in actions.items()}
        terminations = {agent: agent == "b" and self.t == self.leave for agent in actions}
        truncations = {agent: agent != "b" and self.t == self.length for agent in actions}
        infos = {agent: {"t": self.t, "action": int(action)} for agent, action in actions.items()}
        self.agents = [agent for agent in self.agents if not (terminations[agent] or truncations[agent])]
        if self.t == self.join and self.t < self.length:
            self.agents.append("c")
        observations = {agent: self._obs(agent) for agent in {*actions, *self.agents}}
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        return np.array([self.t, self.offset], dtype=np.float32)


class DroppingAgentsEnv(ScriptedAgentsEnv):
    """As :class:`ScriptedAgentsEnv`, but at step ``leave`` ``b`` leaves ``agents`` without a termination or
    truncation flag (an env that drops an agent)."""

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        observations, rewards, terminations, truncations, infos = super().step(actions)
        terminations = dict.fromkeys(terminations, False)
        return observations, rewards, terminations, truncations, infos


class MixedSpacesEnv(ScriptedAgentsEnv):
    """Agent ``c`` observes a Box of another shape (refused by vecenv.pettingzoo)."""

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (3 if agent == "c" else 2,), np.float32)


class NoZeroObsEnv(ScriptedAgentsEnv):
    """Observation space ``Discrete(3, start=1)``: zero is not an observation (refused)."""

    def observation_space(self, agent: str) -> spaces.Discrete:  # type: ignore[override]
        return spaces.Discrete(3, start=1)


class LockInfoEnv(ParallelEnv):  # type: ignore[misc]
    """Agents ``a0``, ``a1`` (indices 0, 1), both for ``length`` steps (default 3; both truncate at the last step).
    Agent ``aj``'s observation at step ``t`` is ``[j, t]`` (float32), its reward ``j + action``, its info
    ``{"t": t, "agent": "aj"}``; at step ``lock_step`` (default ``length``) ``a1``'s info also holds a
    ``threading.Lock`` under ``"lock"``, which can be neither deep-copied nor pickled. Reset infos:
    ``{"reset": n, "agent": "aj"}`` (``n``: the number of resets so far); with ``lock_in_reset``, ``a1``'s reset
    infos after the first reset also hold a lock under ``"lock"``."""

    metadata = {"name": "lock_info_v0", "render_modes": []}

    def __init__(self, length: int = 3, lock_step: int | None = None, lock_in_reset: bool = False) -> None:
        self.possible_agents = ["a0", "a1"]
        self.agents: list[str] = []
        self.length = length
        self.lock_step = length if lock_step is None else lock_step
        self.lock_in_reset = lock_in_reset
        self.t = 0
        self.resets = 0

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(2)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.possible_agents.index(agent), self.t], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.resets += 1
        self.t = 0
        self.agents = list(self.possible_agents)
        infos: dict[str, dict[str, Any]] = {agent: {"reset": self.resets, "agent": agent} for agent in self.agents}
        if self.lock_in_reset and self.resets > 1:
            infos["a1"]["lock"] = threading.Lock()
        return {agent: self._obs(agent) for agent in self.agents}, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        rewards = {agent: self.possible_agents.index(agent) + float(action) for agent, action in actions.items()}
        over = self.t >= self.length
        terminations = {agent: False for agent in actions}
        truncations = {agent: over for agent in actions}
        infos: dict[str, dict[str, Any]] = {agent: {"t": self.t, "agent": agent} for agent in actions}
        if self.t == self.lock_step:
            infos["a1"]["lock"] = threading.Lock()
        observations = {agent: self._obs(agent) for agent in actions}
        if over:
            self.agents = []
        return observations, rewards, terminations, truncations, infos


class IntKeyedLockInfoEnv(gym.Env):  # type: ignore[misc]
    """A single-agent env (not an agent stack) whose info has the shape of an ``AgentStackEnv``'s:
    ``{0: {"t": t}, 1: {"t": t, "lock": threading.Lock()}}`` at every step; observation ``[t]``, reward 1, never
    done."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        info = {0: {"t": self.t}, 1: {"t": self.t, "lock": threading.Lock()}}
        return np.array([self.t], dtype=np.float32), 1.0, False, False, info

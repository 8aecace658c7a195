"""Small deterministic environments for the test suite.

They live in an importable module so worker processes (fork, forkserver and spawn) unpickle them by
reference as ``tests.envs.X``. Every observation, reward and info is an exact function of the env's
constructor arguments, seed, options and actions, so tests can compute the expected values by hand or
by stepping a single env directly.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FRAME_SHAPE = (4, 6, 3)


class EnvFaultError(Exception):
    """The custom exception raised by :class:`FaultEnv` (pickled by reference into the parent)."""


class CounterEnv(gym.Env):
    """Observation ``[offset, episode, t, noise]`` (int64), where ``t`` counts steps in the episode.

    ``noise`` is drawn from ``np_random`` at every reset and step, so the seed passed to ``reset`` is
    visible in the observations. The episode ends when ``t == episode_len + offset`` (``end`` chooses
    terminated, truncated or both). Reward is ``action + 0.5 * t`` (exact in float32).
    ``reset(options={"start_t": k})`` starts the episode at ``t = k``.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 7}

    def __init__(
        self, episode_len: int = 3, end: str = "terminate", offset: int = 0, render_mode: str | None = None
    ) -> None:
        assert end in ("terminate", "truncate", "both")
        self.episode_len = episode_len
        self.end = end
        self.offset = offset
        self.render_mode = render_mode
        self.observation_space = spaces.Box(low=-(2**40), high=2**40, shape=(4,), dtype=np.int64)
        self.action_space = spaces.Discrete(3)
        self.episode = -1
        self.t = 0
        self.noise = 0
        self.last_seed: int | None = None
        self.last_options: dict[str, Any] | None = None
        self.seeds_received: list[int | None] = []
        self.custom_attr = f"custom-{offset}"
        self.render_calls = 0
        self.close_calls = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.offset, self.episode, self.t, self.noise], dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.last_seed = seed
        self.last_options = options
        self.seeds_received.append(seed)
        self.episode += 1
        self.t = int(options.get("start_t", 0)) if options else 0
        self.noise = int(self.np_random.integers(0, 1_000_000))
        return self._obs(), {"episode": self.episode, "seed": seed, "options": options}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.noise = int(self.np_random.integers(0, 1_000_000))
        reward = float(int(action) + 0.5 * self.t)
        over = self.t >= self.episode_len + self.offset
        terminated = over and self.end in ("terminate", "both")
        truncated = over and self.end in ("truncate", "both")
        return self._obs(), reward, terminated, truncated, {"t": self.t, "episode": self.episode}

    def render(self) -> np.ndarray | None:
        self.render_calls += 1
        if self.render_mode == "rgb_array":
            return np.full(FRAME_SHAPE, 10 * (self.offset + 1) + self.t, dtype=np.uint8)
        return None

    def close(self) -> None:
        self.close_calls += 1

    def add(self, a: int, b: int = 0) -> int:
        """Method for ``env_method`` tests: depends on the env's offset and both kinds of arguments."""
        return 100 * self.offset + 10 * a + b


class BufferReuseEnv(gym.Env):
    """Returns the SAME observation array every step, mutated in place; the info holds that array too.

    Observation ``[t, t]`` (float64); episodes last 2 steps (terminated).
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(low=-1e9, high=1e9, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self._buf = np.zeros(2, dtype=np.float64)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        self._buf[:] = self.t
        return self._buf, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self._buf[:] = self.t
        return self._buf, 0.0, self.t >= 2, False, {"buf": self._buf}


class SharedInfoEnv(gym.Env):
    """Returns infos built from objects it keeps and mutates in place: a dict of counters (under two keys, the
    same object), a Fortran-ordered array and a dict holding a list; its reset reuses the same objects.

    At step ``t``: ``info = {"stats": s, "alias": s, "grid": g, "plain": 7}`` with ``s == {"t": t, "half":
    t / 2}`` and ``g`` a ``(2, 3)`` Fortran-ordered array full of ``t``; every second step adds ``"log": {"seen":
    [t]}``. Observation ``[t]``; episodes last 3 steps (truncated).
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(low=-1e9, high=1e9, shape=(1,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self._stats: dict[str, Any] = {}
        self._grid = np.zeros((2, 3), dtype=np.float64, order="F")
        self._log: dict[str, Any] = {"seen": []}
        self.t = 0

    def _info(self) -> dict[str, Any]:
        self._stats["t"], self._stats["half"] = self.t, self.t / 2
        self._grid[...] = self.t
        self._log["seen"][:] = [self.t]
        info = {"stats": self._stats, "alias": self._stats, "grid": self._grid, "plain": 7}
        if self.t % 2:
            info["log"] = self._log
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full(1, float(self.t)), 0.0, False, self.t >= 3, self._info()


class CapturedListEnv(gym.Env):
    """Appends to a list its factory captured at every step; observation: the list's length. Envs built in one
    process from factories that share the list see each other's appends; envs that each got their own copy of
    the list (one process per env, or factories pickled one by one) see only theirs."""

    def __init__(self, captured: list[int]) -> None:
        self.observation_space = spaces.Box(low=0, high=1e9, shape=(1,), dtype=np.int64)
        self.action_space = spaces.Discrete(2)
        self.captured = captured

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.array([len(self.captured)]), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.captured.append(1)
        return np.array([len(self.captured)]), 0.0, False, False, {}


# --- one env per space type -------------------------------------------------------------------------


def _box_space() -> spaces.Box:
    return spaces.Box(low=-1000.0, high=1000.0, shape=(2, 3), dtype=np.float32)


def _image_space() -> spaces.Box:
    return spaces.Box(low=0, high=255, shape=(5, 4, 3), dtype=np.uint8)


OBS_SPACES: dict[str, Any] = {
    "box": _box_space,
    "image": _image_space,
    "discrete": lambda: spaces.Discrete(7),
    "multidiscrete": lambda: spaces.MultiDiscrete([3, 4, 5]),
    "multibinary": lambda: spaces.MultiBinary(4),
    # an OrderedDict keeps this (unsorted) key order; the env returns the keys in another order
    "dict": lambda: spaces.Dict(OrderedDict([("z", _box_space()), ("a", spaces.Discrete(7))])),
    "tuple": lambda: spaces.Tuple((_box_space(), spaces.Discrete(7), spaces.MultiBinary(4))),
    "nested_dict": lambda: spaces.Dict({"outer": spaces.Dict({"inner": spaces.Discrete(2)})}),
    "nested_tuple": lambda: spaces.Tuple((spaces.Discrete(2), spaces.Tuple((spaces.Discrete(2),)))),
    "dict_in_tuple": lambda: spaces.Tuple((spaces.Dict({"a": spaces.Discrete(2)}),)),
}

ACTION_SPACES: dict[str, Any] = {
    "discrete": lambda: spaces.Discrete(3),
    "box": lambda: spaces.Box(low=-10.0, high=10.0, shape=(2,), dtype=np.float32),
    "dict": lambda: spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(-10.0, 10.0, (2,), np.float32)}),
    "tuple": lambda: spaces.Tuple((spaces.Discrete(3), spaces.Box(-10.0, 10.0, (2,), np.float32))),
}


def space_obs(kind: str, v: int) -> Any:
    """The observation :class:`SpaceEnv` of kind ``kind`` emits for value ``v`` (a plain function of ``v``)."""
    if kind == "box":
        return (np.arange(6, dtype=np.float32).reshape(2, 3) + v * 10).astype(np.float32)
    if kind == "image":
        return np.full((5, 4, 3), v % 256, dtype=np.uint8)
    if kind == "discrete":
        return np.int64(v % 7)
    if kind == "multidiscrete":
        return np.array([v % 3, v % 4, v % 5], dtype=np.int64)
    if kind == "multibinary":
        return np.array([(v >> i) & 1 for i in range(4)], dtype=np.int8)
    if kind == "dict":
        # deliberately in the opposite order to the space's keys
        return {"a": np.int64(v % 7), "z": space_obs("box", v)}
    if kind == "tuple":
        return (space_obs("box", v), np.int64(v % 7), space_obs("multibinary", v))
    if kind == "nested_dict":
        return {"outer": {"inner": v % 2}}
    if kind == "nested_tuple":
        return (v % 2, (v % 2,))
    if kind == "dict_in_tuple":
        return ({"a": v % 2},)
    raise ValueError(kind)


def action_value(kind: str, action: Any) -> float:
    """A number that identifies ``action`` (used as :class:`SpaceEnv`'s reward)."""
    if kind == "discrete":
        return float(int(action))
    if kind == "box":
        return float(np.asarray(action)[0] * 10 + np.asarray(action)[1])
    if kind == "dict":
        return float(int(action["a"]) * 100 + np.asarray(action["b"])[0] * 10 + np.asarray(action["b"])[1])
    if kind == "tuple":
        return float(int(action[0]) * 100 + np.asarray(action[1])[0] * 10 + np.asarray(action[1])[1])
    raise ValueError(kind)


class SpaceEnv(gym.Env):
    """Emits ``space_obs(obs_kind, 100 * offset + t)``; reward is ``action_value(action_kind, action)``.

    Episodes last ``episode_len`` steps (terminated). The last action is kept in ``last_action``.
    """

    def __init__(self, obs_kind: str = "box", action_kind: str = "discrete", offset: int = 0, episode_len: int = 3):
        self.obs_kind = obs_kind
        self.action_kind = action_kind
        self.offset = offset
        self.episode_len = episode_len
        self.observation_space = OBS_SPACES[obs_kind]()
        self.action_space = ACTION_SPACES[action_kind]()
        self.t = 0
        self.last_action: Any = None

    def _obs(self) -> Any:
        return space_obs(self.obs_kind, 100 * self.offset + self.t)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.last_action = action
        return self._obs(), action_value(self.action_kind, action), self.t >= self.episode_len, False, {}


class ShapeEnv(gym.Env):
    """A Box(size) observation / Discrete(n_actions) action env: its spaces depend on the constructor args."""

    def __init__(self, size: int = 2, n_actions: int = 2) -> None:
        self.observation_space = spaces.Box(low=0.0, high=1.0, shape=(size,), dtype=np.float32)
        self.action_space = spaces.Discrete(n_actions)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(self.observation_space.shape, dtype=np.float32), 0.0, False, False, {}


class FaultEnv(CounterEnv):
    """A :class:`CounterEnv` that raises at a chosen place.

    :param fail_in: ``"init"``, ``"step"``, ``"reset"``, ``"method"``, ``"attr"``, ``"exit"`` (``os._exit(3)`` in
        step), ``"hang"`` (step blocks for 10 minutes) or None (never fails).
    :param after: for ``"step"`` / ``"exit"`` / ``"hang"``: fail at the step that makes ``t == after``; for
        ``"reset"``: fail at reset number ``after`` (1 = the first reset).
    :param builtin: raise :class:`KeyError` instead of :class:`EnvFaultError`.
    """

    def __init__(self, fail_in: str | None = None, after: int = 1, builtin: bool = False, **kwargs: Any) -> None:
        self.fail_in = fail_in
        self.after = after
        self.builtin = builtin
        self.n_resets = 0
        if fail_in == "init":
            self._raise("init")
        kwargs.setdefault("episode_len", 100)
        super().__init__(**kwargs)

    def _raise(self, where: str) -> None:
        if self.builtin:
            raise KeyError(f"builtin fault in {where}")
        exc = EnvFaultError(f"custom fault in {where}")
        exc.where = where  # type: ignore[attr-defined]
        raise exc

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self.n_resets += 1
        if self.fail_in == "reset" and self.n_resets == self.after:
            self._raise("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.fail_in == "step" and self.t + 1 == self.after:
            self._raise("step")
        if self.fail_in == "exit" and self.t + 1 == self.after:
            os._exit(3)
        if self.fail_in == "hang" and self.t + 1 == self.after:
            time.sleep(600)
        return super().step(action)

    def explode(self, value: int = 0) -> int:
        """Raises if ``fail_in == "method"``, else returns ``value``."""
        if self.fail_in == "method":
            self._raise("method")
        return value

    @property
    def fragile(self) -> str:
        """Raises if ``fail_in == "attr"`` (a property that fails on read)."""
        if self.fail_in == "attr":
            self._raise("attr")
        return "fine"


class MarkerWrapper(gym.Wrapper):
    """A custom gymnasium wrapper with its own attribute ``marker``."""

    def __init__(self, env: gym.Env, marker: str = "marked") -> None:
        super().__init__(env)
        self.marker = marker


class OtherWrapper(gym.Wrapper):
    """A gymnasium wrapper that no env in the tests uses (for ``env_is_wrapped`` False cases)."""


class NotAnEnv:
    """Something an env factory might wrongly return."""


class LooseObsEnv(gym.Env):
    """Float32 ``Box((2,))`` observation space, but the env returns its observations as ``obs_type``.

    ``"exact"``: float32 arrays (what the space declares); ``"float64"``: float64 arrays; ``"list"``:
    Python lists. Observation ``[offset, t]``; the episode ends at ``t == episode_len`` (``end`` chooses
    terminated or truncated). Exercises the terminal-observation path of SubprocVecEnv, which keeps an
    observation that does not match the shared array exactly as the env returned it.
    """

    def __init__(self, obs_type: str = "exact", offset: int = 0, episode_len: int = 2, end: str = "terminate") -> None:
        self.observation_space = spaces.Box(-100.0, 100.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.obs_type, self.offset, self.episode_len, self.end = obs_type, offset, episode_len, end
        self.t = 0

    def _obs(self) -> Any:
        values = [float(self.offset), float(self.t)]
        if self.obs_type == "list":
            return values
        return np.array(values, dtype=np.float64 if self.obs_type == "float64" else np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        over = self.t >= self.episode_len + self.offset
        return self._obs(), 1.0, over and self.end == "terminate", over and self.end == "truncate", {}


class CompositeObsEnv(LooseObsEnv):
    """A Dict (``"pos"`` float32 ``(2,)``, ``"count"`` int64 ``(3,)``) or Tuple observation space, and observations
    returned as ``obs_type``:

    - ``"dict"``: a ``dict`` in the space's key order (gymnasium sorts a Dict's keys: ``count``, ``pos``);
    - ``"dict_own_order"``: a ``dict`` in the env's own order (``pos`` first);
    - ``"ordered_dict"``: an ``OrderedDict`` in the space's order;
    - ``"dict_float64"``: a ``dict`` whose ``pos`` is float64;
    - ``"tuple"``: a Tuple space ``(pos, count)`` and ``tuple`` observations.

    Observation values follow ``offset`` and the step count ``t``; episodes end as :class:`LooseObsEnv`'s
    (terminated). Exercises the terminal observations of composite spaces in SubprocVecEnv.
    """

    def __init__(self, obs_type: str = "dict", offset: int = 0, episode_len: int = 2) -> None:
        super().__init__(obs_type, offset, episode_len)
        pos = spaces.Box(-100.0, 100.0, shape=(2,), dtype=np.float32)
        count = spaces.Box(0, 1000, shape=(3,), dtype=np.int64)
        self.observation_space: spaces.Space = (
            spaces.Tuple((pos, count)) if obs_type == "tuple" else spaces.Dict({"pos": pos, "count": count})
        )

    def _obs(self) -> Any:
        pos_dtype = np.float64 if self.obs_type == "dict_float64" else np.float32
        pos = np.array([self.offset, self.t], dtype=pos_dtype)
        count = np.array([self.t, self.t + 1, self.offset], dtype=np.int64)
        if self.obs_type == "tuple":
            return (pos, count)
        if self.obs_type == "dict_own_order":
            return {"pos": pos, "count": count}
        if self.obs_type == "ordered_dict":
            return OrderedDict([("count", count), ("pos", pos)])
        return {"count": count, "pos": pos}


class OwnTerminalKeyEnv(gym.Env):
    """Episodes of 2 steps; observation ``[t, t]``; every step's info holds a key ``"terminal_observation"`` of its
    own (the string ``"env's own"``), which SB3's rule overwrites with the last observation at an episode end."""

    observation_space = spaces.Box(-10, 10, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full(2, self.t, np.float32), 1.0, self.t == 2, False, {"terminal_observation": "env's own"}


class InPlaceSequenceEnv(gym.Env):
    """A ``Sequence`` observation (batched as an object array) holding one array the env updates in place: the
    observation after ``t`` steps is ``(array([t, t]),)``, the same array object every time."""

    observation_space = spaces.Sequence(spaces.Box(-100.0, 100.0, (2,), np.float32))
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.state = np.zeros(2, dtype=np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.state[:] = 0
        return (self.state,), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.state[:] = self.t
        return (self.state,), 0.0, False, False, {}


class RefusedResetObsEnv(gym.Env):
    """Observation ``[t]`` (float32), reward ``t``; the episode terminates at ``t == 2``. Its reset number
    ``bad_reset`` (1-based) returns an observation of another shape, which a vector env refuses."""

    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, bad_reset: int = 2) -> None:
        self.bad_reset = bad_reset
        self.resets = 0
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.resets += 1
        self.t = 0
        shape = (2,) if self.resets == self.bad_reset else (1,)
        return np.zeros(shape, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], dtype=np.float32), float(self.t), self.t == 2, False, {}

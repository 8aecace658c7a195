"""Deterministic envs for the tests of :mod:`vecenv.gymnasium` (importable, so worker processes unpickle them).

:class:`ParityEnv` covers every observation / action layout the parity tests compare with Gymnasium's own
vector envs: observations depend on the episode, the step, the action received, the env's index, its seed
(through ``np_random``) and the reset options, so a wrong seed, option, action or reset shows up in the values.
Episodes end after a length that changes from episode to episode and env to env, by termination, truncation or
both (cycling), and infos carry keys of several types, some only on some steps (to exercise ``_key`` masks).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

OBS_KINDS = ("box", "discrete", "dict", "tuple", "nested", "text", "sequence")
ACTION_KINDS = ("discrete", "box", "dict", "tuple")


class EnvFaultError(Exception):
    """Raised by :class:`ParityEnv.step` when its ``level`` is negative (pickled by reference into the parent)."""


def observation_space(kind: str) -> spaces.Space:
    big = 1e7
    if kind == "box":
        return spaces.Box(-big, big, (4,), np.float32)
    if kind == "discrete":
        return spaces.Discrete(1000)
    if kind == "dict":
        return spaces.Dict({"pos": spaces.Box(-big, big, (3,), np.float32), "count": spaces.Discrete(1000)})
    if kind == "tuple":
        return spaces.Tuple((spaces.Box(-big, big, (2,), np.float64), spaces.MultiDiscrete([1000, 7])))
    if kind == "nested":
        return spaces.Dict(
            {
                "a": spaces.Tuple((spaces.Discrete(1000), spaces.Box(-big, big, (2,), np.float32))),
                "b": spaces.Dict({"c": spaces.MultiBinary(3), "d": spaces.Box(-big, big, (), np.float64)}),
            }
        )
    if kind == "text":
        return spaces.Text(max_length=24)
    if kind == "sequence":
        return spaces.Sequence(spaces.Discrete(1000))
    raise ValueError(kind)


def action_space(kind: str) -> spaces.Space:
    if kind == "discrete":
        return spaces.Discrete(3)
    if kind == "box":
        return spaces.Box(-1, 1, (2,), np.float32)
    if kind == "dict":
        return spaces.Dict({"jump": spaces.Discrete(2), "move": spaces.Box(-1, 1, (2,), np.float32)})
    if kind == "tuple":
        return spaces.Tuple((spaces.Discrete(3), spaces.MultiBinary(2)))
    raise ValueError(kind)


def action_value(kind: str, action: Any) -> float:
    """A number summarising the action (it enters the observation and the reward)."""
    if kind == "discrete":
        return float(int(action))
    if kind == "box":
        return float(np.round(np.asarray(action, dtype=np.float64).sum(), 3))
    if kind == "dict":
        return float(int(action["jump"])) + float(np.round(np.asarray(action["move"], dtype=np.float64).sum(), 3))
    if kind == "tuple":
        return float(int(action[0])) + float(np.asarray(action[1]).sum()) * 10
    raise ValueError(kind)


class ParityEnv(gym.Env):
    """Deterministic env for parity tests; see the module docstring.

    :param obs_kind: one of :data:`OBS_KINDS`.
    :param action_kind: one of :data:`ACTION_KINDS`.
    :param index: distinguishes envs of one vector env (enters observations and episode lengths).
    :param episode_len: base episode length; episode ``e`` of env ``index`` lasts ``episode_len + (e + index) % 3``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        obs_kind: str = "box",
        action_kind: str = "discrete",
        index: int = 0,
        episode_len: int = 2,
        render_mode: str | None = None,
    ) -> None:
        self.obs_kind = obs_kind
        self.action_kind = action_kind
        self.index = index
        self.episode_len = episode_len
        self.render_mode = render_mode
        self.observation_space = observation_space(obs_kind)
        self.action_space = action_space(action_kind)
        self.episode = -1
        self.t = 0
        self.start = 0
        self.noise = 0
        self.last_action = 0.0
        self.level = index
        self.closed_count = 0

    # --- values ---------------------------------------------------------------------------------

    def _length(self) -> int:
        return self.episode_len + (self.episode + self.index) % 3

    def _obs(self) -> Any:
        e, t, n, a, i = self.episode, self.t + self.start, self.noise, self.last_action, self.index
        kind = self.obs_kind
        if kind == "box":
            return np.array([i, e, t * 10 + a, n], dtype=np.float32)
        if kind == "discrete":
            return int((n + 7 * t + 100 * i + int(a)) % 1000)
        if kind == "dict":
            return {"pos": np.array([e, t + a, n], dtype=np.float32), "count": int((n + t) % 1000)}
        if kind == "tuple":
            return (np.array([t + a / 8, n], dtype=np.float64), np.array([(n + t) % 1000, (e + i) % 7], dtype=np.int64))
        if kind == "nested":
            return {
                "a": ((n + t + i) % 1000, np.array([e, a], dtype=np.float32)),
                "b": {"c": np.array([t % 2, e % 2, i % 2], dtype=np.int8), "d": np.array(n + t / 4, dtype=np.float64)},
            }
        if kind == "text":
            return f"i{i}e{e}t{t}n{n % 97}a{int(abs(a))}"
        if kind == "sequence":
            return tuple(int((n + k + i) % 1000) for k in range(t % 4))
        raise ValueError(kind)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        self.start = int(options.get("start", 0)) if options else 0
        self.noise = int(self.np_random.integers(0, 1000))
        self.last_action = 0.0
        info: dict[str, Any] = {
            "episode": self.episode,
            "seed": -1 if seed is None else int(seed),
            "start": -1 if not options else int(options.get("start", -1)),
        }
        if self.episode % 2:
            info["odd_episode"] = np.array([self.episode, self.index], dtype=np.int64)
        return self._obs(), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self.level < 0:
            raise EnvFaultError(f"env {self.index} cannot step at level {self.level}")
        value = action_value(self.action_kind, action)
        self.t += 1
        self.last_action = value
        self.noise = int(self.np_random.integers(0, 1000))
        over = self.t >= self._length()
        end = (self.episode + self.index) % 3
        terminated = over and end in (0, 2)
        truncated = over and end in (1, 2)
        reward = 0.1 * self.t + value / 3 + self.index
        info: dict[str, Any] = {"t": self.t, "value": float(value), "tag": f"e{self.episode}"}
        if self.t % 2:
            info["odd"] = True
            info["stats"] = {"noise": self.noise, "vec": np.array([self.t, self.noise], dtype=np.float32)}
        return self._obs(), reward, terminated, truncated, info

    # --- calls ----------------------------------------------------------------------------------

    def score(self, factor: int, bonus: int = 0) -> int:
        return self.level * factor + bonus

    def get_level(self) -> int:
        return self.level

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        frame = np.zeros((4, 5, 3), dtype=np.uint8)
        frame[..., 0] = self.index
        frame[..., 1] = max(self.t, 0)
        return frame

    def close(self) -> None:
        self.closed_count += 1


class SlowEnv(gym.Env):
    """Sleeps ``delay`` seconds in ``step`` (and in ``reset`` / ``slow`` when asked), to exercise time-outs."""

    observation_space = spaces.Box(0, 1000, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, delay: float = 0.5, index: int = 0) -> None:
        self.delay = delay
        self.index = index
        self.t = 0
        self.slow_reset = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if self.slow_reset or (options and options.get("slow")):
            time.sleep(self.delay)
        self.t = 0
        return np.array([self.index], dtype=np.float32), {"index": self.index}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if int(action) == 1:
            time.sleep(self.delay)
        self.t += 1
        return np.array([self.index * 100 + self.t], dtype=np.float32), float(self.t), False, False, {}

    def slow(self, value: int) -> int:
        time.sleep(self.delay)
        return value * 2 + self.index


class CustomSpace(spaces.Space):
    """A space Gymnasium's vector utilities do not know (no registered batching functions)."""

    def __init__(self) -> None:
        super().__init__(shape=(2,), dtype=np.float32)

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        return self.np_random.random(2).astype(np.float32)

    def contains(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.shape == (2,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomSpace)

    def __hash__(self) -> int:
        return 1


class CustomSpaceEnv(gym.Env):
    """Observations (and, with ``custom_actions``, actions) of a :class:`CustomSpace`."""

    def __init__(self, index: int = 0, custom_actions: bool = False) -> None:
        self.index = index
        self.observation_space = CustomSpace()
        self.action_space = CustomSpace() if custom_actions else spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.index, 0], dtype=np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.array([self.index, self.t], dtype=np.float32), 1.0, self.t >= 3, False, {}


class BoundsEnv(gym.Env):
    """A Box observation space whose bounds depend on ``index`` (for ``observation_mode="different"``)."""

    action_space = spaces.Discrete(2)

    def __init__(self, index: int = 0, shape: tuple[int, ...] = (2,)) -> None:
        self.index = index
        self.observation_space = spaces.Box(-1 - index, 1 + index, shape, np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.full(self.observation_space.shape, self.index / 10, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        obs = np.full(self.observation_space.shape, self.index + self.t / 10, dtype=np.float32)
        return obs, 0.5, self.t >= 2 + self.index, False, {"t": self.t}


class RaisingEnv(gym.Env):
    """Gymnasium's ``raise_error_reset`` / ``raise_error_step`` test env: ``reset(seed=1)`` raises ``ValueError("Error
    in reset")``, a step with an action ``>= 1`` raises ``ValueError("Error in step with {action}")``."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        if seed == 1:
            raise ValueError("Error in reset")
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if action >= 1:
            raise ValueError(f"Error in step with {action}")
        return self.observation_space.sample(), 0.0, False, False, {}


class OptionsEnv(gym.Env):
    """Its reset info says which ``options`` its ``reset`` received: ``{"options": repr(options)}``."""

    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return 0, {"options": repr(options)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return 0, 0.0, False, False, {}


class AttributeEnv(gym.Env):
    """Attributes for ``get_attr`` / ``call``: ``counted`` (a property counting its reads in ``reads``), ``bad`` (a
    property that counts its reads in ``bad_reads``, then raises ``ValueError``), ``lock`` (cannot be pickled),
    ``broken()`` (reads the misspelt ``self.levle_count``: an ``AttributeError`` with a "Did you mean" hint).

    :param typo_in_init: ``__init__`` itself reads ``self.levle_count``.
    """

    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)

    def __init__(self, typo_in_init: bool = False) -> None:
        self.level_count = 1
        self.reads = self.bad_reads = 0
        self.lock = threading.Lock()
        if typo_in_init:
            self.broken()

    @property
    def counted(self) -> int:
        self.reads += 1
        return self.reads

    @property
    def bad(self) -> int:
        self.bad_reads += 1
        raise ValueError("bad property")

    def broken(self) -> int:
        return self.levle_count  # type: ignore[attr-defined,no-any-return]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return 0, 0.0, False, False, {}


class ReusedObjectsEnv(gym.Env):
    """Returns the same objects at every call, changed in place: a ``Sequence`` observation holding one array
    (full of ``t``), and ``config`` / ``self.config`` as set; observation space ``Sequence(Box((2,)))``."""

    def __init__(self) -> None:
        self.observation_space = spaces.Sequence(spaces.Box(0, 1e6, (2,), np.float32))
        self.action_space = spaces.Discrete(2)
        self.row = np.zeros(2, np.float32)
        self.config: dict[str, Any] = {"level": 0}
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.row[:] = 0
        return (self.row,), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.row[:] = self.t
        return (self.row,), 0.0, False, False, {}


class ReservedKeysResetEnv(gym.Env):
    """Episodes of one step; the reset info uses the names vecenv keeps for itself: ``{"TimeLimit.truncated": 7,
    "terminal_observation": 3, "k": 1}``."""

    observation_space = spaces.Discrete(5)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return 0, {"TimeLimit.truncated": 7, "terminal_observation": 3, "k": 1}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return 1, 1.0, True, False, {}

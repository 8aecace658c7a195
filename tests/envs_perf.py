"""Environments (and comparison helpers) for the tests of shared memory, worker groups, sparse infos,
partial batches and custom spaces.

They live in an importable module so worker processes (fork, forkserver and spawn) unpickle them by
reference as ``tests.envs_perf.X``. Every observation, reward and info is a plain function of the
constructor arguments, the seed and the actions, so a test can step the same env by hand and compare.
"""

from __future__ import annotations

import copy
import os
import time
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tests.envs import CounterEnv

# --- one space per kind (used both as observation and as action space) ---------------------------------


def _box32() -> spaces.Box:
    return spaces.Box(low=-5.0, high=5.0, shape=(2, 3), dtype=np.float32)


def _box64() -> spaces.Box:
    return spaces.Box(low=-np.inf, high=np.inf, shape=(3,), dtype=np.float64)


def _image() -> spaces.Box:
    return spaces.Box(low=0, high=255, shape=(6, 5, 3), dtype=np.uint8)


def _discrete() -> spaces.Discrete:
    return spaces.Discrete(5, start=-2)


def _multidiscrete() -> spaces.MultiDiscrete:
    return spaces.MultiDiscrete([[2, 3], [4, 5]])


def _multibinary() -> spaces.MultiBinary:
    return spaces.MultiBinary([2, 3])


PERF_SPACES: dict[str, Any] = {
    "box32": _box32,
    "box64": _box64,
    "image": _image,
    "discrete": _discrete,
    "multidiscrete": _multidiscrete,
    "multibinary": _multibinary,
    # OrderedDict keeps this unsorted key order (a plain dict would be sorted by gymnasium)
    "dict": lambda: spaces.Dict(
        OrderedDict(
            [
                ("pos", _box32()),
                ("img", _image()),
                ("id", _discrete()),
                ("md", _multidiscrete()),
                ("bits", _multibinary()),
            ]
        )
    ),
    "tuple": lambda: spaces.Tuple((_box64(), _discrete(), _multidiscrete(), _multibinary(), _image())),
}


def leaf_signature(value: Any) -> Any:
    """``(type name, dtype, shape)`` of every leaf of an action / observation, in the same structure."""
    if isinstance(value, dict):
        return {key: leaf_signature(sub) for key, sub in value.items()}
    if isinstance(value, tuple):
        return tuple(leaf_signature(sub) for sub in value)
    return (type(value).__name__, str(np.asarray(value).dtype), tuple(np.shape(value)))


class SampleEnv(gym.Env):
    """Observations drawn from its observation space of kind ``kind`` (seeded from ``np_random`` at every reset).

    The action space is of the same kind. The last action is kept in ``last_action``; with ``echo`` the
    info of every step holds ``{"action": <the action>, "signature": leaf_signature(action)}``, else the
    info is empty. Reward ``offset + t / 4``; episodes last ``episode_len`` steps (terminated).
    """

    def __init__(self, kind: str = "box32", offset: int = 0, episode_len: int = 3, echo: bool = True) -> None:
        self.kind = kind
        self.offset = offset
        self.episode_len = episode_len
        self.echo = echo
        self.observation_space = PERF_SPACES[kind]()
        self.action_space = PERF_SPACES[kind]()
        self.t = 0
        self.last_action: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self.observation_space.sample(), {"offset": self.offset}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.last_action = copy.deepcopy(action)
        info = {"action": copy.deepcopy(action), "signature": leaf_signature(action)} if self.echo else {}
        return self.observation_space.sample(), self.offset + self.t / 4, self.t >= self.episode_len, False, info


# --- infos of every shape: dense, sparse, on episode end, reset infos empty or not -----------------------


class InfoEnv(CounterEnv):
    """A :class:`CounterEnv` (same spaces, obs, rewards and episode ends) with configurable infos.

    :param info_every: the step info has content when ``t % info_every == 0`` (1: every step, 0: never),
        otherwise it is ``{}`` (which vecenv turns into ``{"TimeLimit.truncated": False}``).
    :param info_on_end: add ``{"last_t": t}`` to the info of the last step of an episode.
    :param reset_info: ``"full"`` (always content), ``"empty"`` (always ``{}``) or ``"alternate"`` (content on
        even episodes only) for the info returned by ``reset``.
    :param fake_default: return ``{"TimeLimit.truncated": False}`` (looks like vecenv's default) instead of ``{}``.
    """

    def __init__(
        self,
        info_every: int = 1,
        info_on_end: bool = False,
        reset_info: str = "full",
        fake_default: bool = False,
        **kwargs: Any,
    ) -> None:
        assert reset_info in ("full", "empty", "alternate")
        super().__init__(**kwargs)
        self.info_every = info_every
        self.info_on_end = info_on_end
        self.reset_info = reset_info
        self.fake_default = fake_default

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        obs, _ = super().reset(seed=seed, options=options)
        content = self.reset_info == "full" or (self.reset_info == "alternate" and self.episode % 2 == 0)
        info: dict[str, Any] = {}
        if content:
            info = {"episode": self.episode, "who": f"env{self.offset}", "noise": np.array([self.noise], np.int64)}
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, _ = super().step(action)
        info: dict[str, Any] = {"TimeLimit.truncated": False} if self.fake_default else {}
        if self.info_every and self.t % self.info_every == 0:
            info.update({"t": self.t, "who": f"env{self.offset}", "nested": {"obs": obs.copy(), "none": None}})
        if self.info_on_end and (terminated or truncated):
            info["last_t"] = self.t
        return obs, reward, terminated, truncated, info


# --- worker identity, and envs whose steps take a known (or test-controlled) time ------------------------


class PidEnv(CounterEnv):
    """A :class:`CounterEnv` that reports the process it lives in (``pid`` attribute)."""

    @property
    def pid(self) -> int:
        return os.getpid()


class GatedEnv(InfoEnv):
    """An :class:`InfoEnv` whose n-th ``reset``/``step`` call does not return before the test allows it.

    With ``gate_path`` set, call number ``n`` (steps and explicit resets counted together, from 1; the
    autoreset right after an episode-ending step is not counted) waits until the file holds an integer
    ``>= n``; without it the env never waits. This makes "which envs finish first"
    independent of machine load: a gated env cannot finish before the test opens the gate.
    ``delay`` additionally sleeps that many seconds in every call (never asserted on).
    """

    def __init__(self, gate_path: str | None = None, delay: float = 0.0, timeout: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate_path = gate_path
        self.delay = delay
        self.timeout = timeout
        self.calls = 0
        self._autoreset_next = False

    def _wait(self) -> None:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.gate_path is None:
            return
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with open(self.gate_path) as f:
                    allowed = int(f.read().strip() or 0)
            except (OSError, ValueError):
                allowed = 0
            if allowed >= self.calls:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"gate {self.gate_path} never reached {self.calls}")
            time.sleep(0.002)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        if self._autoreset_next:
            self._autoreset_next = False
        else:
            self._wait()
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._wait()
        result = super().step(action)
        self._autoreset_next = bool(result[2] or result[3])
        return result


# --- custom spaces that cannot live in shared memory (pickled) ---------------------------------------------


class BagSpace(gym.Space):
    """A custom space without shape or dtype: any ``(str, int)`` pair. Equal to every other BagSpace."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def sample(self, mask: Any = None, probability: Any = None) -> tuple[str, int]:
        return ("bag", int(self.np_random.integers(100)))

    def contains(self, x: Any) -> bool:
        return isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], int)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BagSpace)

    def __hash__(self) -> int:
        return hash(BagSpace)


def _custom_space(kind: str) -> gym.Space:
    if kind == "text":
        return spaces.Text(max_length=32)
    if kind == "bag":
        return BagSpace()
    if kind == "discrete":
        return spaces.Discrete(4)
    if kind == "box":
        return spaces.Box(low=-100.0, high=100.0, shape=(2,), dtype=np.float32)
    if kind == "dict_text":  # a (non-nested) Dict with a Text leaf: the whole observation is pickled
        return spaces.Dict(OrderedDict([("name", spaces.Text(max_length=32)), ("x", spaces.Discrete(9))]))
    if kind == "nested_text":
        return spaces.Dict({"outer": spaces.Dict({"name": spaces.Text(max_length=32)})})
    raise ValueError(kind)


def custom_obs(kind: str, offset: int, t: int, action: Any) -> Any:
    """The observation :class:`CustomSpaceEnv` of observation kind ``kind`` emits."""
    if kind == "text":
        return f"e{offset}t{t}a{action}"
    if kind == "bag":
        return (f"e{offset}", 10 * t)
    if kind == "box":
        return np.array([offset, t], dtype=np.float32)
    if kind == "dict_text":
        return {"x": np.int64(t % 9), "name": f"e{offset}t{t}"}
    if kind == "nested_text":
        return {"outer": {"name": f"e{offset}"}}
    raise ValueError(kind)


class CustomSpaceEnv(gym.Env):
    """Observation ``custom_obs(obs_kind, offset, t, last action)``; action space of kind ``action_kind``.

    The info of every step echoes the action: ``{"action": action, "action_type": type name}``.
    Episodes last ``episode_len`` steps (terminated); reward ``t``.
    """

    def __init__(self, obs_kind: str = "text", action_kind: str = "discrete", offset: int = 0, episode_len: int = 2):
        self.obs_kind = obs_kind
        self.offset = offset
        self.episode_len = episode_len
        self.observation_space = _custom_space(obs_kind)
        self.action_space = _custom_space(action_kind)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return custom_obs(self.obs_kind, self.offset, 0, None), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        obs = custom_obs(self.obs_kind, self.offset, self.t, action)
        info = {"action": copy.deepcopy(action), "action_type": type(action).__name__}
        return obs, float(self.t), self.t >= self.episode_len, False, info


# --- comparison helper -------------------------------------------------------------------------------------


def assert_same(actual: Any, expected: Any, path: str = "") -> None:
    """Deep equality with exact types: dicts (same keys), tuples / lists, arrays (dtype, shape, bytes), scalars."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), (path, actual)
        assert set(actual) == set(expected), (path, sorted(map(str, actual)), sorted(map(str, expected)))
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (path, actual, expected)
        for k, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_same(got, want, f"{path}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), (path, type(actual))
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (path, actual, expected)
        if expected.dtype == object:
            for got, want in zip(actual.ravel(), expected.ravel(), strict=True):
                assert_same(got, want, path)
        else:
            assert actual.tobytes() == expected.tobytes(), (path, actual, expected)
    else:
        assert type(actual) is type(expected), (path, type(actual), type(expected))
        assert actual == expected, (path, actual, expected)


class SleepEnv(gym.Env):
    """Sleeps ``step_seconds`` in every step (a known env cost for the step accounts of vecenv.stats); observation
    ``[t]`` (float32); the episode ends (terminated) after ``episode_len`` steps; reward 1."""

    def __init__(self, step_seconds: float = 0.004, episode_len: int = 7) -> None:
        self.step_seconds = step_seconds
        self.episode_len = episode_len
        self.observation_space = spaces.Box(low=0, high=1e6, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(self.step_seconds)
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, self.t >= self.episode_len, False, {}

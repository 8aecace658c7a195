"""A scripted, fully deterministic env over arbitrary spaces, for the property tests (tests/test_properties.py).

It lives in an importable module so worker processes (fork, forkserver and spawn) unpickle it by
reference as ``tests.envs_random.ScriptedEnv``. Everything it returns is a pure function of its
constructor arguments, the seeds and options passed to ``reset`` and the actions it receives, so a test
can step a fresh copy by hand and know exactly what a vector env must return.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: special float values a reward may carry (NaN and -0.0 need a bitwise comparison)
SPECIAL_FLOATS = (np.nan, np.inf, -np.inf, -0.0, 5e-324, -3.0e38)


def special_floats(dtype: np.dtype) -> np.ndarray:
    """Special values of a float dtype: NaN, a negative NaN with a payload, infinities, -0.0, the smallest
    subnormal, the largest finite value."""
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    bits = np.dtype(f"u{dtype.itemsize}")
    # sign bit + all exponent bits + quiet bit + payload 1: survives copies, not arithmetic
    n_bits = 8 * dtype.itemsize
    payload_nan = (
        (1 << (n_bits - 1)) | (((1 << (n_bits - 1 - info.nmant)) - 1) << info.nmant) | (1 << (info.nmant - 1)) | 1
    )
    values = np.array([np.nan, 0, np.inf, -np.inf, -0.0, info.smallest_subnormal, info.max], dtype=dtype)
    values[1:2].view(bits)[0] = payload_nan
    return values


def canonical(space: spaces.Space, value: Any) -> Any:
    """``value`` (an element of ``space``) with every leaf as a fresh ndarray of its own dtype.

    Dicts keep the value's key order, tuples/lists become tuples. Scalars and 0-d arrays both become 0-d
    arrays, so a value and its copy converted to the same dtype compare equal bitwise.
    """
    if isinstance(space, spaces.Dict):
        assert isinstance(value, Mapping), type(value)
        return {key: canonical(space.spaces[key], sub) for key, sub in value.items()}
    if isinstance(space, spaces.Tuple):
        assert isinstance(value, (tuple, list)), type(value)
        return tuple(canonical(sub_space, sub) for sub_space, sub in zip(space.spaces, value, strict=True))
    return np.array(value)


def digest(space: spaces.Space, value: Any) -> int:
    """A CRC32 over the dtype, shape and bytes of every leaf of ``value``, in ``space`` order."""
    crc = 0
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            crc = zlib.crc32(key.encode() + digest(sub, value[key]).to_bytes(4, "little"), crc)
        return crc
    if isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            crc = zlib.crc32(digest(sub, value[i]).to_bytes(4, "little"), crc)
        return crc
    array = np.asarray(value)
    return zlib.crc32(f"{array.dtype.str}{array.shape}".encode() + np.ascontiguousarray(array).tobytes())


def leaf_value(space: spaces.Space, rng: np.random.Generator, special: bool) -> Any:
    """A deterministic (given ``rng``) value for a non-composite space, in the space's dtype.

    Box values range over the whole dtype (out of bounds on purpose: vector envs do not clip); with
    ``special`` float Boxes also get NaN, infinities, -0.0 and subnormals. Discrete values come as Python
    ints or ``np.int64`` (as real envs return both).
    """
    if isinstance(space, spaces.Discrete):
        value = int(space.start) + int(rng.integers(int(space.n)))
        return value if rng.integers(2) else np.int64(value)
    if isinstance(space, spaces.MultiDiscrete):
        return (space.start + rng.integers(space.nvec)).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=space.shape).astype(space.dtype)
    assert isinstance(space, spaces.Box), space
    dtype = np.dtype(space.dtype)
    shape = space.shape
    if dtype.kind == "b":
        array = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        array = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    else:
        array = (rng.standard_normal(size=shape) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
        array = np.array(array, dtype=dtype)  # a 0-d array, not a NumPy scalar, for shape ()
        if special:
            specials = special_floats(dtype)
            mask = rng.integers(0, 2, size=shape).astype(bool)  # about half the values
            array[mask] = specials[rng.integers(len(specials), size=int(mask.sum()))]
    array = np.array(array, dtype=dtype)
    if shape == () and rng.integers(2):
        return array[()]  # a NumPy scalar instead of a 0-d array
    return array


def space_value(space: spaces.Space, rng: np.random.Generator, special: bool) -> Any:
    """A deterministic value for any space; Dict values list their keys in reverse space order."""
    if isinstance(space, spaces.Dict):
        items = [(key, space_value(sub, rng, special)) for key, sub in space.spaces.items()]
        return dict(reversed(items))
    if isinstance(space, spaces.Tuple):
        return tuple(space_value(sub, rng, special) for sub in space.spaces)
    return leaf_value(space, rng, special)


class ScriptedEnv(gym.Env):
    """Observations, rewards and infos derived from (seed, episode, t, action); episodes end where scripted.

    :param observation_space: any Box / Discrete / MultiDiscrete / MultiBinary / Dict / Tuple space.
    :param action_space: likewise; the received action enters the next observation through :func:`digest`.
    :param env_id: distinguishes envs built from the same arguments.
    :param ends: ``{lifetime step number (1-based): "terminated" | "truncated" | "both"}``; the episode
        ends at those steps (counted over the env's whole life, across resets).
    :param special: let float observations and rewards take NaN, infinities, -0.0 and subnormals.

    ``reset`` uses the seed it is given, else (autoreset, or a reset without seed) one derived from
    the previous seed. Reset infos are empty for odd episodes, else ``{"seed", "episode", "options"}``.
    Step infos are empty for one action digest in three, else hold ``t``, ``episode``, ``digest``,
    the received ``action`` (see :func:`canonical`) and an array.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        env_id: int = 0,
        ends: Mapping[int, str] | None = None,
        special: bool = True,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.env_id = env_id
        self.ends = dict(ends or {})
        self.special = special
        self.base_seed = 1000 + env_id
        self.episode = -1
        self.t = 0
        self.lifetime_steps = 0

    def _rng(self, *words: int) -> np.random.Generator:
        entropy = [int(w) % 2**32 for w in (self.base_seed, self.base_seed >> 32, self.env_id, self.episode, *words)]
        return np.random.default_rng(entropy)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.base_seed = seed if seed is not None else self.base_seed * 31 + 7
        self.episode += 1
        self.t = 0
        obs = space_value(self.observation_space, self._rng(0, 0), self.special)
        info = {} if self.episode % 2 else {"seed": seed, "episode": self.episode, "options": copy.deepcopy(options)}
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        self.t += 1
        self.lifetime_steps += 1
        action_digest = digest(self.action_space, action)
        rng = self._rng(self.t, action_digest)
        obs = space_value(self.observation_space, rng, self.special)
        if self.special and rng.integers(4) == 0:
            reward: Any = SPECIAL_FLOATS[int(rng.integers(len(SPECIAL_FLOATS)))]
        else:
            reward = float(rng.standard_normal() * 100.0)
        if rng.integers(3) == 0:
            reward = np.float64(reward)  # envs return NumPy scalars too
        end = self.ends.get(self.lifetime_steps)
        terminated = end in ("terminated", "both")
        truncated = end in ("truncated", "both")
        if action_digest % 3 == 0:
            info: dict[str, Any] = {}
        else:
            info = {
                "t": self.t,
                "episode": self.episode,
                "digest": action_digest,
                "action": canonical(self.action_space, action),
                "array": np.array([self.t, self.env_id], dtype=np.int16),
            }
        return obs, reward, terminated, truncated, info


class EchoActionEnv(gym.Env):
    """Observation always 0 (Discrete(1)); ``info["action"]`` is a deep copy of the action received."""

    observation_space = spaces.Discrete(1)

    def __init__(self, action_space: spaces.Space) -> None:
        self.action_space = action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        return 0, 0.0, False, False, {"action": copy.deepcopy(action)}


class ZeroDimObsEnv(gym.Env):
    """Observations are 0-d int8 arrays (a ``Box`` of shape ``()``): ``t`` after ``t`` steps; every step ends
    the episode (terminated), so every step has a ``terminal_observation``."""

    observation_space = spaces.Box(low=-100, high=100, shape=(), dtype=np.int8)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.array(0, dtype=np.int8), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array(self.t, dtype=np.int8), 0.0, True, False, {}

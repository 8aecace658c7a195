"""A scripted env for the failure-path tests (tests/test_failure_paths.py).

It lives in an importable module so worker processes (fork, forkserver and spawn) unpickle it by reference.
:class:`ScriptEnv` does what its action says, so a test decides per env and per step whether the env steps,
ends its episode (terminated, truncated or both), raises, or sleeps; and its observations say which env,
episode, step and seed produced them, so expectations can be computed by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: actions of :class:`ScriptEnv`
STEP, TERMINATE, RAISE, TRUNCATE, BOTH, INTERRUPT, TERMINATE_BAD_RESET, SLOW, TIMEOUT = range(9)
#: actions of :class:`ScriptEnv` whose step info holds a value vecenv cannot copy (see :data:`BAD_INFOS`)
TERMINATE_LOCK_INFO, GENERATOR_INFO, TERMINATE_UNPICKLABLE_INFO = range(9, 12)


class NoPickle:
    """A value that deep-copies (to itself, as a native handle might) but refuses to be pickled."""

    def __deepcopy__(self, memo: dict[int, Any]) -> NoPickle:
        return self

    def __reduce__(self) -> Any:
        raise TypeError("NoPickle objects cannot be pickled")


def _progress() -> Iterator[int]:
    yield 1


#: action -> (info key, type name vecenv reports, the value): a lock (neither deep-copied nor pickled), a
#: generator (idem), a :class:`NoPickle` (deep-copied, but not pickled: only a worker process refuses it)
BAD_INFOS: dict[int, tuple[str, str, Any]] = {
    TERMINATE_LOCK_INFO: ("handle", "_thread.lock", threading.Lock),
    GENERATOR_INFO: ("progress", "generator", _progress),
    TERMINATE_UNPICKLABLE_INFO: ("native", "tests.envs_failure.NoPickle", NoPickle),
}


class ScriptFault(Exception):
    """What :class:`ScriptEnv` raises for action ``RAISE`` and in a reset after ``TERMINATE_BAD_RESET``."""


class ScriptEnv(gym.Env):
    """Observation ``[offset, episode, t, seed]`` (float32; seed -1 when reset without one), reward ``t``.

    Actions: ``STEP`` (t += 1), ``TERMINATE`` / ``TRUNCATE`` / ``BOTH`` (step and end the episode with these
    flags), ``RAISE`` (raise :class:`ScriptFault`, nothing changes), ``INTERRUPT`` (raise KeyboardInterrupt),
    ``TERMINATE_BAD_RESET`` (terminate; the next reset raises :class:`ScriptFault` once), ``SLOW`` (sleep
    :attr:`slow` seconds, then step), ``TIMEOUT`` (raise a ``TimeoutError`` of its own), ``TERMINATE_LOCK_INFO``
    / ``TERMINATE_UNPICKLABLE_INFO`` (terminate) and ``GENERATOR_INFO`` (step), whose info also holds a value of
    :data:`BAD_INFOS`. An episode also ends (truncated) after ``max_steps`` steps if given.
    Step infos are empty, except ``{"last_t": t}`` when the episode ends. Reset infos are ``{"reset_episode": e}``.

    :param offset: identifies the env (first observation entry).
    :param max_steps: truncate the episode after this many steps (None: never).
    :param slow: seconds action ``SLOW`` sleeps.
    """

    def __init__(self, offset: int = 0, max_steps: int | None = None, slow: float = 0.0) -> None:
        self.offset = offset
        self.max_steps = max_steps
        self.slow = slow
        self.observation_space = spaces.Box(-1e9, 1e9, shape=(4,), dtype=np.float32)
        self.action_space = spaces.Discrete(12)
        self.episode = -1
        self.t = 0
        self.seed_value = -1
        self.bad_reset = False
        self.steps_taken = 0  # every env.step call that returned, over the env's life

    def _obs(self) -> np.ndarray:
        return np.array([self.offset, self.episode, self.t, self.seed_value], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self.bad_reset:
            self.bad_reset = False
            raise ScriptFault(f"reset of env {self.offset} failed")
        self.episode += 1
        self.t = 0
        self.seed_value = -1 if seed is None else seed
        if options and "t" in options:
            self.t = int(options["t"])
        return self._obs(), {"reset_episode": self.episode}

    def fail_with_timeout(self) -> None:
        """Raise a TimeoutError of the env's own (also action ``TIMEOUT``)."""
        raise TimeoutError(f"the env's own timeout (env {self.offset})")

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        action = int(action)
        if action == RAISE:
            raise ScriptFault(f"env {self.offset} raised in step")
        if action == INTERRUPT:
            raise KeyboardInterrupt
        if action == TIMEOUT:
            self.fail_with_timeout()
        if action == SLOW:
            time.sleep(self.slow)
        self.t += 1
        self.steps_taken += 1
        terminated = action in (TERMINATE, BOTH, TERMINATE_BAD_RESET, TERMINATE_LOCK_INFO, TERMINATE_UNPICKLABLE_INFO)
        truncated = action in (TRUNCATE, BOTH) or (self.max_steps is not None and self.t >= self.max_steps)
        if action == TERMINATE_BAD_RESET:
            self.bad_reset = True
        info: dict[str, Any] = {"last_t": self.t} if terminated or truncated else {}
        if action in BAD_INFOS:
            key, _, make_value = BAD_INFOS[action]
            info[key] = make_value()
        return self._obs(), float(self.t), terminated, truncated, info


def make(offset: int = 0, **kwargs: Any) -> ScriptEnv:
    """Factory of :class:`ScriptEnv` (picklable by reference)."""
    return ScriptEnv(offset, **kwargs)


def expected_obs(offset: int, episode: int, t: int, seed: int = -1) -> np.ndarray:
    """The observation :class:`ScriptEnv` returns in that state (what a test computes by hand)."""
    return np.array([offset, episode, t, seed], dtype=np.float32)

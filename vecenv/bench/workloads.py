"""The benchmark's three workloads: a cheap classic-control env, an image env, and a CPU-bound env.

- ``cartpole``: ``gymnasium.make("CartPole-v1")``; a step costs a few microseconds, so the cost of the
  vector env itself dominates.
- ``image``: :class:`ImageEnv` (``vecenv/Image84-v0``), 84x84x4 uint8 observations (an Atari frame stack)
  with a cheap step; measures how a backend moves 28 kB observations.
- ``cpu``: :class:`CpuEnv` (``vecenv/Cpu200us-v0``), a pure-Python busy loop of a fixed number of
  iterations per step (about 200 us, calibrated once by :func:`calibrate_cpu_iterations`); measures
  parallel speed-up, since the loop holds the GIL like real Python envs do.

Every env is created by a :class:`WorkloadFactory`, a module-level (hence picklable) callable, so
worker processes of any start method can build it. Importing this module registers the two env ids.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "CPU_ENV_ID",
    "IMAGE_ENV_ID",
    "WORKLOADS",
    "CpuEnv",
    "ImageEnv",
    "Workload",
    "WorkloadFactory",
    "burn",
    "calibrate_cpu_iterations",
    "register_envs",
]

IMAGE_ENV_ID = "vecenv/Image84-v0"
CPU_ENV_ID = "vecenv/Cpu200us-v0"
#: Default CPU time of one :class:`CpuEnv` step, in microseconds.
DEFAULT_CPU_STEP_US = 200.0

_calibrated: dict[float, int] = {}


def burn(iterations: int) -> int:
    """Spend CPU time in pure Python (holding the GIL): ``iterations`` rounds of integer arithmetic.

    :param iterations: number of loop rounds (about 0.1 us each on a current x86 core).
    :return: a value that depends on every round, so the loop cannot be skipped.
    """
    x = 0
    for i in range(iterations):
        x += i * i
    return x


def calibrate_cpu_iterations(target_us: float = DEFAULT_CPU_STEP_US, trials: int = 15) -> int:
    """The number of :func:`burn` iterations that takes ``target_us`` microseconds on this machine.

    Uses the fastest of ``trials`` timed bursts, the least disturbed by other processes. The result is
    cached per ``target_us`` in this process.

    :param target_us: wanted CPU time per call, in microseconds.
    :param trials: number of timed bursts.
    :return: an iteration count (at least 1).
    """
    if target_us <= 0:
        raise ValueError(f"target_us must be positive, got {target_us}")
    if target_us in _calibrated:
        return _calibrated[target_us]
    probe = 20_000
    burn(probe)  # warm up
    best = float("inf")
    for _ in range(trials):
        start = time.perf_counter()
        burn(probe)
        best = min(best, time.perf_counter() - start)
    iterations = max(1, round(target_us * 1e-6 / (best / probe)))
    _calibrated[target_us] = iterations
    return iterations


class ImageEnv(gym.Env[np.ndarray, np.int64]):
    """An env with 84x84x4 uint8 observations (the shape of a stacked Atari frame) and a cheap step.

    Each step overwrites one 84-byte row of one channel of a preallocated frame and returns a copy of
    the frame (a fresh array per step, as real envs return). An episode lasts ``episode_length`` steps
    and ends with ``truncated=True``; the reward is 1 when the action equals the step count modulo 4.

    :param episode_length: steps per episode.
    :param render_mode: accepted for ``make_vec_env`` compatibility; only None and ``"rgb_array"``.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, episode_length: int = 200, render_mode: str | None = None) -> None:
        if episode_length < 1:
            raise ValueError(f"episode_length must be positive, got {episode_length}")
        self.observation_space = spaces.Box(0, 255, shape=(84, 84, 4), dtype=np.uint8)
        self.action_space = spaces.Discrete(4)
        self.episode_length = episode_length
        self.render_mode = render_mode
        self._frame = np.zeros((84, 84, 4), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode with a random frame."""
        super().reset(seed=seed)
        self._frame[:] = self.np_random.integers(0, 256, size=self._frame.shape, dtype=np.uint8)
        self._t = 0
        return self._frame.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Overwrite one row of the frame, return a copy of it."""
        self._t += 1
        t = self._t
        a = int(action)
        self._frame[t % 84, :, t % 4] = (a * 64 + t) & 0xFF
        reward = 1.0 if a == t % 4 else 0.0
        return self._frame.copy(), reward, False, t >= self.episode_length, {}

    def render(self) -> np.ndarray:
        """The first three channels of the frame, as an RGB image."""
        return np.ascontiguousarray(self._frame[:, :, :3])


class CpuEnv(gym.Env[np.ndarray, np.int64]):
    """An env whose step burns a fixed amount of pure-Python CPU time (a busy loop, not a sleep).

    :param iterations: :func:`burn` iterations per step; None calibrates them in this process for
        :data:`DEFAULT_CPU_STEP_US` (pass an explicit count so that every process does the same work).
    :param episode_length: steps per episode (the episode ends with ``truncated=True``).
    :param render_mode: accepted for ``make_vec_env`` compatibility; ignored.
    """

    metadata: dict[str, Any] = {"render_modes": [], "render_fps": 30}

    def __init__(
        self, iterations: int | None = None, episode_length: int = 200, render_mode: str | None = None
    ) -> None:
        if iterations is None:
            iterations = calibrate_cpu_iterations()
        if iterations < 0:
            raise ValueError(f"iterations must be non-negative, got {iterations}")
        if episode_length < 1:
            raise ValueError(f"episode_length must be positive, got {episode_length}")
        self.iterations = iterations
        self.episode_length = episode_length
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(8,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._state = np.zeros(8, dtype=np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode from a random state."""
        super().reset(seed=seed)
        self._state[:] = self.np_random.uniform(-0.5, 0.5, size=8)
        self._t = 0
        return self._state.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Burn ``iterations`` rounds of CPU, then move the state a little."""
        self._t += 1
        noise = (burn(self.iterations) % 1000) / 1e6
        self._state[self._t % 8] = (0.5 if int(action) else -0.5) + noise
        return self._state.copy(), 1.0, False, self._t >= self.episode_length, {}


def register_envs() -> None:
    """Register ``vecenv/Image84-v0`` and ``vecenv/Cpu200us-v0`` with Gymnasium (idempotent)."""
    if IMAGE_ENV_ID not in gym.registry:
        gym.register(IMAGE_ENV_ID, entry_point="vecenv.bench.workloads:ImageEnv")
    if CPU_ENV_ID not in gym.registry:
        gym.register(CPU_ENV_ID, entry_point="vecenv.bench.workloads:CpuEnv")


register_envs()


@dataclass(frozen=True)
class WorkloadFactory:
    """A picklable env factory: ``gymnasium.make(env_id, **kwargs)``, after importing ``imports``.

    :param env_id: a registered env id.
    :param kwargs: keyword arguments for ``gymnasium.make``.
    :param imports: modules that register the env when imported (e.g. ``("ale_py",)``), imported first in each
        process that builds an env.
    """

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    imports: tuple[str, ...] = ()

    def __call__(self) -> gym.Env:
        """Build one env."""
        register_envs()  # a worker process may not have imported this module through its package yet
        for module in self.imports:
            importlib.import_module(module)
        return gym.make(self.env_id, **self.kwargs)


@dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    :param name: short name used on the command line and in reports.
    :param env_id: the Gymnasium id its envs are made from.
    :param description: one line for reports.
    """

    name: str
    env_id: str
    description: str

    def factory(self, cpu_iterations: int | None = None) -> WorkloadFactory:
        """The env factory; ``cpu_iterations`` fixes the work per step of the ``cpu`` workload."""
        if self.env_id == CPU_ENV_ID:
            iterations = calibrate_cpu_iterations() if cpu_iterations is None else cpu_iterations
            return WorkloadFactory(self.env_id, {"iterations": iterations})
        return WorkloadFactory(self.env_id)


#: The workloads by name, in report order.
WORKLOADS: dict[str, Workload] = {
    "cartpole": Workload("cartpole", "CartPole-v1", "CartPole-v1 (4 float32 obs, a few us per step)"),
    "image": Workload("image", IMAGE_ENV_ID, "84x84x4 uint8 image obs, cheap step"),
    "cpu": Workload("cpu", CPU_ENV_ID, "~200 us of pure-Python CPU per step, 8 float32 obs"),
}

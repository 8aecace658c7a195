"""The :class:`VecFrameStack` wrapper: observations are the last ``n_stack`` frames (SB3's ``vec_frame_stack``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from vecenv.base import VecEnv, VecEnvObs
from vecenv.stacked_observations import StackedObservations
from vecenv.wrappers.base import VecEnvWrapper, autoreset_mode_of, resets_next

__all__ = ["VecFrameStack"]


class VecFrameStack(VecEnvWrapper):
    """Stack the last ``n_stack`` observations of each env along a channel axis (Stable-Baselines3 semantics).

    A thin wrapper over :class:`~vecenv.stacked_observations.StackedObservations`, which holds the stacks and
    documents the rules: images are stacked along their channel axis (first or last, detected or given),
    other Boxes along their last axis, Dict spaces key by key. After :meth:`reset` all but the newest
    frame are zeros; when an env's episode ends its stack restarts from zeros, and its
    ``infos[i]["terminal_observation"]`` becomes the full stack ending with the terminal observation.

    Observations are returned as copies the caller may keep (SB3 returns an internal buffer that a later
    ``reset()`` overwrites).

    Stacks never mix episodes, in every autoreset mode of ``venv.autoreset_mode`` (SB3's ``SAME_STEP`` for
    vector envs that do not say): with ``NEXT_STEP`` the done step's observation (the episode's last) joins the
    stack, and the stack restarts at the next step, which returns the new episode's first observation; with
    ``DISABLED`` the stack restarts at the caller's :meth:`reset`. Neither mode has a ``terminal_observation``.
    A restarted worker's envs (``infos[i]["vecenv.restarted"]``) restart their stacks with their new first
    observation.

    :param venv: the vectorized environment to wrap; its observation space must be a Box or a Dict of Boxes.
    :param n_stack: number of frames per observation.
    :param channels_order: ``"first"``, ``"last"`` or None (detect: SB3's heuristic for images, last for the
        rest); for Dict spaces also a mapping ``{key: "first" | "last" | None}`` covering every key.
    :raises AssertionError: if the observation space is not a Box or a Dict, or ``channels_order`` is another string.
    :raises TypeError: see :class:`~vecenv.stacked_observations.StackedObservations`.
    """

    def __init__(
        self, venv: VecEnv, n_stack: int, channels_order: str | Mapping[str, str | None] | None = None
    ) -> None:
        assert isinstance(venv.observation_space, (spaces.Box, spaces.Dict)), (
            "VecFrameStack only works with gym.spaces.Box and gym.spaces.Dict observation spaces, got "
            f"{venv.observation_space}"
        )
        self.stacked_obs: StackedObservations[Any] = StackedObservations(
            venv.num_envs, n_stack, venv.observation_space, channels_order
        )
        super().__init__(venv, observation_space=self.stacked_obs.stacked_observation_space)
        self._mode = autoreset_mode_of(venv)
        # NEXT_STEP: the envs whose next step resets them (their stacks restart with its observation)
        self._resetting = np.zeros(self.num_envs, dtype=bool)

    def step_wait(self) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step, then stack.

        :return: ``(obs, rewards, dones, infos)`` with obs ``(num_envs, *stacked_shape)`` (a dict of such arrays for
            Dict spaces) and the done envs' ``terminal_observation`` stacked the same way.
        """
        observations, rewards, dones, infos = self.venv.step_wait()
        if self._mode is AutoresetMode.SAME_STEP:
            stacked, infos = self.stacked_obs.update(observations, dones, infos)
            return stacked, rewards, dones, infos
        ordinary_ends = resets_next(dones, infos)
        restarted = np.asarray(dones, dtype=bool) & ~ordinary_ends  # a new first observation at once, in every mode
        stacked = self.stacked_obs.push(observations, self._resetting | restarted)
        if self._mode is AutoresetMode.NEXT_STEP:
            self._resetting = ordinary_ends
        return stacked, rewards, dones, infos

    def reset(self) -> np.ndarray | dict[str, np.ndarray]:
        """Reset all envs and start every stack afresh (zeros, then the first observation as newest frame).

        :return: the stacks, ``(num_envs, *stacked_shape)`` (a dict of such arrays for Dict spaces).
        """
        observation: VecEnvObs = self.venv.reset()
        self._resetting[:] = False
        return self.stacked_obs.reset(observation)

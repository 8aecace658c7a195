"""The :class:`VecTransposeImage` wrapper: channels-last images to channels-first (SB3's ``vec_transpose``)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from gymnasium import spaces

from vecenv.base import VecEnv, VecEnvStepReturn, done_indices
from vecenv.spaces import is_image_space, is_image_space_channels_first
from vecenv.wrappers.base import VecEnvWrapper

__all__ = ["VecTransposeImage"]


class VecTransposeImage(VecEnvWrapper):
    """Reorder image observations from ``(H, W, C)`` to ``(C, H, W)``, as PyTorch convolutions expect (SB3 semantics).

    The observation space is an image Box (see :func:`~vecenv.spaces.is_image_space`: 3-D, uint8, bounds 0..255,
    channels-last), or a Dict whose image keys are transposed and other keys left alone. ``terminal_observation``
    entries are transposed too. Stable-Baselines3 applies this wrapper itself to channels-last image envs; since the
    channel detection is a heuristic, ``skip=True`` turns the wrapper into a pass-through.

    Transposed images are returned as new C-contiguous arrays (SB3 returns transposed views), so the caller may keep
    and modify them.

    :param venv: the vectorized environment to wrap.
    :param skip: do nothing (observations and space are passed through unchanged).
    :raises AssertionError: if the observation space is neither an image Box nor a Dict, or an image is not
        channels-last.
    """

    def __init__(self, venv: VecEnv, skip: bool = False) -> None:
        assert is_image_space(venv.observation_space) or isinstance(venv.observation_space, spaces.Dict), (
            "The observation space must be an image or dictionary observation space, got "
            f"{venv.observation_space} (an image space is a 3-D uint8 Box with bounds 0..255)"
        )
        self.skip = skip
        #: the keys of a Dict space that hold images and are transposed (empty for a Box space or with ``skip``)
        self.image_space_keys: list[str] = []
        if skip:
            super().__init__(venv)
            return
        observation_space: spaces.Space
        if isinstance(venv.observation_space, spaces.Dict):
            dict_space = copy.deepcopy(venv.observation_space)
            for key, space in venv.observation_space.spaces.items():
                if is_image_space(space):
                    assert isinstance(space, spaces.Box)
                    self.image_space_keys.append(key)
                    dict_space.spaces[key] = self.transpose_space(space, key)
            observation_space = dict_space
        else:
            assert isinstance(venv.observation_space, spaces.Box)
            observation_space = self.transpose_space(venv.observation_space)
        super().__init__(venv, observation_space=observation_space)

    @staticmethod
    def transpose_space(observation_space: spaces.Box, key: str = "") -> spaces.Box:
        """The channels-first version of a channels-last image space.

        :param observation_space: an image space of shape ``(H, W, C)``.
        :param key: the Dict key of this space (used in the error message only).
        :return: ``Box(0, 255, (C, H, W), dtype)``.
        :raises AssertionError: if the space is not an image space or is channels-first.

        >>> VecTransposeImage.transpose_space(spaces.Box(0, 255, (84, 84, 3), np.uint8)).shape
        (3, 84, 84)
        """
        assert is_image_space(observation_space), (
            f"The observation space must be an image (3-D uint8 Box with bounds 0..255), got {observation_space}"
        )
        assert not is_image_space_channels_first(observation_space), (
            f"The observation space {key} must follow the channel last convention, got shape "
            f"{observation_space.shape}: "
            "it already looks channels-first (its first dimension is the smallest), so it needs no transposing"
        )
        height, width, channels = observation_space.shape
        return spaces.Box(low=0, high=255, shape=(channels, height, width), dtype=observation_space.dtype)

    @staticmethod
    def transpose_image(image: np.ndarray) -> np.ndarray:
        """Move the channel axis of one image or a batch of images to the front.

        :param image: ``(H, W, C)`` or a batch ``(N, H, W, C)``.
        :return: ``(C, H, W)`` or ``(N, C, H, W)``, a new C-contiguous array (same dtype).

        >>> VecTransposeImage.transpose_image(np.zeros((2, 84, 84, 3))).shape
        (2, 3, 84, 84)
        """
        axes = (2, 0, 1) if image.ndim == 3 else (0, 3, 1, 2)
        return np.ascontiguousarray(np.transpose(image, axes))

    def transpose_observations(self, observations: np.ndarray | dict) -> np.ndarray | dict:
        """Transpose a batch of observations (or one terminal observation); unchanged with ``skip``.

        :param observations: ``(num_envs, H, W, C)`` (or ``(H, W, C)`` for one env), or a dict with such
            arrays at :attr:`image_space_keys`.
        :return: ``(num_envs, C, H, W)`` (or ``(C, H, W)``); for a dict a new dict whose other values are deep
            copies, so the input is never modified.
        """
        if self.skip:
            return observations
        if isinstance(observations, dict):
            transposed = copy.copy(observations)  # same mapping type and key order
            for key, value in observations.items():
                transposed[key] = self.transpose_image(value) if key in self.image_space_keys else copy.deepcopy(value)
            return transposed
        return self.transpose_image(observations)

    def step_wait(self) -> VecEnvStepReturn:
        """Step, then transpose the observations and the done envs' ``terminal_observation``.

        :return: ``(obs, rewards, dones, infos)`` with images ``(num_envs, C, H, W)``.
        """
        observations, rewards, dones, infos = self.venv.step_wait()
        for env_idx in done_indices(dones):
            if "terminal_observation" in infos[env_idx]:
                infos[env_idx]["terminal_observation"] = self.transpose_observations(
                    infos[env_idx]["terminal_observation"]
                )
        assert isinstance(observations, (np.ndarray, dict))
        return self.transpose_observations(observations), rewards, dones, infos

    def reset(self) -> np.ndarray | dict[str, Any]:
        """Reset all envs.

        :return: the first observations, images ``(num_envs, C, H, W)``.
        """
        observations = self.venv.reset()
        assert isinstance(observations, (np.ndarray, dict))
        return self.transpose_observations(observations)

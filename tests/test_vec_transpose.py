"""VecTransposeImage: observations, terminal observations and spaces move channels first; Dict image keys only; skip."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from tests.envs import SpaceEnv
from vecenv.wrappers.vec_frame_stack import VecFrameStack
from vecenv.wrappers.vec_transpose import VecTransposeImage

HWC = (5, 4, 3)
SMALL_C = (6, 5, 2)


def frame(shape: tuple[int, ...], offset: int, t: int) -> np.ndarray:
    """A uint8 frame in which every pixel differs, changing with the env offset and the step."""
    return ((np.arange(int(np.prod(shape))).reshape(shape) + 7 * t + 50 * offset) % 256).astype(np.uint8)


class FrameEnv(gym.Env):
    """Observations ``frame(shape, offset, t)``, or with ``as_dict`` a dict of an image, a vector and a float volume.

    Episodes last ``2 + offset`` steps.
    """

    def __init__(self, shape: tuple[int, ...] = HWC, offset: int = 0, as_dict: bool = False) -> None:
        self.shape = shape
        self.offset = offset
        self.as_dict = as_dict
        image = spaces.Box(0, 255, shape, np.uint8)
        if as_dict:
            self.observation_space: spaces.Space = spaces.Dict(
                {
                    "vec": spaces.Box(-10.0, 10.0, (3,), np.float32),
                    "img": image,
                    # 3-D but float: not an image, left as it is
                    "volume": spaces.Box(0.0, 1.0, (5, 4, 3), np.float32),
                }
            )
        else:
            self.observation_space = image
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> Any:
        img = frame(self.shape, self.offset, self.t)
        if not self.as_dict:
            return img
        vec = np.array([self.offset, self.t, -1.0], dtype=np.float32)
        return {"vec": vec, "img": img, "volume": (img / 255.0).astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 0.0, self.t >= 2 + self.offset, False, {}


def frame_fns(n: int = 2, **kwargs: Any) -> list[Callable]:
    return [functools.partial(FrameEnv, offset=i, **kwargs) for i in range(n)]


def chw(image: np.ndarray) -> np.ndarray:
    """Channels-first copy of ``(..., H, W, C)`` built element by element (independent of np.transpose)."""
    *lead, height, width, channels = image.shape
    out = np.empty((*lead, channels, height, width), dtype=image.dtype)
    for h, w, c in itertools.product(range(height), range(width), range(channels)):
        out[..., c, h, w] = image[..., h, w, c]
    return out


def test_box_observations_terminal_observations_and_space(make_venv, backend):
    raw = make_venv("dummy", frame_fns())
    venv = VecTransposeImage(make_venv(backend, frame_fns()))
    assert venv.observation_space == spaces.Box(0, 255, (3, 5, 4), np.uint8)
    obs = venv.reset()
    np.testing.assert_array_equal(obs, chw(raw.reset()))
    assert obs.dtype == np.uint8 and obs.flags.c_contiguous
    n_terminals = 0
    for _ in range(3):
        raw_obs, _, raw_dones, raw_infos = raw.step(np.zeros(2, dtype=int))
        obs, _, dones, infos = venv.step(np.zeros(2, dtype=int))
        np.testing.assert_array_equal(dones, raw_dones)
        np.testing.assert_array_equal(obs, chw(raw_obs))
        for info, raw_info in zip(infos, raw_infos, strict=True):
            assert ("terminal_observation" in info) == ("terminal_observation" in raw_info)
            if "terminal_observation" in info:
                n_terminals += 1
                terminal = info["terminal_observation"]
                assert terminal.shape == (3, 5, 4)
                np.testing.assert_array_equal(terminal, chw(raw_info["terminal_observation"]))
    assert n_terminals == 2


def test_returned_observations_are_copies_the_caller_can_keep(make_venv, backend):
    venv = VecTransposeImage(make_venv(backend, frame_fns()))
    first = venv.reset()
    snapshot = first.copy()
    second, *_ = venv.step(np.zeros(2, dtype=int))
    assert not np.shares_memory(first, second)
    first[...] = 0  # modifying a kept observation changes nothing else
    third, *_ = venv.step(np.zeros(2, dtype=int))
    np.testing.assert_array_equal(third[1], chw(frame(HWC, 1, 2)))
    first[...] = snapshot
    np.testing.assert_array_equal(first, chw(np.stack([frame(HWC, 0, 0), frame(HWC, 1, 0)])))


def test_dict_only_image_keys_are_transposed(make_venv, backend):
    inner = make_venv(backend, frame_fns(as_dict=True))
    original_space = inner.observation_space
    venv = VecTransposeImage(inner)
    assert venv.image_space_keys == ["img"]
    assert venv.observation_space == spaces.Dict(
        {
            "vec": spaces.Box(-10.0, 10.0, (3,), np.float32),
            "img": spaces.Box(0, 255, (3, 5, 4), np.uint8),
            "volume": spaces.Box(0.0, 1.0, (5, 4, 3), np.float32),
        }
    )
    assert inner.observation_space is original_space and original_space["img"].shape == HWC  # space deep-copied
    raw = make_venv("dummy", frame_fns(as_dict=True))
    obs = venv.reset()
    raw_obs = raw.reset()
    np.testing.assert_array_equal(obs["img"], chw(raw_obs["img"]))
    np.testing.assert_array_equal(obs["vec"], raw_obs["vec"])
    np.testing.assert_array_equal(obs["volume"], raw_obs["volume"])
    for _ in range(2):
        raw_obs, _, raw_dones, raw_infos = raw.step(np.zeros(2, dtype=int))
        obs, _, dones, infos = venv.step(np.zeros(2, dtype=int))
    assert dones.tolist() == raw_dones.tolist() == [True, False]
    terminal, raw_terminal = infos[0]["terminal_observation"], raw_infos[0]["terminal_observation"]
    np.testing.assert_array_equal(terminal["img"], chw(raw_terminal["img"]))
    np.testing.assert_array_equal(terminal["vec"], raw_terminal["vec"])
    np.testing.assert_array_equal(terminal["volume"], raw_terminal["volume"])
    np.testing.assert_array_equal(obs["img"], chw(raw_obs["img"]))


def test_transpose_observations_never_modifies_its_input(make_venv):
    wrapper = VecTransposeImage(make_venv("dummy", frame_fns(n=1, as_dict=True)))
    observations = {"img": frame((1, *HWC), 0, 0), "vec": np.zeros((1, 3), dtype=np.float32)}
    transposed = wrapper.transpose_observations(observations)
    assert transposed is not observations and observations["img"].shape == (1, *HWC)
    assert transposed["vec"] is not observations["vec"]
    transposed["vec"][...] = 1
    assert not observations["vec"].any()


def test_skip_is_a_pass_through(make_venv, backend):
    inner = make_venv(backend, frame_fns())
    venv = VecTransposeImage(inner, skip=True)
    assert venv.observation_space is inner.observation_space
    raw = make_venv("dummy", frame_fns())
    np.testing.assert_array_equal(venv.reset(), raw.reset())
    for _ in range(2):
        obs, _, _, infos = venv.step(np.zeros(2, dtype=int))
        raw_obs, _, _, raw_infos = raw.step(np.zeros(2, dtype=int))
        np.testing.assert_array_equal(obs, raw_obs)
    np.testing.assert_array_equal(infos[0]["terminal_observation"], raw_infos[0]["terminal_observation"])
    dict_venv = VecTransposeImage(make_venv("dummy", frame_fns(as_dict=True)), skip=True)
    assert dict_venv.observation_space["img"].shape == HWC
    assert dict_venv.reset()["img"].shape == (2, *HWC)


def test_transpose_image_3d_and_4d():
    image = frame((2, 3, 4), 0, 0)
    assert VecTransposeImage.transpose_image(image).shape == (4, 2, 3)
    np.testing.assert_array_equal(VecTransposeImage.transpose_image(image), chw(image))
    batch = np.stack([frame((2, 3, 4), i, 0) for i in range(3)])
    out = VecTransposeImage.transpose_image(batch)
    assert out.shape == (3, 4, 2, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, chw(batch))
    assert out[1, 3, 0, 2] == batch[1, 0, 2, 3]


def test_transpose_space():
    space = spaces.Box(0, 255, (84, 80, 3), np.uint8)
    assert VecTransposeImage.transpose_space(space) == spaces.Box(0, 255, (3, 84, 80), np.uint8)
    with pytest.raises(AssertionError, match="must be an image"):
        VecTransposeImage.transpose_space(spaces.Box(0.0, 1.0, (84, 80, 3), np.float32))
    with pytest.raises(AssertionError, match="pixels must follow the channel last convention"):
        VecTransposeImage.transpose_space(spaces.Box(0, 255, (3, 84, 80), np.uint8), "pixels")


@pytest.mark.parametrize(
    ("env_fn", "match"),
    [
        (functools.partial(SpaceEnv, obs_kind="box"), "must be an image or dictionary"),
        (functools.partial(SpaceEnv, obs_kind="discrete"), "must be an image or dictionary"),
        (functools.partial(FrameEnv, shape=(3, 5, 4)), "channel last convention"),
        (functools.partial(FrameEnv, shape=(3, 5, 4), as_dict=True), "channel last convention"),
    ],
)
def test_errors(make_venv, env_fn, match):
    with pytest.raises(AssertionError, match=match):
        VecTransposeImage(make_venv("dummy", [env_fn]))


def test_after_frame_stacking(make_venv, backend):
    """The usual Atari pipeline: stack channels-last frames, then transpose (terminal observations included)."""
    # (channels stay the smallest dimension after stacking: no "second dimension was smallest" warning)
    venv = VecTransposeImage(VecFrameStack(make_venv(backend, frame_fns(shape=SMALL_C)), 2))
    assert venv.observation_space.shape == (4, 6, 5)
    obs = venv.reset()
    zeros = np.zeros(SMALL_C, dtype=np.uint8)
    np.testing.assert_array_equal(obs[1], chw(np.concatenate([zeros, frame(SMALL_C, 1, 0)], axis=-1)))
    venv.step(np.zeros(2, dtype=int))
    obs, _, dones, infos = venv.step(np.zeros(2, dtype=int))
    assert dones.tolist() == [True, False]
    expected_terminal = np.concatenate([frame(SMALL_C, 0, 1), frame(SMALL_C, 0, 2)], axis=-1)
    np.testing.assert_array_equal(infos[0]["terminal_observation"], chw(expected_terminal))
    np.testing.assert_array_equal(obs[0], chw(np.concatenate([zeros, frame(SMALL_C, 0, 0)], axis=-1)))
    np.testing.assert_array_equal(obs[1], chw(np.concatenate([frame(SMALL_C, 1, 1), frame(SMALL_C, 1, 2)], axis=-1)))

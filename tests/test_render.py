"""render() / get_images() / tile_images on both backends, with SB3's render-mode rules."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv

FRAME_HW = (6, 8)


def pattern_frame(offset: int, t: int) -> np.ndarray:
    """The frame PatternEnv ``offset`` renders at step ``t``: every pixel and channel distinct."""
    base = np.arange(FRAME_HW[0] * FRAME_HW[1] * 3).reshape(*FRAME_HW, 3)
    return ((base + 17 * offset + 5 * t) % 256).astype(np.uint8)


class PatternEnv(gym.Env):
    """Renders ``pattern_frame(offset, t)`` in ``rgb_array`` mode; counts ``render()`` calls in every mode."""

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 4}

    def __init__(self, offset: int = 0, render_mode: str | None = "rgb_array") -> None:
        self.offset = offset
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(1000)
        self.action_space = spaces.Discrete(2)
        self.t = 0
        self.render_calls = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return self.t, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return self.t, 0.0, False, False, {}

    def render(self) -> np.ndarray | None:
        self.render_calls += 1
        return pattern_frame(self.offset, self.t) if self.render_mode == "rgb_array" else None


def pattern_fns(n: int, render_mode: str | None = "rgb_array") -> list:
    return [functools.partial(PatternEnv, offset=i, render_mode=render_mode) for i in range(n)]


def frames_by_hand(fns: list, steps: int) -> list[np.ndarray]:
    """Build the envs directly, step each ``steps`` times and render them."""
    frames = []
    for fn in fns:
        env = fn()
        env.reset()
        for _ in range(steps):
            env.step(0)
        frames.append(env.render())
    return frames


@pytest.mark.parametrize("n_envs", [1, 2, 3])
def test_rgb_array_render_tiles_the_env_frames(backend, make_venv, n_envs):
    """get_images() gives each env's frame; render() / render("rgb_array") tile them (both backends)."""
    venv = make_venv(backend, pattern_fns(n_envs))
    venv.reset()
    for _ in range(2):
        venv.step(np.zeros(n_envs, dtype=np.int64))
    expected_frames = frames_by_hand(pattern_fns(n_envs), steps=2)
    images = venv.get_images()
    assert len(images) == n_envs
    for image, expected in zip(images, expected_frames, strict=True):
        np.testing.assert_array_equal(image, expected)
    expected_tile = vecenv.tile_images(expected_frames)
    for mode in (None, "rgb_array"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tile = venv.render(mode)
        assert tile.dtype == np.uint8
        np.testing.assert_array_equal(tile, expected_tile)


def test_tile_layout_with_padding(make_venv):
    """3 envs: a 2x2 grid filled row by row, the last cell black."""
    venv = make_venv("dummy", pattern_fns(3))
    venv.reset()
    tile = venv.render()
    h, w = FRAME_HW
    assert tile.shape == (2 * h, 2 * w, 3)
    np.testing.assert_array_equal(tile[:h, :w], pattern_frame(0, 0))
    np.testing.assert_array_equal(tile[:h, w:], pattern_frame(1, 0))
    np.testing.assert_array_equal(tile[h:, :w], pattern_frame(2, 0))
    np.testing.assert_array_equal(tile[h:, w:], 0)


def test_human_mode_on_rgb_array_env_shows_the_bgr_tile(backend, make_venv, monkeypatch):
    """render("human") on an rgb_array env shows the tiled frame with OpenCV, in BGR order, and returns None."""
    shown: list[tuple[str, np.ndarray]] = []
    waits: list[int] = []
    monkeypatch.setattr(cv2, "imshow", lambda name, image: shown.append((name, np.array(image))))
    monkeypatch.setattr(cv2, "waitKey", lambda delay=0: waits.append(delay) or -1)
    venv = make_venv(backend, pattern_fns(2))
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert venv.render("human") is None
    assert len(shown) == 1
    name, image = shown[0]
    assert name == "vecenv"
    rgb_tile = vecenv.tile_images(frames_by_hand(pattern_fns(2), steps=1))
    np.testing.assert_array_equal(image, rgb_tile[:, :, ::-1])
    np.testing.assert_array_equal(image, cv2.cvtColor(rgb_tile, cv2.COLOR_RGB2BGR))
    assert waits == [1]


def test_no_render_mode_warns(backend, make_venv, monkeypatch):
    """Envs built without render_mode: every render() call warns and returns None; get_images() gives None."""
    monkeypatch.setattr(cv2, "imshow", lambda *args: pytest.fail("nothing may be shown"))
    venv = make_venv(backend, pattern_fns(2, render_mode=None))
    venv.reset()
    assert venv.render_mode is None
    with pytest.warns(UserWarning, match="no `render_mode` was passed"):
        assert venv.render() is None
    with pytest.warns(UserWarning, match=r"the mode \(rgb_array\) has to be the same as the environment render mode"):
        assert venv.render("rgb_array") is None
    with pytest.warns(UserWarning, match="must be 'human' or 'rgb_array', not 'None'"):
        assert venv.render("human") is None
    with pytest.warns(UserWarning, match="assumes it is `rgb_array`"):
        assert venv.get_images() == [None, None]
    assert venv.get_attr("render_calls") == [0, 0]


def test_human_render_mode_calls_env_render(backend, make_venv):
    """render_mode="human": render() / render("human") call every env's render(); rgb_array is refused."""
    venv = make_venv(backend, pattern_fns(2, render_mode="human"))
    venv.reset()
    assert venv.render() is None
    assert venv.get_attr("render_calls") == [1, 1]
    assert venv.render("human") is None
    assert venv.get_attr("render_calls") == [2, 2]
    with pytest.warns(UserWarning, match=r"the mode \(rgb_array\) has to be the same"):
        assert venv.render("rgb_array") is None
    assert venv.get_attr("render_calls") == [2, 2]


def test_other_mode_on_rgb_array_env_warns(make_venv):
    venv = make_venv("dummy", pattern_fns(1))
    venv.reset()
    with pytest.warns(UserWarning, match=r"the mode \(ansi\) has to be the same as the environment render mode"):
        assert venv.render("ansi") is None
    assert venv.get_attr("render_calls") == [0]


@pytest.mark.parametrize(
    ("render_mode", "modes"), [("rgb_array", ["human", "rgb_array"]), ("human", ["human"]), (None, [])]
)
def test_metadata_render_modes(make_venv, render_mode, modes):
    """VecEnv's metadata lists the modes render() accepts (SB3); DummyVecEnv takes its env's metadata (SB3)."""
    subproc = make_venv("subproc", pattern_fns(1, render_mode=render_mode))
    assert subproc.render_mode == render_mode
    assert subproc.metadata == {"render_modes": modes}
    dummy = make_venv("dummy", pattern_fns(1, render_mode=render_mode))
    assert dummy.metadata == PatternEnv.metadata


def test_cartpole_frames_match_single_envs(backend, make_venv):
    """A real env: CartPole's frames through the venv equal those of single envs reset with the same seeds."""
    venv = vecenv.make_vec_env(
        "CartPole-v1", n_envs=2, seed=3, vec_env_cls=vecenv.SubprocVecEnv if backend == "subproc" else None
    )
    try:
        venv.reset()
        expected = []
        for i in range(2):
            env = gym.make("CartPole-v1", render_mode="rgb_array")
            env.reset(seed=3 + i)
            expected.append(env.render())
            env.close()
        tile = venv.render()
        assert tile.shape == (800, 600, 3)  # two 400x600 frames in a 2x1 grid
        np.testing.assert_array_equal(tile, vecenv.tile_images(expected))
    finally:
        venv.close()


class TestTileImages:
    """tile_images on its own: ceil(sqrt(N)) rows, ceil(N / rows) columns, row by row, black padding."""

    @staticmethod
    def images(n: int, hw: tuple[int, int] = (2, 3), channels: int = 3) -> np.ndarray:
        return np.stack([np.full((*hw, channels), i + 1, dtype=np.uint8) for i in range(n)])

    @pytest.mark.parametrize(
        ("n", "grid"), [(1, (1, 1)), (2, (2, 1)), (3, (2, 2)), (4, (2, 2)), (5, (3, 2)), (7, (3, 3)), (10, (4, 3))]
    )
    def test_grid(self, n, grid):
        rows, cols = grid
        tile = vecenv.tile_images(self.images(n))
        assert tile.shape == (rows * 2, cols * 3, 3)
        for k in range(rows * cols):
            r, c = divmod(k, cols)
            cell = tile[r * 2 : (r + 1) * 2, c * 3 : (c + 1) * 3]
            np.testing.assert_array_equal(cell, k + 1 if k < n else 0)

    def test_list_input_and_dtype(self):
        images = [np.full((2, 2, 1), 0.5, dtype=np.float32) for _ in range(2)]
        tile = vecenv.tile_images(images)
        assert tile.dtype == np.float32
        assert tile.shape == (4, 2, 1)

    def test_single_image_is_unchanged(self):
        image = pattern_frame(3, 4)
        np.testing.assert_array_equal(vecenv.tile_images([image]), image)

    def test_bad_shapes(self):
        with pytest.raises(ValueError, match="ndim 4"):
            vecenv.tile_images(np.zeros((2, 3, 3), np.uint8))
        with pytest.raises(ValueError):
            vecenv.tile_images([np.zeros((2, 2, 3)), np.zeros((3, 2, 3))])

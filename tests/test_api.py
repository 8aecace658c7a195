"""The public names, ``tile_images`` and ``CloudpickleWrapper``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import vecenv

SB3_NAMES = [
    "VecEnv",
    "VecEnvWrapper",
    "CloudpickleWrapper",
    "DummyVecEnv",
    "SubprocVecEnv",
    "make_vec_env",
    "tile_images",
    "obs_space_info",
    "dict_to_obs",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
]


def test_top_level_imports():
    """Every SB3 name used with vec envs is importable from the top-level package and listed in __all__."""
    from vecenv import (  # noqa: F401
        CloudpickleWrapper,
        DummyVecEnv,
        SubprocVecEnv,
        VecEnv,
        VecEnvIndices,
        VecEnvObs,
        VecEnvStepReturn,
        VecEnvWrapper,
        dict_to_obs,
        make_vec_env,
        obs_space_info,
        tile_images,
    )

    for name in SB3_NAMES:
        assert name in vecenv.__all__, name


def test_error_types_exported():
    """The vecenv error types are importable from the top level; WorkerDiedError is also a RuntimeError."""
    for name in ["AlreadyPendingCallError", "ClosedVecEnvError", "NoAsyncCallError", "WorkerDiedError"]:
        assert issubclass(getattr(vecenv, name), vecenv.VecEnvError)
    assert issubclass(vecenv.WorkerDiedError, RuntimeError)


def test_class_hierarchy():
    """DummyVecEnv / SubprocVecEnv / VecEnvWrapper are VecEnvs; VecEnv and VecEnvWrapper are abstract."""
    assert issubclass(vecenv.DummyVecEnv, vecenv.VecEnv)
    assert issubclass(vecenv.SubprocVecEnv, vecenv.VecEnv)
    assert issubclass(vecenv.VecEnvWrapper, vecenv.VecEnv)
    with pytest.raises(TypeError):
        vecenv.VecEnv(1, None, None)  # type: ignore[abstract]


def images(n: int, shape: tuple[int, int, int] = (2, 3, 3)) -> list[np.ndarray]:
    """``n`` images, image ``k`` filled with ``k + 1`` (uint8)."""
    return [np.full(shape, k + 1, dtype=np.uint8) for k in range(n)]


def test_tile_images_one():
    """One image tiles to itself."""
    (img,) = images(1)
    out = vecenv.tile_images([img])
    assert out.shape == img.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out, img)


def test_tile_images_three_pads_with_zeros():
    """3 images -> a 2x2 grid filled row by row, the last cell black."""
    imgs = images(3)
    expected = np.zeros((4, 6, 3), dtype=np.uint8)
    expected[0:2, 0:3] = imgs[0]
    expected[0:2, 3:6] = imgs[1]
    expected[2:4, 0:3] = imgs[2]
    np.testing.assert_array_equal(vecenv.tile_images(imgs), expected)
    np.testing.assert_array_equal(vecenv.tile_images(np.stack(imgs)), expected)


def test_tile_images_four():
    """4 images -> a full 2x2 grid."""
    imgs = images(4)
    top = np.concatenate([imgs[0], imgs[1]], axis=1)
    bottom = np.concatenate([imgs[2], imgs[3]], axis=1)
    expected = np.concatenate([top, bottom], axis=0)
    np.testing.assert_array_equal(vecenv.tile_images(imgs), expected)


@pytest.mark.parametrize(("n", "rows", "cols"), [(2, 2, 1), (5, 3, 2), (9, 3, 3), (10, 4, 3)])
def test_tile_images_grid_size(n, rows, cols):
    """N images -> ceil(sqrt(N)) rows by ceil(N / rows) columns; every image in its cell, the rest black."""
    height, width, channels = 2, 3, 1
    imgs = images(n, (height, width, channels))
    out = vecenv.tile_images(imgs)
    assert out.shape == (rows * height, cols * width, channels)
    for cell in range(rows * cols):
        r, c = divmod(cell, cols)
        block = out[r * height : (r + 1) * height, c * width : (c + 1) * width]
        np.testing.assert_array_equal(block, imgs[cell] if cell < n else 0)


def test_tile_images_keeps_dtype():
    """The tiled image has the input dtype."""
    imgs = [np.full((2, 2, 3), 0.5, dtype=np.float32)] * 2
    assert vecenv.tile_images(imgs).dtype == np.float32


def test_cloudpickle_wrapper_roundtrip():
    """CloudpickleWrapper makes lambdas and closures picklable with plain pickle."""
    offset = 5
    wrapper = vecenv.CloudpickleWrapper(lambda x: x + offset)
    restored = pickle.loads(pickle.dumps(wrapper))
    assert isinstance(restored, vecenv.CloudpickleWrapper)
    assert restored.var(1) == 6

"""VecNormalize: normalization checked against numpy by hand, validation, the pickle-free file format, SB3 import.

Expected values are computed here from the raw observations and rewards (``get_original_obs`` /
``get_original_reward``) with plain numpy, never with the wrapper's own statistics code.
The SB3 pickles in ``tests/data`` were written by real stable-baselines3 (``tests/data/make_sb3_fixtures.py``),
together with the numbers SB3 held when saving them (``tests/data/sb3_fixtures.json``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import pickle
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from tests.envs import CounterEnv, ShapeEnv, SpaceEnv, space_obs
from vecenv import DummyVecEnv, VecEnv, VecEnvWrapper, atomic
from vecenv.running_mean_std import RunningMeanStd
from vecenv.version import __version__
from vecenv.wrappers import normalize_io
from vecenv.wrappers.normalize_io import NormalizationFileError
from vecenv.wrappers.vec_normalize import VecNormalize, sync_envs_normalization, unwrap_vec_normalize

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).parent.parent
SB3_EXPECTED = json.loads((DATA / "sb3_fixtures.json").read_text())["fixtures"]
HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None
EPS_RMS = 1e-4  # RunningMeanStd's prior weight
EPS = 1e-8  # VecNormalize's epsilon


# --- envs and helpers -----------------------------------------------------------------------------------


class TwoPartEnv(gym.Env):
    """The spaces of ``TwoPartEnv`` in make_sb3_fixtures.py: Dict(mode: Discrete(4), position: (3,), velocity: (2,))."""

    def __init__(self, position_size: int = 3) -> None:
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-100.0, 100.0, (position_size,), np.float32),
                "velocity": spaces.Box(-100.0, 100.0, (2,), np.float32),
                "mode": spaces.Discrete(4),
            }
        )
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        size = self.observation_space["position"].shape[0]
        return {
            "position": np.arange(size, dtype=np.float32) * (self.t + 1),
            "velocity": np.array([1.0, -0.5 * self.t], dtype=np.float32),
            "mode": self.t % 4,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), float(action), self.t >= 4, False, {}


class ImageDictEnv(gym.Env):
    """Dict(img: uint8 image (4, 4, 3), vec: Box(2,)); the image is filled with ``t``."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {"img": spaces.Box(0, 255, (4, 4, 3), np.uint8), "vec": spaces.Box(-10.0, 10.0, (2,), np.float32)}
        )
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        return {"img": np.full((4, 4, 3), 10 * self.t, np.uint8), "vec": np.array([self.t, -self.t], np.float32)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 1.0, self.t >= 3, False, {}


class PassThrough(VecEnvWrapper):
    """A wrapper that changes nothing (to build stacks of wrappers)."""

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        return self.venv.step_wait()


class WritesMarker:
    """Unpickling this object writes ``path``: a stand-in for malicious code in a pickle."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable, tuple]:
        return (pathlib.Path.write_text, (self.path, "executed"))


class RunsCommand:
    """Unpickling this object runs a shell command (the classic ``os.system`` payload)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Callable, tuple]:
        return (os.system, (self.command,))


def box_fns(n: int = 2, episode_len: int = 3) -> list[Callable[[], gym.Env]]:
    return [functools.partial(SpaceEnv, "box", "discrete", offset=i, episode_len=episode_len) for i in range(n)]


def with_prior(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean / variance of ``data`` pooled with RunningMeanStd's prior (mean 0, var 1, weight 1e-4)."""
    x = np.asarray(data, dtype=np.float64)
    n = x.shape[0]
    mean = x.sum(axis=0) / (n + EPS_RMS)
    var = (EPS_RMS * (1.0 + mean**2) + ((x - mean) ** 2).sum(axis=0)) / (n + EPS_RMS)
    return mean, var


def by_hand(raw: np.ndarray, mean: np.ndarray, var: np.ndarray, clip: float) -> np.ndarray:
    return np.clip((raw - mean) / np.sqrt(var + EPS), -clip, clip).astype(np.float32)


def trained(venv: VecEnv, n_steps: int = 6, seed: int = 0, **kwargs: Any) -> VecNormalize:
    vn = VecNormalize(venv, **kwargs)
    vn.reset()
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        vn.step(rng.integers(0, 2, size=vn.num_envs))
    return vn


def assert_rms_equal(actual: RunningMeanStd, expected: RunningMeanStd) -> None:
    np.testing.assert_array_equal(actual.mean, expected.mean)
    np.testing.assert_array_equal(actual.var, expected.var)
    assert actual.count == expected.count


def members_of(path: pathlib.Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_members(path: pathlib.Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def header_of(members: dict[str, bytes]) -> dict[str, Any]:
    return json.loads(np.load(io.BytesIO(members["header.npy"])).tobytes())


def set_header(members: dict[str, bytes], header: dict[str, Any], fix_digest: bool) -> None:
    raw = json.dumps(header).encode()
    members["header.npy"] = npy(np.frombuffer(raw, np.uint8))
    if fix_digest:
        members["header_sha256.npy"] = npy(np.frombuffer(hashlib.sha256(raw).digest(), np.uint8))


# --- normalization ----------------------------------------------------------------------------------------


def test_obs_and_rewards_match_numpy_by_hand(backend, make_venv):
    vn = VecNormalize(make_venv(backend, box_fns(2, episode_len=3)), gamma=0.9)
    raw_obs: list[np.ndarray] = []
    obs = vn.reset()
    raw_obs.append(vn.get_original_obs())
    np.testing.assert_array_equal(raw_obs[0], np.stack([space_obs("box", 0), space_obs("box", 100)]))
    mean, var = with_prior(np.concatenate(raw_obs))
    np.testing.assert_allclose(obs, by_hand(raw_obs[0], mean, var, 10.0), rtol=1e-5, atol=1e-5)

    rng = np.random.default_rng(0)
    returns, all_returns = np.zeros(2), []
    for _ in range(7):
        actions = rng.integers(0, 3, size=2)
        obs, rewards, dones, _ = vn.step(actions)
        raw, raw_rewards = vn.get_original_obs(), vn.get_original_reward()
        np.testing.assert_array_equal(raw_rewards, actions.astype(np.float32))  # SpaceEnv's reward is the action
        raw_obs.append(raw)
        returns = returns * 0.9 + raw_rewards
        all_returns.append(returns.copy())
        returns[dones] = 0.0

        mean, var = with_prior(np.concatenate(raw_obs))
        np.testing.assert_allclose(vn.obs_rms.mean, mean, rtol=1e-6)
        np.testing.assert_allclose(vn.obs_rms.var, var, rtol=1e-5)
        assert obs.dtype == np.float32 and obs.shape == (2, 2, 3)
        np.testing.assert_allclose(obs, by_hand(raw, mean, var, 10.0), rtol=1e-5, atol=1e-5)

        ret_mean, ret_var = with_prior(np.concatenate(all_returns))
        np.testing.assert_allclose(vn.ret_rms.mean, ret_mean, rtol=1e-12)
        np.testing.assert_allclose(vn.ret_rms.var, ret_var, rtol=1e-12)
        assert rewards.dtype == np.float32
        expected = np.clip(raw_rewards / np.sqrt(ret_var + EPS), -10, 10).astype(np.float32)
        np.testing.assert_allclose(rewards, expected, rtol=1e-6)
        np.testing.assert_array_equal(vn.returns, returns)
    assert vn.ret_rms.count == pytest.approx(14 + EPS_RMS)
    assert vn.obs_rms.count == pytest.approx(16 + EPS_RMS)


def test_terminal_observation_is_normalized_like_obs(backend, make_venv):
    vn = VecNormalize(make_venv(backend, box_fns(2, episode_len=2)))
    vn.reset()
    vn.step(np.array([0, 1]))
    obs, _, dones, infos = vn.step(np.array([1, 0]))
    assert dones.all()
    for i in range(2):
        raw_terminal = space_obs("box", 100 * i + 2)  # the last observation of the episode
        expected = by_hand(raw_terminal, vn.obs_rms.mean, vn.obs_rms.var, 10.0)
        assert infos[i]["terminal_observation"].dtype == np.float32
        np.testing.assert_array_equal(infos[i]["terminal_observation"], expected)
        np.testing.assert_array_equal(infos[i]["terminal_observation"], vn.normalize_obs(raw_terminal))
    # the returned obs are the first observations of the next episodes, normalized with the same statistics
    np.testing.assert_array_equal(obs, vn.normalize_obs(vn.get_original_obs()))
    np.testing.assert_array_equal(vn.get_original_obs()[1], space_obs("box", 100))
    np.testing.assert_array_equal(vn.returns, 0.0)


def test_clipping():
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=4, clip_obs=0.5, clip_reward=0.1)
    obs, rewards, _, _ = vn.step(np.array([2, 0]))
    raw = vn.get_original_obs()
    unclipped = (raw - vn.obs_rms.mean) / np.sqrt(vn.obs_rms.var + EPS)
    assert np.abs(unclipped).max() > 0.5  # the clip matters
    np.testing.assert_array_equal(obs, np.clip(unclipped, -0.5, 0.5).astype(np.float32))
    assert np.abs(obs).max() == np.float32(0.5)
    assert rewards[0] == np.float32(0.1) and rewards[1] == 0.0
    assert vn.normalize_reward(np.array([-1e6], dtype=np.float32))[0] == np.float32(-0.1)


def test_training_false_freezes_statistics(backend, make_venv):
    vn = trained(make_venv(backend, box_fns(2)), n_steps=4)
    frozen_obs, frozen_ret = vn.obs_rms.copy(), vn.ret_rms.copy()
    vn.training = False
    for action in ([0, 1], [2, 2], [1, 0]):
        returns = vn.returns.copy()
        obs, rewards, dones, _ = vn.step(np.array(action))
        returns[dones] = 0.0
        np.testing.assert_array_equal(vn.returns, returns)  # not accumulated, only zeroed at episode ends
        np.testing.assert_array_equal(obs, by_hand(vn.get_original_obs(), frozen_obs.mean, frozen_obs.var, 10.0))
        expected = np.clip(vn.get_original_reward() / np.sqrt(frozen_ret.var + EPS), -10, 10).astype(np.float32)
        np.testing.assert_array_equal(rewards, expected)
    vn.reset()
    assert_rms_equal(vn.obs_rms, frozen_obs)
    assert_rms_equal(vn.ret_rms, frozen_ret)
    assert not vn.returns.any()


def test_norm_reward_false_and_norm_obs_false():
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=3, norm_obs=False, norm_reward=False)
    assert "obs_rms" not in vn.__dict__ and not hasattr(vn, "obs_rms")
    obs, rewards, _, _ = vn.step(np.array([2, 1]))
    np.testing.assert_array_equal(obs, vn.get_original_obs())
    assert obs.dtype == np.float32  # the env's own dtype, untouched
    np.testing.assert_array_equal(rewards, [2.0, 1.0])
    assert vn.ret_rms.count == pytest.approx(8 + EPS_RMS)  # 4 steps of 2 envs: still gathered while training


@pytest.mark.parametrize("norm_reward", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_normalize_reward_always_returns_float32(norm_reward, dtype):
    vn = VecNormalize(DummyVecEnv(box_fns(1)), norm_reward=norm_reward)
    out = vn.normalize_reward(np.array([3], dtype=dtype))
    assert out.dtype == np.float32 and out[0] == pytest.approx(3 / np.sqrt(1 + EPS))


def test_unnormalize_inverts_normalize():
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=5)
    raw = np.stack([space_obs("box", 1), space_obs("box", 101)]).astype(np.float64)
    np.testing.assert_allclose(vn.unnormalize_obs(vn.normalize_obs(raw)), raw, rtol=1e-5)
    reward = np.array([0.5, -1.0])
    np.testing.assert_allclose(vn.unnormalize_reward(vn.normalize_reward(reward)), reward, rtol=1e-6)


def test_original_obs_and_reward_are_copies():
    vn = VecNormalize(DummyVecEnv(box_fns(1)))
    with pytest.raises(AttributeError, match="call reset"):
        vn.get_original_obs()
    assert vn.get_original_reward().shape == (0,)
    vn.reset()
    vn.step(np.array([1]))
    vn.get_original_obs()[:] = -1
    vn.get_original_reward()[:] = -1
    np.testing.assert_array_equal(vn.get_original_obs()[0], space_obs("box", 1))
    np.testing.assert_array_equal(vn.get_original_reward(), [1.0])


def test_normalize_obs_does_not_modify_its_input():
    vn = VecNormalize(DummyVecEnv([functools.partial(SpaceEnv, "dict")]), norm_obs_keys=["z"])
    obs = {"z": np.ones((1, 2, 3), np.float32), "a": np.array([3])}
    out = vn.normalize_obs(obs)
    np.testing.assert_array_equal(obs["z"], 1.0)
    assert out["z"] is not obs["z"] and out["a"] is not obs["a"]


# --- Dict and image spaces ------------------------------------------------------------------------------


def test_dict_with_norm_obs_keys(backend, make_venv):
    fns = [functools.partial(SpaceEnv, "dict", offset=i) for i in range(2)]
    vn = VecNormalize(make_venv(backend, fns), norm_obs_keys=["z"])
    assert list(vn.obs_rms) == ["z"] and vn.obs_rms["z"].mean.shape == (2, 3)
    raw_z = []
    obs = vn.reset()
    raw_z.append(vn.get_original_obs()["z"])
    for action in ([0, 1], [1, 1]):
        obs, _, _, _ = vn.step(np.array(action))
        raw = vn.get_original_obs()
        raw_z.append(raw["z"])
        mean, var = with_prior(np.concatenate(raw_z))
        assert obs["z"].dtype == np.float32
        np.testing.assert_allclose(obs["z"], by_hand(raw["z"], mean, var, 10.0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(obs["a"], raw["a"])  # not normalized: the env's own values and dtype
        assert obs["a"].dtype == raw["a"].dtype
    assert list(obs) == ["z", "a"]


def test_dict_terminal_observation_normalizes_only_the_keys():
    vn = VecNormalize(DummyVecEnv([TwoPartEnv]), norm_obs_keys=["position"])
    vn.reset()
    for _ in range(4):
        _, _, dones, infos = vn.step(np.array([0]))
    assert dones[0]
    terminal = infos[0]["terminal_observation"]
    raw_position = np.arange(3, dtype=np.float32) * 5
    np.testing.assert_array_equal(
        terminal["position"], by_hand(raw_position, vn.obs_rms["position"].mean, vn.obs_rms["position"].var, 10.0)
    )
    np.testing.assert_array_equal(terminal["velocity"], np.array([1.0, -2.0], np.float32))
    assert terminal["mode"] == 0


def test_image_space_becomes_float_box():
    venv = DummyVecEnv([functools.partial(SpaceEnv, "image")])
    vn = VecNormalize(venv, clip_obs=5.0)
    assert vn.observation_space == spaces.Box(-5.0, 5.0, (5, 4, 3), np.float32)
    assert venv.observation_space.dtype == np.uint8
    obs = vn.reset()
    assert obs.dtype == np.float32 and obs.shape == (1, 5, 4, 3)
    # with norm_obs=False the image stays an image
    assert VecNormalize(venv, norm_obs=False).observation_space is venv.observation_space


def test_image_sub_space_becomes_float_box_without_changing_the_env():
    venv = DummyVecEnv([ImageDictEnv])
    vn = VecNormalize(venv)
    assert vn.observation_space["img"] == spaces.Box(-10.0, 10.0, (4, 4, 3), np.float32)
    assert vn.observation_space["vec"] == venv.observation_space["vec"]
    assert venv.observation_space["img"].dtype == np.uint8  # vecenv copies the Dict space (SB3 mutates it)
    obs = vn.reset()
    assert obs["img"].dtype == np.float32 and obs["vec"].dtype == np.float32
    # an image that is not normalized stays an image
    only_vec = VecNormalize(venv, norm_obs_keys=["vec"])
    assert only_vec.observation_space is venv.observation_space


# --- validation (SB3's exception types and messages) -------------------------------------------------------


def test_non_box_space_is_refused_with_norm_obs():
    venv = DummyVecEnv([functools.partial(SpaceEnv, "discrete")])
    with pytest.raises(ValueError, match=r"only supports `gym.spaces.Box` and `gym.spaces.Dict` observation spaces"):
        VecNormalize(venv)
    vn = VecNormalize(venv, norm_obs=False)  # rewards only: any space
    obs = vn.reset()
    np.testing.assert_array_equal(obs, [0])


def test_norm_obs_keys_only_for_dict():
    with pytest.raises(ValueError, match=r"`norm_obs_keys` param is applicable only with `gym.spaces.Dict`"):
        VecNormalize(DummyVecEnv(box_fns(1)), norm_obs_keys=["a"])


def test_dict_with_non_box_key_is_refused():
    venv = DummyVecEnv([functools.partial(SpaceEnv, "dict")])
    with pytest.raises(
        ValueError, match=r"only supports `gym.spaces.Box` observation spaces but a is of type Discrete"
    ):
        VecNormalize(venv)


def test_unknown_norm_obs_key():
    venv = DummyVecEnv([functools.partial(SpaceEnv, "dict")])
    with pytest.raises(KeyError, match=r"'nope'.*\['z', 'a'\]"):
        VecNormalize(venv, norm_obs_keys=["nope"])


# --- save / load ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_path", [True, False], ids=["pathlib", "str"])
def test_save_load_round_trip(backend, make_venv, tmp_path, as_path):
    vn = trained(make_venv(backend, box_fns(2)), n_steps=5, clip_obs=7.0, gamma=0.95, epsilon=1e-6)
    target = tmp_path / "stats.vecnorm"
    vn.save(target if as_path else str(target))
    assert sorted(os.listdir(tmp_path)) == ["stats.vecnorm"]
    loaded = VecNormalize.load(target if as_path else str(target), make_venv(backend, box_fns(2)))
    assert_rms_equal(loaded.obs_rms, vn.obs_rms)
    assert_rms_equal(loaded.ret_rms, vn.ret_rms)
    for name in ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys"):
        assert getattr(loaded, name) == getattr(vn, name), name
    assert loaded.observation_space == vn.observation_space
    vn.training = loaded.training = False
    np.testing.assert_array_equal(loaded.reset(), vn.reset())
    for action in ([1, 0], [2, 2], [0, 1]):
        a, b = vn.step(np.array(action)), loaded.step(np.array(action))
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_save_is_deterministic_and_readable_with_numpy(tmp_path):
    vn = trained(DummyVecEnv(box_fns(2)))
    vn.save(tmp_path / "a")
    vn.save(tmp_path / "b")
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    with np.load(tmp_path / "a", allow_pickle=False) as npz:
        assert npz.files == [
            "header",
            "header_sha256",
            "obs_rms.mean",
            "obs_rms.var",
            "obs_rms.count",
            "ret_rms.mean",
            "ret_rms.var",
            "ret_rms.count",
        ]
        header = json.loads(npz["header"].tobytes())
        np.testing.assert_array_equal(npz["obs_rms.mean"], vn.obs_rms.mean)
    assert header["format"] == "vecenv.VecNormalize" and header["format_version"] == 1
    assert header["vecenv_version"] == __version__
    assert header["config"] == {
        "training": True,
        "norm_obs": True,
        "norm_reward": True,
        "clip_obs": 10.0,
        "clip_reward": 10.0,
        "gamma": 0.99,
        "epsilon": 1e-8,
        "norm_obs_keys": None,
    }
    assert header["observation_space"] == {"type": "Box", "shape": [2, 3], "dtype": "float32"}
    assert header["arrays"]["ret_rms.count"]["shape"] == []


def test_save_load_dict_with_norm_obs_keys(tmp_path):
    vn = trained(DummyVecEnv([TwoPartEnv, TwoPartEnv]), norm_obs_keys=["velocity", "position"], clip_reward=2.0)
    vn.save(tmp_path / "dict.vecnorm")
    loaded = VecNormalize.load(tmp_path / "dict.vecnorm", DummyVecEnv([TwoPartEnv]))
    assert loaded.norm_obs_keys == ["velocity", "position"] and list(loaded.obs_rms) == ["velocity", "position"]
    for key in ("velocity", "position"):
        assert_rms_equal(loaded.obs_rms[key], vn.obs_rms[key])
    assert loaded.clip_reward == 2.0 and loaded.num_envs == 1
    obs = {"position": np.ones((1, 3), np.float32), "velocity": np.ones((1, 2), np.float32), "mode": np.array([2])}
    a, b = loaded.normalize_obs(obs), vn.normalize_obs(obs)
    for key in obs:
        np.testing.assert_array_equal(a[key], b[key])


def test_save_load_without_obs_statistics(tmp_path):
    vn = trained(DummyVecEnv([functools.partial(SpaceEnv, "discrete")]), norm_obs=False)
    vn.save(tmp_path / "rewards-only")
    loaded = VecNormalize.load(tmp_path / "rewards-only", DummyVecEnv([functools.partial(SpaceEnv, "discrete")]))
    assert not loaded.norm_obs and "obs_rms" not in loaded.__dict__
    assert_rms_equal(loaded.ret_rms, vn.ret_rms)


def test_save_load_image(tmp_path):
    vn = trained(DummyVecEnv([ImageDictEnv]), n_steps=3)
    vn.save(tmp_path / "img")
    loaded = VecNormalize.load(tmp_path / "img", DummyVecEnv([ImageDictEnv]))
    assert loaded.observation_space == vn.observation_space
    assert_rms_equal(loaded.obs_rms["img"], vn.obs_rms["img"])


def test_load_into_other_shape_names_both_shapes(tmp_path):
    trained(DummyVecEnv([functools.partial(ShapeEnv, size=2)])).save(tmp_path / "s")
    with pytest.raises(ValueError, match=r"the observation was saved with shape \(2,\) .* has shape \(3,\)"):
        VecNormalize.load(tmp_path / "s", DummyVecEnv([functools.partial(ShapeEnv, size=3)]))


def test_load_dict_key_of_other_shape_names_the_key(tmp_path):
    trained(DummyVecEnv([TwoPartEnv]), norm_obs_keys=["position", "velocity"]).save(tmp_path / "d")
    with pytest.raises(ValueError, match=r"observation key 'position' was saved with shape \(3,\) .* shape \(5,\)"):
        VecNormalize.load(tmp_path / "d", DummyVecEnv([functools.partial(TwoPartEnv, position_size=5)]))
    with pytest.raises(ValueError, match=r"saved for a Dict observation space"):
        VecNormalize.load(tmp_path / "d", DummyVecEnv(box_fns(1)))
    with pytest.raises(ValueError, match=r"keys \['mode', 'position', 'velocity'\] .* keys \['a', 'z'\]"):
        VecNormalize.load(tmp_path / "d", DummyVecEnv([functools.partial(SpaceEnv, "dict")]))


@pytest.fixture
def saved(tmp_path) -> pathlib.Path:
    path = tmp_path / "stats.vecnorm"
    trained(DummyVecEnv(box_fns(2))).save(path)
    return path


def load_box(path: pathlib.Path) -> VecNormalize:
    return VecNormalize.load(path, DummyVecEnv(box_fns(2)))


def test_tampered_header_is_refused(saved):
    members = members_of(saved)
    header = header_of(members)
    header["config"]["clip_obs"] = 1000.0
    set_header(members, header, fix_digest=False)
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match="header does not match its SHA-256"):
        load_box(saved)


def test_header_bytes_edited_in_place_are_refused(saved):
    data = saved.read_bytes()
    assert data.count(b'"clip_obs": 10.0') == 1
    saved.write_bytes(data.replace(b'"clip_obs": 10.0', b'"clip_obs": 99.0'))  # same length; zip CRC now wrong
    with pytest.raises(NormalizationFileError, match=r"truncated or corrupt|SHA-256"):
        load_box(saved)


def test_tampered_array_is_refused(saved):
    members = members_of(saved)
    mean = np.load(io.BytesIO(members["obs_rms.mean.npy"]))
    members["obs_rms.mean.npy"] = npy(mean + 1.0)
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match=r"array 'obs_rms.mean' does not match its SHA-256"):
        load_box(saved)


def test_array_of_wrong_shape_is_refused(saved):
    members = members_of(saved)
    members["obs_rms.mean.npy"] = npy(np.zeros(6))
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match=r"array 'obs_rms.mean' has shape \(6,\)"):
        load_box(saved)


@pytest.mark.parametrize("keep", [0, 10, 200, 0.5, -30, -1])
def test_truncated_file_is_refused(saved, keep):
    data = saved.read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else keep
    saved.write_bytes(data[:cut])
    with pytest.raises(NormalizationFileError, match=r"truncated or corrupt|empty file|expected a vecenv"):
        load_box(saved)


def test_missing_and_extra_members_are_refused(saved):
    members = members_of(saved)
    write_members(saved, {k: v for k, v in members.items() if k != "ret_rms.var.npy"})
    with pytest.raises(NormalizationFileError, match="expected"):
        load_box(saved)
    write_members(saved, {**members, "extra.npy": npy(np.zeros(2))})
    with pytest.raises(NormalizationFileError, match="expected"):
        load_box(saved)
    write_members(saved, {**members, "notes.txt": b"hello"})
    with pytest.raises(NormalizationFileError, match=r"unexpected or duplicate archive member 'notes.txt'"):
        load_box(saved)


def test_newer_format_version_is_refused(saved):
    members = members_of(saved)
    header = header_of(members)
    header["format_version"] = 2
    set_header(members, header, fix_digest=True)
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match=r"format version 2.*Upgrade vecenv"):
        load_box(saved)


def test_malformed_config_is_refused(saved):
    members = members_of(saved)
    header = header_of(members)
    header["config"]["gamma"] = "0.99"
    set_header(members, header, fix_digest=True)
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match="'gamma' must be a number"):
        load_box(saved)


def test_not_a_normalization_file(tmp_path):
    (tmp_path / "text").write_text("hello")
    with pytest.raises(NormalizationFileError, match="expected a vecenv normalization file"):
        load_box(tmp_path / "text")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(NormalizationFileError, match="not a vecenv file"):
        load_box(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError):
        load_box(tmp_path / "missing")


def test_live_payload_sanity(tmp_path):
    """The payloads used below really execute when unpickled without restrictions."""
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(WritesMarker(marker)))
    assert marker.read_text() == "executed"


def test_member_with_pickled_objects_executes_nothing(saved, tmp_path):
    marker = tmp_path / "marker"
    members = members_of(saved)
    members["obs_rms.mean.npy"] = npy(np.array([WritesMarker(marker)], dtype=object), allow_pickle=True)
    write_members(saved, members)
    with pytest.raises(NormalizationFileError, match=r"pickled Python objects.*nothing was executed"):
        load_box(saved)
    assert not marker.exists()


def test_pickle_given_to_load_goes_through_the_restricted_unpickler(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(WritesMarker(marker)))
    with pytest.raises(NormalizationFileError, match=r"global pathlib.*Path\.write_text.*refused before"):
        load_box(path)
    assert not marker.exists()


def test_the_vecenv_reader_alone_refuses_pickles(tmp_path):
    with pytest.raises(NormalizationFileError, match=r"this reader never unpickles.*VecNormalize.load\(path, venv\)"):
        normalize_io.read_normalization_file(DATA / "sb3_cartpole_box.pkl")


# --- atomic save ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [OSError("No space left on device"), KeyboardInterrupt()])
def test_crash_mid_save_keeps_previous_file(saved, monkeypatch, error):
    before = saved.read_bytes()
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=9, seed=3)

    def write_half_then_fail(file: Any, data: bytes) -> None:
        file.write(data[: len(data) // 2])
        file.flush()
        raise error

    monkeypatch.setattr(atomic, "_write_payload", write_half_then_fail)
    with pytest.raises(type(error)):
        vn.save(saved)
    assert saved.read_bytes() == before
    assert os.listdir(saved.parent) == [saved.name]  # no temporary file left behind
    monkeypatch.undo()
    vn.save(saved)
    assert saved.read_bytes() != before
    assert_rms_equal(load_box(saved).obs_rms, vn.obs_rms)
    assert os.listdir(saved.parent) == [saved.name]


def test_crash_on_first_save_leaves_nothing(tmp_path, monkeypatch):
    def fail(file: Any, data: bytes) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(atomic, "_write_payload", fail)
    with pytest.raises(OSError, match="disk gone"):
        VecNormalize(DummyVecEnv(box_fns(1))).save(tmp_path / "new")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["stats.npz", "vecnormalize.pkl"])
def test_save_through_a_symbolic_link_writes_the_file_it_points_to(name, tmp_path):
    """As ``open(path, "wb")`` (SB3's save): the link stays, the file it points to gets the new statistics."""
    target_dir = tmp_path / "runs"
    target_dir.mkdir()
    target = target_dir / name
    link = tmp_path / name
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=5, seed=1)
    vn.save(target)
    before = target.read_bytes()
    link.symlink_to(target)
    trained(DummyVecEnv(box_fns(2)), n_steps=9, seed=2).save(link)
    assert link.is_symlink() and target.read_bytes() != before
    assert sorted(os.listdir(target_dir)) == [name] and sorted(os.listdir(tmp_path)) == sorted([name, "runs"])


def test_save_errors_name_the_given_path(tmp_path):
    """A missing folder: the error names the file asked for (not the temporary file beside it) and why."""
    vn = VecNormalize(DummyVecEnv(box_fns(1)))
    missing = tmp_path / "missing" / "stats.npz"
    with pytest.raises(FileNotFoundError, match="its folder does not exist") as info:
        vn.save(missing)
    assert info.value.filename == str(missing)
    (tmp_path / "folder.npz").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        vn.save(tmp_path / "folder.npz")
    assert info.value.filename == str(tmp_path / "folder.npz")
    assert sorted(os.listdir(tmp_path)) == ["folder.npz"]  # no temporary file left


def test_save_and_load_take_bytes_paths(tmp_path):
    """SB3's save / load take a bytes path (``open`` does); so do vecenv's, in both formats."""
    vn = trained(DummyVecEnv(box_fns(2)), n_steps=5, seed=1)
    for name in ("stats.npz", "vecnormalize.pkl"):
        path = os.fsencode(tmp_path / name)
        vn.save(path)
        assert_rms_equal(VecNormalize.load(path, DummyVecEnv(box_fns(2))).obs_rms, vn.obs_rms)


# --- SB3 pickles ----------------------------------------------------------------------------------------


def sb3_venv(name: str) -> VecEnv:
    if "dict" in name:
        return DummyVecEnv([TwoPartEnv, TwoPartEnv])
    return DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)


def assert_rms_is(rms: RunningMeanStd, expected: dict[str, Any]) -> None:
    np.testing.assert_array_equal(rms.mean, np.array(expected["mean"]))
    np.testing.assert_array_equal(rms.var, np.array(expected["var"]))
    assert rms.count == expected["count"]


@pytest.mark.parametrize("loader", ["load", "load_sb3"])
@pytest.mark.parametrize("name", sorted(SB3_EXPECTED))
def test_load_sb3_gives_the_statistics_sb3_saved(name, loader, tmp_path):
    """``VecNormalize.load`` (the call of SB3 code and the RL Zoo) and ``load_sb3`` read SB3's own pickles."""
    expected = SB3_EXPECTED[name]
    vn = getattr(VecNormalize, loader)(DATA / name, sb3_venv(name))
    for field, value in expected["config"].items():
        assert getattr(vn, field) == value, field
    assert_rms_is(vn.ret_rms, expected["ret_rms"])
    if expected["obs_rms"] is None:
        assert "obs_rms" not in vn.__dict__
    elif vn.norm_obs_keys is None:
        assert_rms_is(vn.obs_rms, expected["obs_rms"])
    else:
        assert sorted(vn.obs_rms) == sorted(expected["obs_rms"])
        for key, rms in vn.obs_rms.items():
            assert_rms_is(rms, expected["obs_rms"][key])

    # same normalization as SB3, to the bit
    probe_reward = np.array(expected["probe_reward"], dtype=np.float32)
    np.testing.assert_array_equal(vn.normalize_reward(probe_reward), np.float32(expected["probe_normalized_reward"]))
    probe, normalized = expected["probe_obs"], expected["probe_normalized_obs"]
    if isinstance(probe, dict):
        obs = {"position": np.float32(probe["position"]), "velocity": np.float32(probe["velocity"])}
        obs["mode"] = np.array(probe["mode"])
        out = vn.normalize_obs(obs)
        for key in obs:
            np.testing.assert_array_equal(out[key], np.array(normalized[key]).astype(out[key].dtype))
    else:
        np.testing.assert_array_equal(vn.normalize_obs(np.float32(probe)), np.float32(normalized))

    # and a vecenv file written from it holds the same numbers
    vn.save(tmp_path / "converted")
    again = VecNormalize.load(tmp_path / "converted", sb3_venv(name))
    assert_rms_equal(again.ret_rms, vn.ret_rms)
    vn.close()


def test_load_sb3_checks_shapes():
    with pytest.raises(ValueError, match=r"the observation was saved with shape \(4,\) .* shape \(3,\)"):
        VecNormalize.load_sb3(DATA / "sb3_cartpole_box.pkl", DummyVecEnv([functools.partial(ShapeEnv, size=3)]))
    with pytest.raises(ValueError, match=r"observation key 'position' was saved with shape \(3,\)"):
        VecNormalize.load_sb3(
            DATA / "sb3_dict_norm_obs_keys.pkl", DummyVecEnv([functools.partial(TwoPartEnv, position_size=4)])
        )


@pytest.mark.parametrize("loader", ["load", "load_sb3"])
def test_load_sb3_refuses_forbidden_globals_before_running_them(loader, tmp_path):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pkl"
    load = getattr(VecNormalize, loader)
    # allowed objects first (they are built), then the payload
    evil.write_bytes(pickle.dumps([np.zeros(3), spaces.Discrete(3), WritesMarker(marker)]))
    with pytest.raises(NormalizationFileError, match=r"global pathlib.*Path.*not allowed.*refused before"):
        load(evil, DummyVecEnv(box_fns(1)))
    assert not marker.exists()

    evil.write_bytes(pickle.dumps({"obs_rms": RunsCommand(f"touch {marker}")}))
    with pytest.raises(NormalizationFileError, match=r"global (posix|os|nt)\.system"):
        load(evil, DummyVecEnv(box_fns(1)))
    assert not marker.exists()


@pytest.mark.parametrize("loader", ["load", "load_sb3"])
def test_load_sb3_refuses_a_global_hidden_from_the_scan(loader, tmp_path):
    """A STACK_GLOBAL whose strings the opcode scan cannot follow is still refused by find_class."""
    marker = tmp_path / "marker"
    command = f"touch {marker}".encode()
    payload = (
        b"\x80\x04\x8c\x05posix\x8c\x04junk0\x8c\x06system\x93"  # push 'posix', push+POP 'junk', 'system', STACK_GLOBAL
        + b"\x8c"
        + bytes([len(command)])
        + command
        + b"\x85R."  # TUPLE1, REDUCE, STOP
    )
    assert normalize_io.scan_pickle_globals(payload) == []
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(payload)
    with pytest.raises(NormalizationFileError, match=r"global posix\.system"):
        getattr(VecNormalize, loader)(evil, DummyVecEnv(box_fns(1)))
    assert not marker.exists()


class _HiddenObjectFieldDtype:
    """Pickles as ``numpy.dtype('V8')`` whose state gives it an object field and clears the flags that say so."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("f8"), 0)}, 8, 1, 0))


class _FlaggedFloatDtype:
    """Pickles as ``numpy.dtype('f8')`` with the flags of an object dtype set in its state."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.dtype, ("f8", False, True), (3, "<", None, None, None, -1, -1, 63))


class _ArrayOf:
    """Pickles as an array of 3 elements of ``dtype`` (any object that pickles as a dtype) from raw bytes."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def __reduce__(self) -> tuple[Any, ...]:
        reconstruct = np.zeros(1).__reduce__()[0]  # numpy's _reconstruct, as arrays pickle
        return (reconstruct, (np.ndarray, (0,), b"b"), (1, (3,), self.dtype, False, b"\x41" * 24))


class _ScalarOf:
    """Pickles as ``numpy._core.multiarray.scalar(dtype('O'), raw bytes)``: a pointer read from the file."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.float64(0).__reduce__()[0], (np.dtype("O"), b"\x41" * 8))


@pytest.mark.parametrize(
    "payload",
    ["hidden-object-field", "flagged-float", "object-scalar"],
)
def test_load_sb3_refuses_numpy_states_that_would_read_pointers_from_the_file(payload, tmp_path):
    """Only allowed globals, yet numpy would take bytes of the file as object pointers (a crash, or worse): the
    dtype states, array states and scalars a VecNormalize pickle never holds are refused. Loaded in a child
    process, so that a regression crashes that process, not the test run."""
    evil = {
        "hidden-object-field": lambda: _ArrayOf(_HiddenObjectFieldDtype()),
        "flagged-float": lambda: _ArrayOf(_FlaggedFloatDtype()),
        "object-scalar": _ScalarOf,
    }[payload]()
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(pickle.dumps([np.zeros(2), evil], protocol=4).replace(b"numpy.core", b"numpy._core"))
    code = (
        "import sys; from tests.test_vec_normalize import box_fns; from vecenv import DummyVecEnv, VecNormalize\n"
        "from vecenv.wrappers.normalize_io import NormalizationFileError\n"
        "try:\n    VecNormalize.load_sb3(sys.argv[1], DummyVecEnv(box_fns(1)))\n"
        "except NormalizationFileError as exc:\n    print('refused:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "only plain numeric dtypes" in done.stdout, done.stdout


def test_load_sb3_refuses_a_pickle_that_sets_a_class_attribute(tmp_path):
    """BUILD on an allowed class (vecenv's RunningMeanStd) would set its attribute for the whole process: refused,
    and the class is unchanged."""
    legit = tmp_path / "legit.pkl"
    VecNormalize(DummyVecEnv(box_fns(1))).save(legit)
    prefix = (
        b"\x80\x02cstable_baselines3.common.running_mean_std\nRunningMeanStd\n"
        b"N}X\x06\x00\x00\x00updateX\x05\x00\x00\x00pwneds\x86b0"  # (None, {"update": "pwned"}), BUILD, POP
    )
    evil = tmp_path / "vecnormalize.pkl"
    evil.write_bytes(prefix + legit.read_bytes()[2:])
    update = RunningMeanStd.update
    with pytest.raises(NormalizationFileError, match="sets the state of <class"):
        VecNormalize.load(evil, DummyVecEnv(box_fns(1)))
    assert RunningMeanStd.update is update


def test_load_sb3_names_the_file_of_an_edited_space(tmp_path):
    """A pickled Box whose attribute name was edited: NormalizationFileError naming the file, not AttributeError."""
    path = tmp_path / "vecnormalize.pkl"
    VecNormalize(DummyVecEnv(box_fns(1))).save(path)
    data = path.read_bytes()
    assert data.count(b"_shape") == 1
    path.write_bytes(data.replace(b"_shape", b"_shapf"))
    with pytest.raises(NormalizationFileError, match="observation_space is invalid") as info:
        VecNormalize.load(path, DummyVecEnv(box_fns(1)))
    assert str(path) in str(info.value)


def test_scan_finds_the_globals_of_real_sb3_pickles():
    named = normalize_io.scan_pickle_globals((DATA / "sb3_dict_norm_obs_keys.pkl").read_bytes())
    assert ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize") in named
    assert ("gymnasium.spaces.dict", "Dict") in named
    assert set(named) <= set(normalize_io.sb3_allowed_globals())


def test_load_sb3_names_old_gym_pickles(tmp_path):
    old = tmp_path / "old.pkl"
    old.write_bytes(b"cgym.spaces.box\nBox\n.")
    with pytest.raises(NormalizationFileError, match=r"old `gym` package"):
        VecNormalize.load_sb3(old, DummyVecEnv(box_fns(1)))


def test_load_sb3_refuses_other_content(tmp_path, saved):
    with pytest.raises(NormalizationFileError, match=r"VecNormalize.load"):
        VecNormalize.load_sb3(saved, DummyVecEnv(box_fns(2)))
    (tmp_path / "list.pkl").write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(NormalizationFileError, match="holds a list"):
        VecNormalize.load_sb3(tmp_path / "list.pkl", DummyVecEnv(box_fns(2)))
    data = (DATA / "sb3_cartpole_box.pkl").read_bytes()
    (tmp_path / "cut.pkl").write_bytes(data[: len(data) // 2])
    with pytest.raises(NormalizationFileError, match="truncated or corrupt"):
        VecNormalize.load_sb3(tmp_path / "cut.pkl", sb3_venv("cartpole"))


def test_allowed_globals_are_few():
    allowed = normalize_io.sb3_allowed_globals()
    modules = {module.split(".")[0] for module, _ in allowed}
    assert modules == {"numpy", "gymnasium", "collections", "stable_baselines3"}
    assert allowed[("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize")] is VecNormalize
    assert allowed[("stable_baselines3.common.running_mean_std", "RunningMeanStd")] is RunningMeanStd
    assert ("builtins", "eval") not in allowed and ("numpy", "load") not in allowed


# --- pickling, deepcopy, set_venv ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "clone", [lambda vn: pickle.loads(pickle.dumps(vn)), copy.deepcopy], ids=["pickle", "deepcopy"]
)
def test_pickle_and_deepcopy(clone):
    vn = trained(DummyVecEnv(box_fns(2)))
    other = clone(vn)
    assert other.venv is None
    assert "returns" not in other.__dict__ and "class_attributes" not in other.__dict__
    assert_rms_equal(other.obs_rms, vn.obs_rms)
    assert other.obs_rms is not vn.obs_rms
    np.testing.assert_array_equal(other.get_original_obs(), vn.get_original_obs())
    venv = DummyVecEnv(box_fns(3))
    other.set_venv(venv)
    assert other.num_envs == 3 and other.returns.shape == (3,)
    obs = other.reset()
    assert obs.shape == (3, 2, 3)
    with pytest.raises(ValueError, match="already initialized"):
        other.set_venv(venv)


def test_set_venv_checks_shapes():
    other = pickle.loads(pickle.dumps(trained(DummyVecEnv([functools.partial(ShapeEnv, size=2)]))))
    with pytest.raises(ValueError, match=r"saved with shape \(2,\) .* shape \(4,\)"):
        other.set_venv(DummyVecEnv([functools.partial(ShapeEnv, size=4)]))
    assert other.venv is None


# --- module functions -----------------------------------------------------------------------------------


def test_sync_envs_normalization_copies_statistics():
    env = trained(DummyVecEnv(box_fns(2)), n_steps=5)
    eval_env = VecNormalize(DummyVecEnv(box_fns(2)), training=False, norm_reward=False)
    sync_envs_normalization(PassThrough(env), PassThrough(eval_env))
    assert_rms_equal(eval_env.obs_rms, env.obs_rms)
    assert_rms_equal(eval_env.ret_rms, env.ret_rms)
    assert eval_env.obs_rms is not env.obs_rms and eval_env.obs_rms.mean is not env.obs_rms.mean
    assert eval_env.ret_rms is not env.ret_rms
    assert not eval_env.training and not eval_env.norm_reward  # settings are not synced


def test_sync_envs_normalization_without_obs_rms():
    env = trained(DummyVecEnv(box_fns(1)), norm_obs=False)
    eval_env = VecNormalize(DummyVecEnv(box_fns(1)))
    before = eval_env.obs_rms
    sync_envs_normalization(env, eval_env)
    assert eval_env.obs_rms is before
    assert_rms_equal(eval_env.ret_rms, env.ret_rms)


def test_sync_envs_normalization_assertions():
    env = VecNormalize(DummyVecEnv(box_fns(1)))
    with pytest.raises(AssertionError, match="expected the eval env to be a VecEnvWrapper"):
        sync_envs_normalization(env, DummyVecEnv(box_fns(1)))
    with pytest.raises(AssertionError, match="expected the eval env to be a VecNormalize"):
        sync_envs_normalization(env, PassThrough(DummyVecEnv(box_fns(1))))
    sync_envs_normalization(DummyVecEnv(box_fns(1)), DummyVecEnv(box_fns(1)))  # nothing to do


def test_unwrap_vec_normalize():
    venv = DummyVecEnv(box_fns(1))
    vn = VecNormalize(PassThrough(venv))
    assert unwrap_vec_normalize(PassThrough(PassThrough(vn))) is vn
    assert unwrap_vec_normalize(vn) is vn
    assert unwrap_vec_normalize(PassThrough(venv)) is None
    assert unwrap_vec_normalize(venv) is None


def test_double_normalization_warns():
    inner = VecNormalize(DummyVecEnv(box_fns(1)))
    with pytest.warns(UserWarning, match=r"already normalized by a vecenv\.wrappers\.vec_normalize\.VecNormalize"):
        VecNormalize(PassThrough(inner))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        VecNormalize(PassThrough(DummyVecEnv(box_fns(1))))


def test_double_normalization_warns_on_set_venv():
    clone = pickle.loads(pickle.dumps(VecNormalize(DummyVecEnv(box_fns(1)))))
    with pytest.warns(UserWarning, match="already normalized"):
        clone.set_venv(VecNormalize(DummyVecEnv(box_fns(1))))


def test_wrapper_forwards_to_the_env():
    vn = VecNormalize(DummyVecEnv([CounterEnv, CounterEnv]))
    assert vn.get_attr("custom_attr") == ["custom-0", "custom-0"]
    assert vn.num_envs == 2 and vn.render_mode is None


# --- parity with SB3 itself (make test-sb3) ------------------------------------------------------------


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
def test_same_outputs_as_sb3():
    from stable_baselines3.common.vec_env import DummyVecEnv as Sb3DummyVecEnv
    from stable_baselines3.common.vec_env import VecNormalize as Sb3VecNormalize

    fns = box_fns(2, episode_len=3)
    ours = VecNormalize(DummyVecEnv(fns), gamma=0.9, clip_obs=3.0)
    theirs = Sb3VecNormalize(Sb3DummyVecEnv(fns), gamma=0.9, clip_obs=3.0)
    np.testing.assert_array_equal(ours.reset(), theirs.reset())
    rng = np.random.default_rng(1)
    for _ in range(8):
        actions = rng.integers(0, 3, size=2)
        a, b = ours.step(actions), theirs.step(actions)
        for x, y in zip(a[:3], b[:3], strict=True):
            np.testing.assert_array_equal(x, y)
        for info_a, info_b in zip(a[3], b[3], strict=True):
            if "terminal_observation" in info_b:
                np.testing.assert_array_equal(info_a["terminal_observation"], info_b["terminal_observation"])
    np.testing.assert_array_equal(ours.obs_rms.var, theirs.obs_rms.var)
    np.testing.assert_array_equal(ours.ret_rms.var, theirs.ret_rms.var)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bound", [10.0, 0.5, np.float32(5.0), np.inf])
def test_the_clip_of_normalized_values_is_numpys_clip_bit_for_bit(dtype, bound):
    """What ``normalize_obs`` / ``normalize_reward`` clip with gives ``np.clip(values, -bound, bound)`` exactly: the
    dtype, NaN (kept), infinities and signed zeros included; a scalar goes through ``np.clip`` itself."""
    from vecenv.running_mean_std import clip_symmetric as _clip

    rng = np.random.default_rng(3)
    values = np.concatenate(
        [rng.standard_normal(200) * 20, [np.nan, np.inf, -np.inf, -0.0, 0.0, 10.0, -10.0, 0.5, -0.5, 5.0]]
    ).astype(dtype)
    expected = np.clip(values, -bound, bound)
    got = _clip(values.copy(), bound)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected))
    scalar = dtype(-30.0)
    assert _clip(scalar, bound) == np.clip(scalar, -bound, bound)

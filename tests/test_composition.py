"""VecNormalize and VecFrameStack compose in either order, on both backends.

Normalization statistics are frozen (``training=False`` with set mean/var), so normalizing is a fixed
elementwise map ``f``; the expectations are built with numpy from an unwrapped venv stepped with the
same seed and actions.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np

import vecenv
from tests.envs import CounterEnv

N_STACK = 2
MEAN = np.array([0.5, 1.0, 1.5, 0.0])
VAR = np.array([4.0, 1.0, 2.25, 9.0])
EPS = 1e-8


def f(x: np.ndarray) -> np.ndarray:
    """The frozen normalization, computed independently of VecNormalize."""
    return np.clip((x - MEAN) / np.sqrt(VAR + EPS), -10.0, 10.0).astype(np.float32)


def float_counter(offset: int) -> gym.Env:
    """CounterEnv with float32 observations (VecNormalize keeps a Box's dtype, so frames stacked over it
    must be floats: an int64 stack would truncate normalized values, in SB3 as here)."""
    return gym.wrappers.DtypeObservation(CounterEnv(episode_len=3, offset=offset), np.float32)


def env_fns() -> list:
    return [functools.partial(float_counter, i) for i in range(2)]


def frozen(norm: vecenv.VecNormalize) -> vecenv.VecNormalize:
    norm.training = False
    norm.norm_reward = False
    norm.obs_rms.mean = MEAN.copy()
    norm.obs_rms.var = VAR.copy()
    return norm


def raw_rollout(make_venv, backend, steps):
    """Observations, dones and terminal observations of the unwrapped venv."""
    venv = make_venv(backend, env_fns())
    venv.seed(0)
    out = [(venv.reset(), np.zeros(2, bool), [{}, {}])]
    for _ in range(steps):
        obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        out.append((obs, dones, infos))
    return out


def manual_stacks(rollout, transform):
    """Frame stacks (channels-last, last axis) built by hand, with ``transform`` applied to each frame."""
    first = transform(rollout[0][0])
    stack = np.concatenate([np.zeros_like(first), first], axis=-1)
    result = [(stack.copy(), [None, None])]
    for obs, dones, infos in rollout[1:]:
        new = transform(obs)
        terminals = [None, None]
        for i in range(2):
            if dones[i]:
                terminals[i] = np.concatenate([stack[i, 4:], transform(infos[i]["terminal_observation"][None])[0]])
        stack = np.concatenate([stack[:, 4:], new], axis=-1)
        for i in range(2):
            if dones[i]:
                stack[i] = np.concatenate([np.zeros_like(new[i]), new[i]])
        result.append((stack.copy(), terminals))
    return result


def test_normalize_over_frame_stack(make_venv, backend):
    """VecNormalize(VecFrameStack(venv)): obs = f(raw stack) (padding normalized too); terminal_observation
    = f(stacked terminal obs); get_original_obs() = the raw stack."""
    steps = 8
    expected_raw = manual_stacks(raw_rollout(make_venv, backend, steps), lambda x: x.astype(np.float64))
    venv = make_venv(backend, env_fns())
    venv.seed(0)
    norm = frozen(vecenv.VecNormalize(vecenv.VecFrameStack(venv, N_STACK)))
    norm.obs_rms.mean = np.tile(MEAN, N_STACK)
    norm.obs_rms.var = np.tile(VAR, N_STACK)
    g = lambda x: np.clip((x - np.tile(MEAN, N_STACK)) / np.sqrt(np.tile(VAR, N_STACK) + EPS), -10, 10)  # noqa: E731
    obs = norm.reset()
    np.testing.assert_allclose(obs, g(expected_raw[0][0]), rtol=1e-6)
    np.testing.assert_array_equal(norm.get_original_obs(), expected_raw[0][0])
    for stack, terminals in expected_raw[1:]:
        obs, _, dones, infos = norm.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_allclose(obs, g(stack), rtol=1e-6)
        np.testing.assert_array_equal(norm.get_original_obs(), stack)
        for i in range(2):
            assert dones[i] == (terminals[i] is not None)
            if dones[i]:
                np.testing.assert_allclose(infos[i]["terminal_observation"], g(terminals[i]), rtol=1e-6)
    assert any(t is not None for _, ts in expected_raw for t in ts)  # episodes did end


def test_frame_stack_over_normalize(make_venv, backend):
    """VecFrameStack(VecNormalize(venv)): obs = stack of f(raw) with zero padding; terminal_observation =
    previous normalized frames + f(terminal obs); get_original_obs() reaches the raw, unstacked obs."""
    steps = 8
    rollout = raw_rollout(make_venv, backend, steps)
    expected = manual_stacks(rollout, f)
    venv = make_venv(backend, env_fns())
    venv.seed(0)
    norm = frozen(vecenv.VecNormalize(venv))
    stacked = vecenv.VecFrameStack(norm, N_STACK)
    np.testing.assert_allclose(stacked.reset(), expected[0][0], rtol=1e-6)
    for (stack, terminals), (raw_obs, _, _) in zip(expected[1:], rollout[1:], strict=True):
        obs, _, dones, infos = stacked.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_allclose(obs, stack, rtol=1e-6)
        np.testing.assert_array_equal(stacked.get_original_obs(), raw_obs)  # forwarded to VecNormalize
        for i in range(2):
            if dones[i]:
                np.testing.assert_allclose(infos[i]["terminal_observation"], terminals[i], rtol=1e-6)

"""VecExtractDictObs: one key of Dict observations, terminal observations included; clear errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces

from tests.envs import OBS_SPACES, SpaceEnv, space_obs
from vecenv import VecEnvWrapper
from vecenv.wrappers.vec_extract_dict_obs import VecExtractDictObs


def dict_fns(n: int = 2, episode_len: int = 2) -> list:
    """SpaceEnvs with the Dict space ``{"z": Box(2, 3), "a": Discrete(7)}``.

    Env ``i`` emits ``space_obs("dict", 100 * i + t)``.
    """
    return [functools.partial(SpaceEnv, obs_kind="dict", offset=i, episode_len=episode_len) for i in range(n)]


@pytest.mark.parametrize("key", ["z", "a"])
def test_extracts_one_key(backend, make_venv, key):
    """Spaces, reset, step and terminal_observation all reduced to ``key`` (both backends)."""
    venv = VecExtractDictObs(make_venv(backend, dict_fns(2, episode_len=2)), key=key)
    assert venv.key == key
    assert venv.observation_space == OBS_SPACES["dict"]()[key]
    obs = venv.reset()
    expected_dtype = np.float32 if key == "z" else np.int64
    assert obs.dtype == expected_dtype
    np.testing.assert_array_equal(obs, np.stack([space_obs("dict", 100 * i)[key] for i in range(2)]))
    for t in (1, 2, 3):
        obs, rewards, dones, infos = venv.step(np.array([1, 2]))
        np.testing.assert_array_equal(rewards, [1.0, 2.0])
        episode_t = t % 2  # episodes last 2 steps: the obs after step 2 is the first of a new episode
        np.testing.assert_array_equal(obs, np.stack([space_obs("dict", 100 * i + episode_t)[key] for i in range(2)]))
        assert dones.tolist() == [t == 2, t == 2]
        for i, info in enumerate(infos):
            if t == 2:
                terminal = info["terminal_observation"]
                np.testing.assert_array_equal(terminal, space_obs("dict", 100 * i + 2)[key])
                assert not isinstance(terminal, dict)
            else:
                assert "terminal_observation" not in info


def test_non_dict_space_is_a_type_error(make_venv):
    base = make_venv("dummy", [functools.partial(SpaceEnv, obs_kind="box")])
    with pytest.raises(TypeError, match=r"needs a venv with a Dict observation space, got Box\("):
        VecExtractDictObs(base, key="z")
    tuple_base = make_venv("dummy", [functools.partial(SpaceEnv, obs_kind="tuple")])
    with pytest.raises(TypeError, match=r"got Tuple\("):
        VecExtractDictObs(tuple_base, key="z")


def test_missing_key_lists_the_available_keys(make_venv):
    base = make_venv("dummy", dict_fns(1))
    with pytest.raises(KeyError, match=r"key 'b' is not in the Dict observation space; available keys: 'z', 'a'"):
        VecExtractDictObs(base, key="b")


def test_wrapping_twice_is_an_error(make_venv):
    """The extracted space is no longer a Dict: wrapping again explains that."""
    venv = VecExtractDictObs(make_venv("dummy", dict_fns(1)), key="z")
    assert isinstance(venv.observation_space, spaces.Box)
    with pytest.raises(TypeError, match="Dict observation space"):
        VecExtractDictObs(venv, key="z")


class FirstValue(VecEnvWrapper):
    """Claims the Dict space of its venv but returns the first dict entry only (a broken wrapper)."""

    def reset(self):
        return next(iter(self.venv.reset().values()))

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        return next(iter(obs.values())), rewards, dones, infos


def test_non_dict_observations_are_a_type_error(make_venv):
    venv = VecExtractDictObs(FirstValue(make_venv("dummy", dict_fns(1))), key="z")
    with pytest.raises(TypeError, match="expected dict observations from FirstValue, got ndarray"):
        venv.reset()
    venv.venv.reset()
    with pytest.raises(TypeError, match="expected dict observations"):
        venv.step(np.array([0]))

"""VecEnvWrapper: forwarding to the wrapped venv, ``unwrapped``, and SB3's recursive attribute lookup rules."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

import vecenv
from tests.envs import CounterEnv, MarkerWrapper
from tests.reference import ReferenceVecEnv, assert_infos_equal


def counter_fns(n: int = 2, **kwargs) -> list:
    """Factories of ``n`` counter envs, env ``i`` with ``offset=i``."""
    return [functools.partial(CounterEnv, offset=i, **kwargs) for i in range(n)]


class PassThrough(vecenv.VecEnvWrapper):
    """Forwards reset and step_wait unchanged."""

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


class DoubleObs(vecenv.VecEnvWrapper):
    """Doubles observations, terminal observations included."""

    def reset(self):
        return self.venv.reset() * 2

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = info["terminal_observation"] * 2
        return obs * 2, rewards, dones, infos


class WrapperA(PassThrough):
    """Defines ``var_a`` on the instance."""

    def __init__(self, venv):
        super().__init__(venv)
        self.var_a = "a"


class WrapperB(PassThrough):
    """Defines ``var_b`` on the instance and methods ``func_b`` / ``whoami`` on the class."""

    def __init__(self, venv):
        super().__init__(venv)
        self.var_b = "b"

    def func_b(self):
        return self.var_b

    def whoami(self):
        return type(self)


class WrapperBB(WrapperB):
    """A subclass of WrapperB adding ``var_bb``."""

    def __init__(self, venv):
        super().__init__(venv)
        self.var_bb = "bb"


def test_wrapper_steps_like_the_venv(backend, make_venv):
    """A pass-through wrapper returns exactly what single envs stepped by hand return."""
    venv = PassThrough(make_venv(backend, counter_fns(2, episode_len=2)))
    reference = ReferenceVecEnv(counter_fns(2, episode_len=2))
    venv.seed(4)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=4))
    for _ in range(5):
        obs, rewards, dones, infos = venv.step(np.array([1, 2]))
        exp = reference.step([1, 2])
        np.testing.assert_array_equal(obs, exp[0])
        np.testing.assert_array_equal(rewards, exp[1])
        np.testing.assert_array_equal(dones, exp[2])
        assert_infos_equal(infos, exp[3])


def test_wrapper_transforms_obs(backend, make_venv):
    """A transforming wrapper's step() goes through its step_wait, terminal_observation included."""
    venv = DoubleObs(make_venv(backend, counter_fns(2, episode_len=1)))
    reference = ReferenceVecEnv(counter_fns(2, episode_len=1))
    venv.seed(0)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=0) * 2)
    obs, _, dones, infos = venv.step(np.array([0, 0]))
    exp = reference.step([0, 0])
    np.testing.assert_array_equal(obs, exp[0] * 2)
    assert dones.tolist() == [True, False]
    np.testing.assert_array_equal(infos[0]["terminal_observation"], exp[3][0]["terminal_observation"] * 2)


def test_wrapper_spaces_and_overrides(make_venv):
    """num_envs and spaces come from the venv unless given; given spaces replace them."""
    base = make_venv("dummy", counter_fns(3))
    wrapper = PassThrough(base)
    assert wrapper.num_envs == 3
    assert wrapper.observation_space == base.observation_space
    assert wrapper.action_space == base.action_space
    new_obs_space = spaces.Box(0, 1, (7,), np.float32)
    new_action_space = spaces.Discrete(9)
    wrapper2 = PassThrough(base, observation_space=new_obs_space, action_space=new_action_space)
    assert wrapper2.observation_space == new_obs_space
    assert wrapper2.action_space == new_action_space
    assert wrapper2.num_envs == 3


def test_wrapper_forwards_env_calls(backend, make_venv):
    """get_attr / set_attr / has_attr / env_method / env_is_wrapped / seed / set_options go to the venv."""
    fns = [functools.partial(CounterEnv, offset=0), lambda: MarkerWrapper(TimeLimit(CounterEnv(offset=1), 10))]
    base = make_venv(backend, fns)
    wrapper = WrapperA(PassThrough(base))
    assert wrapper.get_attr("offset") == [0, 1]
    assert wrapper.get_attr("offset", indices=-1) == [1]
    wrapper.set_attr("custom_attr", "w", indices=[0])
    assert base.get_attr("custom_attr") == ["w", "custom-1"]
    assert wrapper.has_attr("offset") is True
    assert wrapper.has_attr("missing") is False
    assert wrapper.env_method("add", 1, b=2, indices=[1, 0]) == [112, 12]
    assert wrapper.env_is_wrapped(TimeLimit) == [False, True]
    assert wrapper.env_is_wrapped(MarkerWrapper, indices=1) == [True]
    assert wrapper.seed(20) == [20, 21]
    wrapper.set_options({"start_t": 2})
    obs = wrapper.reset()
    assert base.get_attr("last_seed") == [20, 21]
    np.testing.assert_array_equal(obs[:, 2], [2, 2])


def test_wrapper_forwards_render(backend, make_venv):
    """render() / get_images() go to the venv; render_mode and metadata render modes follow it."""
    base = make_venv(backend, counter_fns(2, render_mode="rgb_array"))
    wrapper = PassThrough(base)
    assert wrapper.render_mode == "rgb_array"
    base.reset()
    images = wrapper.get_images()
    np.testing.assert_array_equal(np.stack(images), np.stack(base.get_images()))
    np.testing.assert_array_equal(wrapper.render(), vecenv.tile_images(images))
    np.testing.assert_array_equal(wrapper.render("rgb_array"), vecenv.tile_images(images))


def test_wrapper_close_closes_venv(backend, make_venv):
    """close() on the wrapper closes the wrapped venv."""
    base = make_venv(backend, counter_fns(2))
    wrapper = PassThrough(PassThrough(base))
    wrapper.close()
    with pytest.raises(vecenv.ClosedVecEnvError):
        base.reset()
    with pytest.raises(vecenv.ClosedVecEnvError):
        wrapper.reset()


def test_unwrapped(make_venv):
    """unwrapped returns the base venv through any number of wrappers (and itself for a base venv)."""
    base = make_venv("dummy", counter_fns(2))
    assert base.unwrapped is base
    assert PassThrough(base).unwrapped is base
    assert WrapperA(WrapperBB(PassThrough(base))).unwrapped is base


def test_getattr_finds_attributes_down_the_stack(make_venv):
    """Unknown attributes are looked up level by level; methods are bound to the level that defines them."""
    base = make_venv("dummy", counter_fns(2))
    base.base_only = 7
    wrapped = WrapperA(WrapperBB(base))
    assert wrapped.var_a == "a"
    assert wrapped.var_b == "b"
    assert wrapped.var_bb == "bb"
    assert wrapped.func_b() == "b"
    assert wrapped.whoami() is WrapperBB
    assert wrapped.base_only == 7
    assert wrapped.envs is base.envs
    with pytest.raises(AttributeError):
        _ = wrapped.nonexistent_attribute


def test_getattr_ambiguous_attribute(make_venv):
    """An attribute found on one wrapper level and again further down raises SB3's "ambiguous" AttributeError."""
    base = make_venv("dummy", counter_fns(2))
    double = WrapperA(WrapperB(WrapperB(base)))
    assert double.var_a == "a"  # defined on the outermost level: plain attribute access
    with pytest.raises(AttributeError, match=r"ambiguous and hides attribute"):
        _ = double.var_b
    with pytest.raises(AttributeError, match=r"ambiguous and hides attribute"):
        _ = double.func_b
    # a wrapper attribute that the base venv also has is ambiguous too
    base.var_bb = "base"
    with pytest.raises(AttributeError, match=r"ambiguous and hides attribute"):
        _ = WrapperA(WrapperBB(base)).var_bb
    # but reading it on the level that defines it is fine
    assert WrapperBB(base).var_bb == "bb"


@pytest.mark.parametrize(
    ("dones", "expected"),
    [
        (np.zeros(8, dtype=bool), []),
        (np.array([False, True, False, True]), [1, 3]),
        (np.array([True]), [0]),
        (np.zeros(0, dtype=bool), []),
        (np.array([0, 2, 0, 1]), [1, 3]),  # not bools: any non-zero counts, as np.flatnonzero
        ([False, True, True], [1, 2]),
        (np.ones((4,), dtype=bool)[::2], [0, 1]),  # a strided view
    ],
)
def test_done_indices_are_the_true_flags_as_ints(dones, expected):
    from vecenv.base import done_indices

    got = done_indices(dones)
    assert got == expected == np.flatnonzero(dones).tolist()
    assert all(type(i) is int for i in got)

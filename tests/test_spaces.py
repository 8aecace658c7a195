"""Observation and action spaces: batching, dtypes, key order, nesting errors, and the SB3 ``util`` helpers."""

from __future__ import annotations

import functools
import multiprocessing as mp
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from tests.envs import OBS_SPACES, InPlaceSequenceEnv, SpaceEnv, action_value, space_obs

FLAT_KINDS = ["box", "image", "discrete", "multidiscrete", "multibinary"]


def space_fns(obs_kind: str, action_kind: str = "discrete", n: int = 2, episode_len: int = 3) -> list:
    """Factories of ``n`` SpaceEnvs, env ``i`` with ``offset=i``."""
    return [
        functools.partial(SpaceEnv, obs_kind=obs_kind, action_kind=action_kind, offset=i, episode_len=episode_len)
        for i in range(n)
    ]


def expected_batch(kind: str, values: list[int]):
    """Stack ``space_obs(kind, v)`` for each value with numpy, in the space's structure and key order."""
    space = OBS_SPACES[kind]()
    singles = [space_obs(kind, v) for v in values]
    if isinstance(space, spaces.Dict):
        return {key: np.stack([np.asarray(s[key], dtype=sub.dtype) for s in singles]) for key, sub in space.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(
            np.stack([np.asarray(s[k], dtype=sub.dtype) for s in singles]) for k, sub in enumerate(space.spaces)
        )
    return np.stack([np.asarray(s, dtype=space.dtype) for s in singles])


def assert_batch_equal(actual, expected, space: spaces.Space, num_envs: int) -> None:
    """Same structure (dict keys in order / tuple length), shapes (num_envs, *shape), dtypes and values."""
    if isinstance(space, spaces.Dict):
        assert isinstance(actual, dict)
        assert list(actual.keys()) == list(space.spaces.keys())
        for key, sub in space.spaces.items():
            assert_batch_equal(actual[key], expected[key], sub, num_envs)
    elif isinstance(space, spaces.Tuple):
        assert isinstance(actual, tuple) and len(actual) == len(space.spaces)
        for got, want, sub in zip(actual, expected, space.spaces, strict=True):
            assert_batch_equal(got, want, sub, num_envs)
    else:
        assert isinstance(actual, np.ndarray)
        assert actual.shape == (num_envs, *space.shape)
        assert actual.dtype == space.dtype
        np.testing.assert_array_equal(actual, expected)


def assert_single_equal(actual, expected) -> None:
    """One env's observation (terminal_observation) equals the expected one, leaf by leaf."""
    if isinstance(expected, dict):
        assert set(actual.keys()) == set(expected.keys())
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key])
    elif isinstance(expected, tuple):
        assert len(actual) == len(expected)
        for got, want in zip(actual, expected, strict=True):
            np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("kind", [*FLAT_KINDS, "dict", "tuple"])
def test_observation_batching(backend, make_venv, kind):
    """Obs are batched to (num_envs, *shape) in the space's dtype; Dict in the space's key order; Tuple as tuple."""
    venv = make_venv(backend, space_fns(kind, n=3, episode_len=2))
    space = OBS_SPACES[kind]()
    assert venv.observation_space == space
    first = venv.reset()
    assert_batch_equal(first, expected_batch(kind, [0, 100, 200]), space, 3)
    second, _, dones, _ = venv.step(np.array([0, 1, 2]))
    assert_batch_equal(second, expected_batch(kind, [1, 101, 201]), space, 3)
    assert not dones.any()
    third, _, dones, infos = venv.step(np.array([0, 1, 2]))
    assert dones.all()
    assert_batch_equal(third, expected_batch(kind, [0, 100, 200]), space, 3)
    for i, info in enumerate(infos):
        assert_single_equal(info["terminal_observation"], space_obs(kind, 100 * i + 2))
    venv.step(np.array([0, 1, 2]))
    # batches returned earlier are the caller's: later steps did not change them
    assert_batch_equal(first, expected_batch(kind, [0, 100, 200]), space, 3)
    assert_batch_equal(second, expected_batch(kind, [1, 101, 201]), space, 3)


def test_dict_obs_key_order_from_space(backend, make_venv):
    """The env returns {"a", "z"} but the space orders ("z", "a"): the batch follows the space."""
    venv = make_venv(backend, space_fns("dict"))
    assert list(venv.observation_space.spaces.keys()) == ["z", "a"]
    assert list(space_obs("dict", 0).keys()) == ["a", "z"]
    assert list(venv.reset().keys()) == ["z", "a"]
    assert list(venv.step(np.array([0, 0]))[0].keys()) == ["z", "a"]


def test_dict_obs_returned_copies(backend, make_venv):
    """Dict observations returned by step are new arrays: later steps do not change them."""
    venv = make_venv(backend, space_fns("dict", episode_len=5))
    first = venv.reset()
    second = venv.step(np.array([0, 0]))[0]
    venv.step(np.array([0, 0]))
    assert_batch_equal(first, expected_batch("dict", [0, 100]), OBS_SPACES["dict"](), 2)
    assert_batch_equal(second, expected_batch("dict", [1, 101]), OBS_SPACES["dict"](), 2)


@pytest.mark.parametrize("kind", ["nested_dict", "nested_tuple", "dict_in_tuple"])
def test_nested_spaces_rejected(backend, kind):
    """Dict/Tuple inside Dict/Tuple raises SB3's NotImplementedError at construction (no worker left behind)."""
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(NotImplementedError, match=r"Nested observation spaces are not supported"):
        if backend == "dummy":
            vecenv.DummyVecEnv(space_fns(kind))
        else:
            vecenv.SubprocVecEnv(space_fns(kind))
    leftovers = [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")]
    assert leftovers == []


# --- action spaces -----------------------------------------------------------------------------------------


def test_box_actions(backend, make_venv):
    """Box actions (num_envs, *shape) reach env i as row i."""
    venv = make_venv(backend, space_fns("box", action_kind="box"))
    venv.reset()
    actions = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    _, rewards, _, _ = venv.step(actions)
    np.testing.assert_array_equal(rewards, [12.0, 34.0])
    for got, want in zip(venv.get_attr("last_action"), actions, strict=True):
        np.testing.assert_array_equal(got, want)


def test_dict_actions_as_list(backend, make_venv):
    """Dict action space: a list with one dict action per env."""
    venv = make_venv(backend, space_fns("box", action_kind="dict"))
    venv.reset()
    actions = [
        {"a": 1, "b": np.array([2.0, 3.0], dtype=np.float32)},
        {"a": 2, "b": np.array([4.0, 5.0], dtype=np.float32)},
    ]
    _, rewards, _, _ = venv.step(actions)
    np.testing.assert_array_equal(rewards, [action_value("dict", a) for a in actions])
    np.testing.assert_array_equal(rewards, [123.0, 245.0])
    for got, want in zip(venv.get_attr("last_action"), actions, strict=True):
        assert int(got["a"]) == want["a"]
        np.testing.assert_array_equal(got["b"], want["b"])


def test_dict_actions_as_dict_of_batches(backend, make_venv):
    """Dict action space: a dict of batched arrays; env i receives the i-th entry of each key."""
    venv = make_venv(backend, space_fns("box", action_kind="dict"))
    venv.reset()
    actions = {"a": np.array([1, 2]), "b": np.array([[2.0, 3.0], [4.0, 5.0]], dtype=np.float32)}
    _, rewards, _, _ = venv.step(actions)
    np.testing.assert_array_equal(rewards, [123.0, 245.0])
    last = venv.get_attr("last_action")
    assert [int(a["a"]) for a in last] == [1, 2]
    np.testing.assert_array_equal(np.stack([a["b"] for a in last]), actions["b"])


def test_tuple_actions_as_list(backend, make_venv):
    """Tuple action space: a list with one tuple action per env."""
    venv = make_venv(backend, space_fns("box", action_kind="tuple"))
    venv.reset()
    actions = [(2, np.array([1.0, 1.0], dtype=np.float32)), (0, np.array([7.0, 8.0], dtype=np.float32))]
    _, rewards, _, _ = venv.step(actions)
    np.testing.assert_array_equal(rewards, [211.0, 78.0])
    last = venv.get_attr("last_action")
    assert [int(a[0]) for a in last] == [2, 0]
    np.testing.assert_array_equal(last[1][1], [7.0, 8.0])


# --- obs_space_info / dict_to_obs ------------------------------------------------------------------------


def test_obs_space_info_box():
    """Box -> keys [None], its shape and dtype."""
    space = spaces.Box(0, 1, (3, 2), np.float32)
    assert vecenv.obs_space_info(space) == ([None], {None: (3, 2)}, {None: np.dtype(np.float32)})
    assert vecenv.obs_space_info(spaces.Discrete(4)) == ([None], {None: ()}, {None: np.dtype(np.int64)})


def test_obs_space_info_dict_keeps_key_order():
    """Dict -> its keys in the space's order, with each sub-space's shape and dtype."""
    space = spaces.Dict(OrderedDict([("z", spaces.Box(0, 1, (2,), np.float32)), ("a", spaces.MultiBinary(3))]))
    keys, shapes, dtypes = vecenv.obs_space_info(space)
    assert keys == ["z", "a"]
    assert shapes == {"z": (2,), "a": (3,)}
    assert dtypes == {"z": np.dtype(np.float32), "a": np.dtype(np.int8)}


def test_obs_space_info_tuple():
    """Tuple -> keys 0..n-1."""
    space = spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (4,), np.float64)))
    assert vecenv.obs_space_info(space) == (
        [0, 1],
        {0: (), 1: (4,)},
        {0: np.dtype(np.int64), 1: np.dtype(np.float64)},
    )


@pytest.mark.parametrize("kind", ["nested_dict", "nested_tuple", "dict_in_tuple"])
def test_obs_space_info_nested(kind):
    """Nested Dict/Tuple spaces raise SB3's NotImplementedError."""
    with pytest.raises(NotImplementedError, match=r"Nested observation spaces are not supported"):
        vecenv.obs_space_info(OBS_SPACES[kind]())


def test_dict_to_obs():
    """Dict -> the dict itself; Tuple -> tuple by index; other -> obs_dict[None]."""
    arr = np.arange(4)
    assert vecenv.dict_to_obs(spaces.Box(0, 1, (2,)), {None: arr}) is arr
    dict_space = spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(3)})
    obs_dict = {"a": arr, "b": arr + 1}
    assert vecenv.dict_to_obs(dict_space, obs_dict) is obs_dict
    tuple_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))
    result = vecenv.dict_to_obs(tuple_space, {1: arr + 1, 0: arr})
    assert isinstance(result, tuple) and result[0] is arr
    np.testing.assert_array_equal(result[1], arr + 1)


def test_dict_to_obs_rejects_mismatch():
    """dict_to_obs asserts the keys fit the space, as SB3 does."""
    with pytest.raises(AssertionError):
        vecenv.dict_to_obs(spaces.Box(0, 1, (2,)), {None: np.zeros(2), "x": np.zeros(2)})
    with pytest.raises(AssertionError):
        vecenv.dict_to_obs(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), {0: np.zeros(2)})


def oneof_obs(offset: int, t: int) -> tuple:
    """OneOfEnv's observation: a Discrete(7) choice at even t, a Box(2,) choice at odd t."""
    if t % 2 == 0:
        return (0, np.int64((offset + t) % 7))
    return (1, np.array([offset, t], dtype=np.float32))


class OneOfEnv(gym.Env):
    """Observations of a ``OneOf(Discrete(7), Box(2,))`` space, a plain function of ``offset`` and ``t``."""

    observation_space = spaces.OneOf((spaces.Discrete(7), spaces.Box(-1e3, 1e3, (2,), np.float32)))
    action_space = spaces.Discrete(2)

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return oneof_obs(self.offset, 0), {}

    def step(self, action):
        self.t += 1
        return oneof_obs(self.offset, self.t), 0.0, self.t >= 3, False, {}


def assert_oneof_batch(batch, offsets: list[int], t: int) -> None:
    assert isinstance(batch, np.ndarray) and batch.dtype == np.dtype(object) and batch.shape == (len(offsets),)
    for got, offset in zip(batch, offsets, strict=True):
        want = oneof_obs(offset, t)
        assert isinstance(got, tuple) and got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("shared_memory", [True, False])
def test_oneof_observations_batch(any_backend, shared_memory, make_venv):
    """A OneOf observation space batches as an object array (num_envs,) of the envs' (index, value) choices, on every
    backend (in worker processes they travel pickled, with or without shared memory for the rest)."""
    if not shared_memory and not any_backend.startswith("subproc"):
        pytest.skip("shared_memory is SubprocVecEnv's option")
    fns = [functools.partial(OneOfEnv, offset=10 * i) for i in range(3)]
    if shared_memory:
        venv = make_venv(any_backend, fns)
    else:
        method = any_backend.removeprefix("subproc").removeprefix("-") or None
        venv = vecenv.SubprocVecEnv(fns, start_method=method, shared_memory=False)
    try:
        assert venv.observation_space == OneOfEnv.observation_space
        assert_oneof_batch(venv.reset(), [0, 10, 20], 0)
        assert_oneof_batch(venv.step(np.array([0, 1, 0]))[0], [0, 10, 20], 1)
        assert_oneof_batch(venv.step(np.array([0, 1, 0]))[0], [0, 10, 20], 2)
        obs, _, dones, infos = venv.step(np.array([0, 1, 0]))  # t=3: every episode ends
        assert dones.all()
        assert_oneof_batch(obs, [0, 10, 20], 0)
        for i, info in enumerate(infos):
            want = oneof_obs(10 * i, 3)
            assert info["terminal_observation"][0] == want[0]
            np.testing.assert_array_equal(info["terminal_observation"][1], want[1])
    finally:
        venv.close()


def test_obs_space_info_oneof():
    """OneOf is one key (its batch is one object array), not a structured space SB3's helper refuses."""
    assert vecenv.obs_space_info(OneOfEnv.observation_space) == ([None], {None: None}, {None: None})


OBJECT_BATCH_LAYOUTS: dict[str, Any] = {
    "dummy": vecenv.DummyVecEnv,
    "subproc": lambda fns: vecenv.SubprocVecEnv(fns, n_workers=2),
    "parent_envs": lambda fns: vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=1),
}


@pytest.mark.parametrize("layout", sorted(OBJECT_BATCH_LAYOUTS))
def test_observations_batched_as_objects_stay_as_returned_when_the_env_changes_its_own(layout: str) -> None:
    """An env whose observation holds an array it updates in place (a Sequence space, batched as an object
    array): what reset() and each step returned keeps the values of that moment, in every layout (the envs of
    worker processes hand theirs over pickled; those of the calling process, copied)."""
    venv = OBJECT_BATCH_LAYOUTS[layout]([InPlaceSequenceEnv, InPlaceSequenceEnv])
    try:
        kept = [venv.reset()]
        for _ in range(2):
            kept.append(venv.step(np.zeros(2, dtype=np.int64))[0])
    finally:
        venv.close()
    for t, obs in enumerate(kept):
        for i in range(2):
            np.testing.assert_array_equal(obs[i][0], np.full(2, t, dtype=np.float32))

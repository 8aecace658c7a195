"""Step / reset / autoreset, seeding, options, attribute access and rendering, on every backend.

Expectations come from exact counter values (:class:`tests.envs.CounterEnv`) or from single envs stepped
by hand (:class:`tests.reference.ReferenceVecEnv`), never from vecenv itself.
"""

from __future__ import annotations

import copy
import functools
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit
from hypothesis import given, settings
from hypothesis import strategies as st

import vecenv
from tests.conftest import START_METHODS, build_venv
from tests.envs import FRAME_SHAPE, BufferReuseEnv, CounterEnv, MarkerWrapper, OtherWrapper, SharedInfoEnv
from tests.reference import ReferenceVecEnv, assert_infos_equal, assert_step_equal
from vecenv.env_group import EnvGroup


def counter_fns(n: int = 2, **kwargs) -> list:
    """Factories of ``n`` counter envs, env ``i`` with ``offset=i``."""
    return [functools.partial(CounterEnv, offset=i, **kwargs) for i in range(n)]


def wrapped_counter(offset: int) -> gym.Env:
    """A counter env inside ``MarkerWrapper(TimeLimit(...))``."""
    env = TimeLimit(CounterEnv(offset=offset, episode_len=50), max_episode_steps=100)
    return MarkerWrapper(env, marker=f"m{offset}")


# --- reset, step and autoreset --------------------------------------------------------------------------


def test_reset_matches_single_envs(any_backend, make_venv):
    """reset() stacks each env's first obs, int64 (num_envs, 4), equal to envs reset by hand with seed + i."""
    venv = make_venv(any_backend, counter_fns(2))
    assert venv.num_envs == 2
    assert venv.seed(7) == [7, 8]
    obs = venv.reset()
    expected = ReferenceVecEnv(counter_fns(2)).reset(seed=7)
    assert obs.shape == (2, 4)
    assert obs.dtype == np.int64
    np.testing.assert_array_equal(obs, expected)


def test_autoreset_exact_counters(any_backend, make_venv):
    """Done envs reset in the same step: new-episode obs returned, last obs in terminal_observation."""
    venv = make_venv(any_backend, counter_fns(2, episode_len=2))  # env 0 ends at t=2, env 1 at t=3
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, :3], [[0, 0, 0], [1, 0, 0]])
    actions = np.array([1, 2])
    # (obs[:, :3] after the step, dones, rewards = action + 0.5 * t, terminal [offset, episode, t] or None)
    expected_steps = [
        ([[0, 0, 1], [1, 0, 1]], [False, False], [1.5, 2.5], [None, None]),
        ([[0, 1, 0], [1, 0, 2]], [True, False], [2.0, 3.0], [[0, 0, 2], None]),
        ([[0, 1, 1], [1, 1, 0]], [False, True], [1.5, 3.5], [None, [1, 0, 3]]),
        ([[0, 2, 0], [1, 1, 1]], [True, False], [2.0, 2.5], [[0, 1, 2], None]),
    ]
    for step_obs, step_dones, step_rewards, terminals in expected_steps:
        obs, rewards, dones, infos = venv.step(actions)
        np.testing.assert_array_equal(obs[:, :3], step_obs)
        np.testing.assert_array_equal(dones, step_dones)
        np.testing.assert_array_equal(rewards, np.array(step_rewards, dtype=np.float32))
        for i, terminal in enumerate(terminals):
            assert "TimeLimit.truncated" in infos[i] and not infos[i]["TimeLimit.truncated"]
            if terminal is None:
                assert "terminal_observation" not in infos[i]
                assert infos[i]["t"] == step_obs[i][2]
            else:
                np.testing.assert_array_equal(infos[i]["terminal_observation"][:3], terminal)
                assert infos[i]["t"] == terminal[2]
    assert [info["episode"] for info in venv.reset_infos] == [2, 1]


@pytest.mark.parametrize("end", ["terminate", "truncate", "both"])
def test_truncation_flag(any_backend, make_venv, end):
    """dones = terminated | truncated; info["TimeLimit.truncated"] = truncated and not terminated, on every step."""
    venv = make_venv(any_backend, counter_fns(2, episode_len=2, end=end))
    venv.reset()
    flags, dones_seen = [], []
    for _ in range(3):
        _, _, dones, infos = venv.step(np.array([0, 0]))
        flags.append([info["TimeLimit.truncated"] for info in infos])
        dones_seen.append(dones.tolist())
    assert dones_seen == [[False, False], [True, False], [False, True]]
    truncated_only = end == "truncate"
    assert flags == [[False, False], [truncated_only, False], [False, truncated_only]]


def test_matches_reference_rollout(any_backend, make_venv):
    """Over many episodes, obs / rewards / dones / infos / reset_infos equal single envs stepped by hand."""
    fns = [
        functools.partial(CounterEnv, offset=0, episode_len=3, end="terminate"),
        functools.partial(CounterEnv, offset=1, episode_len=2, end="truncate"),
        functools.partial(CounterEnv, offset=2, episode_len=1, end="both"),
    ]
    venv = make_venv(any_backend, fns)
    reference = ReferenceVecEnv(fns)
    venv.seed(123)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=123))
    assert_infos_equal(venv.reset_infos, reference.reset_infos)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.integers(0, 3, size=3)
        assert_step_equal(venv, reference, actions)


@settings(max_examples=40, deadline=None, database=None)
@given(
    ends=st.lists(st.sampled_from(["terminate", "truncate", "both"]), min_size=1, max_size=3),
    episode_len=st.integers(1, 4),
    seed=st.integers(0, 2**31),
    n_steps=st.integers(1, 25),
)
def test_dummy_matches_reference_property(ends, episode_len, seed, n_steps):
    """For any episode lengths, end kinds, seeds and actions, DummyVecEnv equals single envs stepped by hand."""
    fns = [functools.partial(CounterEnv, offset=i, episode_len=episode_len, end=end) for i, end in enumerate(ends)]
    venv = vecenv.DummyVecEnv(fns)
    reference = ReferenceVecEnv(fns)
    try:
        venv.seed(seed)
        np.testing.assert_array_equal(venv.reset(), reference.reset(seed=seed))
        rng = np.random.default_rng(seed)
        for _ in range(n_steps):
            actions = rng.integers(0, 3, size=len(fns))
            assert_step_equal(venv, reference, actions)
    finally:
        venv.close()


def test_step_return_types(backend, make_venv):
    """rewards are float32 (num_envs,), dones bool (num_envs,), infos one dict per env."""
    venv = make_venv(backend, counter_fns(3))
    venv.reset()
    obs, rewards, dones, infos = venv.step(np.array([0, 1, 2]))
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 4) and obs.dtype == np.int64
    assert isinstance(rewards, np.ndarray) and rewards.shape == (3,) and rewards.dtype == np.float32
    assert isinstance(dones, np.ndarray) and dones.shape == (3,) and dones.dtype == np.bool_
    assert isinstance(infos, list) and len(infos) == 3
    assert all(isinstance(info, dict) for info in infos)


def test_returned_arrays_are_copies(backend, make_venv):
    """Stepping again (through autoresets) never changes obs / rewards / dones returned earlier."""
    venv = make_venv(backend, counter_fns(2, episode_len=2))
    reference = ReferenceVecEnv(counter_fns(2, episode_len=2))
    venv.seed(1)
    returned = [(venv.reset(),)]
    expected = [(reference.reset(seed=1),)]
    for _ in range(5):
        returned.append(venv.step(np.array([1, 2]))[:3])
        expected.append(reference.step([1, 2])[:3])
    for got, want in zip(returned, expected, strict=True):
        for got_array, want_array in zip(got, want, strict=True):
            np.testing.assert_array_equal(got_array, want_array)
    obs_arrays = [entry[0] for entry in returned]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(obs_arrays) for b in obs_arrays[i + 1 :])


def test_mutating_returned_obs_does_not_leak(backend, make_venv):
    """Writing into a returned obs / rewards / dones array does not change what the next step returns."""
    venv = make_venv(backend, counter_fns(2, episode_len=5))
    reference = ReferenceVecEnv(counter_fns(2, episode_len=5))
    venv.seed(3)
    obs = venv.reset()
    reference.reset(seed=3)
    for _ in range(3):
        obs[:] = -99
        obs, rewards, dones, _ = venv.step(np.array([2, 0]))
        exp_obs, exp_rewards, exp_dones, _ = reference.step([2, 0])
        np.testing.assert_array_equal(obs, exp_obs)
        np.testing.assert_array_equal(rewards, exp_rewards)
        np.testing.assert_array_equal(dones, exp_dones)
        rewards[:] = -5
        dones[:] = True


def test_terminal_observation_is_a_copy(backend, make_venv):
    """With an env that reuses its obs buffer, terminal_observation and returned obs keep their values."""
    venv = make_venv(backend, [BufferReuseEnv, BufferReuseEnv])
    first = venv.reset()
    obs1, _, _, _ = venv.step(np.array([0, 0]))
    obs2, _, dones2, infos2 = venv.step(np.array([0, 0]))  # t=2: done, reset to t=0
    obs3, _, _, _ = venv.step(np.array([0, 0]))
    obs4, _, _, _ = venv.step(np.array([0, 0]))
    assert dones2.tolist() == [True, True]
    np.testing.assert_array_equal(first, [[0, 0], [0, 0]])
    np.testing.assert_array_equal(obs1, [[1, 1], [1, 1]])
    np.testing.assert_array_equal(obs2, [[0, 0], [0, 0]])
    np.testing.assert_array_equal(obs3, [[1, 1], [1, 1]])
    np.testing.assert_array_equal(obs4, [[0, 0], [0, 0]])
    for info in infos2:
        np.testing.assert_array_equal(info["terminal_observation"], [2, 2])


def test_infos_are_copies(backend, make_venv):
    """Arrays inside returned infos are not the env's live objects (SB3 deep-copies infos)."""
    venv = make_venv(backend, [BufferReuseEnv, BufferReuseEnv])
    venv.reset()
    _, _, _, infos1 = venv.step(np.array([0, 0]))  # the env's buffer holds [1, 1]
    _, _, dones, infos2 = venv.step(np.array([0, 0]))  # the env writes [2, 2], then [0, 0] at the autoreset
    assert dones.tolist() == [True, True]
    for info in infos1:
        np.testing.assert_array_equal(info["buf"], [1, 1])
    for info in infos2:
        np.testing.assert_array_equal(info["terminal_observation"], [2, 2])


def test_infos_are_deep_copies_keeping_shared_values(backend, make_venv):
    """Infos are what ``deepcopy`` of the env's info gives (SB3): dicts and arrays the env mutates later keep
    the step's values, a dict under two keys stays one dict, an array keeps its memory order."""
    venv = make_venv(backend, [SharedInfoEnv, SharedInfoEnv])
    venv.reset()
    steps = [venv.step(np.array([0, 0])) for _ in range(4)]  # t = 1, 2, 3 (truncated, reset to 0), 1
    for t, (_, _, dones, infos) in zip([1, 2, 3, 1], steps, strict=True):
        assert dones.tolist() == [t == 3] * 2
        for info in infos:
            assert info["stats"] == {"t": t, "half": t / 2}
            assert info["alias"] is info["stats"]
            np.testing.assert_array_equal(info["grid"], np.full((2, 3), float(t)))
            assert info["grid"].flags.f_contiguous
            assert info["plain"] == 7
            assert info.get("log") == ({"seen": [t]} if t % 2 else None)
            assert info["TimeLimit.truncated"] is (t == 3)


class _Key:
    """A hashable key object: deepcopy copies it."""


def _info_cases() -> list[dict]:
    shared = {"r": 1.0}
    return [
        {"episode": {"r": 2.0, "l": 3, "t": 0.5}, "alias": shared, "again": shared},
        {"grid": np.arange(6.0).reshape(2, 3, order="F"), "view": np.arange(4)[::2]},
        {"keyed": {_Key(): 1}},
        {"ordered": OrderedDict(a=1)},
        {"masked": np.ma.zeros(2)},
        {"objects": np.array([[[1]], None], dtype=object)[:1]},
        OrderedDict(a=np.zeros(1)),
    ]


@pytest.mark.parametrize("case", range(len(_info_cases())))
def test_info_copy_matches_deepcopy(case):
    """A step's info has the structure ``deepcopy`` of the env's info has (SB3): the same types, the same objects
    shared, nothing shared with the env, arrays in the same memory order."""
    env_info = _info_cases()[case]

    class InfoEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, dtype=np.float32), {}

        def step(self, action):
            return np.zeros(1, dtype=np.float32), 0.0, False, False, env_info

    group = EnvGroup([InfoEnv], [0])
    group.reset(([None], [{}]))
    (info,), _ = group.step(np.zeros(1, dtype=np.int64))
    expected = copy.deepcopy(env_info)
    expected["TimeLimit.truncated"] = False

    def shape(value):  # types, memory orders and keys, with the objects shared within one info numbered
        if isinstance(value, np.ndarray):
            return type(value), value.dtype, value.shape, value.flags.f_contiguous, value.tolist()
        if isinstance(value, dict):
            return type(value), [(type(k), shape(v)) for k, v in value.items()]
        return type(value), value

    assert type(info) is type(expected)
    assert [(k, shape(v)) for k, v in info.items()] == [(k, shape(v)) for k, v in expected.items()]
    ids = {key: id(value) for key, value in info.items()}
    expected_ids = {key: id(value) for key, value in expected.items()}
    assert [sorted(k for k in ids if ids[k] == ids[key]) for key in ids] == [
        sorted(k for k in expected_ids if expected_ids[k] == expected_ids[key]) for key in expected_ids
    ]

    def mutable(value):  # the objects a caller could change: containers, arrays, keys and elements of those
        if isinstance(value, dict):
            return [value, *(o for k, v in value.items() for o in [*mutable(k), *mutable(v)])]
        if isinstance(value, np.ndarray):
            elements = value.ravel().tolist() if value.dtype.hasobject else []
            return [value, *(o for element in elements for o in mutable(element))]
        return [] if isinstance(value, (bool, int, float, str)) else [value]

    env_objects = {id(o) for o in mutable(env_info)}
    assert not any(id(o) in env_objects for o in mutable(info))


def test_reset_infos(backend, make_venv):
    """reset_infos holds each env's last reset info: from reset(), then from each autoreset."""
    venv = make_venv(backend, counter_fns(2, episode_len=1))
    venv.seed(40)
    venv.reset()
    assert [dict(info) for info in venv.reset_infos] == [
        {"episode": 0, "seed": 40, "options": None},
        {"episode": 0, "seed": 41, "options": None},
    ]
    venv.step(np.array([0, 0]))  # env 0 ends at t=1 and autoresets; env 1 at t=2
    assert [info["episode"] for info in venv.reset_infos] == [1, 0]
    assert venv.reset_infos[0]["seed"] is None
    venv.step(np.array([0, 0]))
    assert [info["episode"] for info in venv.reset_infos] == [2, 1]
    assert len(venv.reset_infos) == 2


# --- seeds and options ----------------------------------------------------------------------------------


def test_seed_applies_to_next_reset_only(any_backend, make_venv):
    """seed(s): env i gets s + i at the next reset only; autoresets and later resets get None."""
    venv = make_venv(any_backend, counter_fns(2, episode_len=2))
    reference = ReferenceVecEnv(counter_fns(2, episode_len=2))
    assert venv.seed(100) == [100, 101]
    assert venv.get_attr("seeds_received") == [[], []]  # seed() does not reset
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=100))
    assert venv.get_attr("last_seed") == [100, 101]
    for _ in range(4):  # both envs autoreset at least once
        exp = reference.step([0, 1])
        np.testing.assert_array_equal(venv.step(np.array([0, 1]))[0], exp[0])
    received = venv.get_attr("seeds_received")
    assert received[0] == [100, None, None] and received[1] == [101, None]
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=None))
    assert venv.get_attr("last_seed") == [None, None]


def test_seed_then_reset_twice(backend, make_venv):
    """The reset after a seeded reset is unseeded: its noise continues the seeded RNG stream."""
    venv = make_venv(backend, counter_fns(2))
    reference = ReferenceVecEnv(counter_fns(2))
    venv.seed(5)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=5))
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=None))
    assert venv.get_attr("seeds_received") == [[5, None], [6, None]]


def test_seed_none_gives_distinct_seeds(backend, make_venv):
    """seed(None) draws a random base: envs get distinct consecutive int seeds, used by the next reset."""
    venv = make_venv(backend, counter_fns(3))
    seeds = venv.seed(None)
    assert len(seeds) == 3 and all(isinstance(s, int) for s in seeds)
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0] + 2
    obs = venv.reset()
    assert venv.get_attr("last_seed") == list(seeds)
    np.testing.assert_array_equal(obs, ReferenceVecEnv(counter_fns(3)).reset(seed=seeds[0]))


def test_seed_matches_gymnasium_env(backend, make_venv):
    """Seeded CartPole sub-envs give the obs of gymnasium envs reset by hand with seed + i."""
    venv = make_venv(backend, [functools.partial(gym.make, "CartPole-v1")] * 2)
    venv.seed(42)
    obs = venv.reset()
    expected = np.stack([gym.make("CartPole-v1").reset(seed=42 + i)[0] for i in range(2)])
    assert obs.dtype == np.float32
    np.testing.assert_array_equal(obs, expected)


def test_set_options_dict(backend, make_venv):
    """set_options(dict): every env gets it at the next reset only (deep-copied); autoresets get none."""
    venv = make_venv(backend, counter_fns(2, episode_len=6))
    options = {"start_t": 5}
    venv.set_options(options)
    options["start_t"] = 1  # deep-copied: no effect
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, 2], [5, 5])
    assert venv.get_attr("last_options") == [{"start_t": 5}, {"start_t": 5}]
    _, _, dones, _ = venv.step(np.array([0, 0]))  # env 0 ends at t=6
    assert dones.tolist() == [True, False]
    assert venv.get_attr("last_options") == [None, {"start_t": 5}]
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, 2], [0, 0])
    assert venv.get_attr("last_options") == [None, None]


def test_set_options_list_and_none(backend, make_venv):
    """set_options(list) gives env i its own dict; set_options(None) passes no options."""
    venv = make_venv(backend, counter_fns(2, episode_len=10))
    venv.set_options([{"start_t": 2}, {"start_t": 4}])
    np.testing.assert_array_equal(venv.reset()[:, 2], [2, 4])
    assert venv.get_attr("last_options") == [{"start_t": 2}, {"start_t": 4}]
    venv.set_options(None)
    np.testing.assert_array_equal(venv.reset()[:, 2], [0, 0])
    assert venv.get_attr("last_options") == [None, None]


@pytest.mark.parametrize("length", [1, 3])
def test_set_options_list_of_another_length_is_refused_at_once(backend, make_venv, length):
    """A list of options that is not one dict per env is refused by set_options() itself, and nothing is kept:
    steps go on, and the next reset() uses the options set before (SB3: the next reset raises IndexError for a
    shorter list and ignores the extra dicts of a longer one; see docs/migrating-from-sb3.md)."""
    venv = make_venv(backend, counter_fns(2, episode_len=10))
    venv.set_options({"start_t": 2})
    with pytest.raises(
        ValueError, match=rf"set_options\(\[\.\.\.\]\) must give one dict per env: expected 2, got {length}"
    ):
        venv.set_options([{"start_t": 4}] * length)
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    assert venv.get_attr("last_options") == [{"start_t": 2}, {"start_t": 2}]


def test_seed_and_options_together(backend, make_venv):
    """seed() and set_options() before one reset: both reach every env (compared with envs reset by hand)."""
    venv = make_venv(backend, counter_fns(2, episode_len=10))
    venv.seed(9)
    venv.set_options({"start_t": 3})
    obs = venv.reset()
    np.testing.assert_array_equal(obs, ReferenceVecEnv(counter_fns(2, episode_len=10)).reset(9, {"start_t": 3}))


# --- determinism across backends ------------------------------------------------------------------------


@pytest.mark.parametrize("start_method", START_METHODS)
@pytest.mark.parametrize("env_id", ["CartPole-v1", "counter"])
def test_dummy_and_subproc_identical(start_method, env_id):
    """Dummy and Subproc give byte-identical obs / rewards / dones / infos for the same seeds and actions."""
    fns = counter_fns(2, episode_len=7) if env_id == "counter" else [functools.partial(gym.make, env_id)] * 2
    dummy = vecenv.DummyVecEnv(fns)
    subproc = vecenv.SubprocVecEnv(fns, start_method=start_method)
    try:
        dummy.seed(11)
        subproc.seed(11)
        np.testing.assert_array_equal(dummy.reset(), subproc.reset())
        rng = np.random.default_rng(5)
        n_done = 0
        for _ in range(300):
            actions = rng.integers(0, 2, size=2)
            d_obs, d_rew, d_done, d_info = dummy.step(actions)
            s_obs, s_rew, s_done, s_info = subproc.step(actions)
            assert d_obs.tobytes() == s_obs.tobytes() and d_obs.dtype == s_obs.dtype
            assert d_rew.tobytes() == s_rew.tobytes() and d_rew.dtype == s_rew.dtype
            np.testing.assert_array_equal(d_done, s_done)
            assert_infos_equal(s_info, d_info)
            assert_infos_equal(subproc.reset_infos, dummy.reset_infos)
            n_done += int(d_done.sum())
        assert n_done > 2  # episodes did end, so autoreset was compared too
    finally:
        dummy.close()
        subproc.close()


# --- attributes and methods of sub-envs -----------------------------------------------------------------

INDEX_CASES = [
    (None, [0, 1, 2]),
    (1, [1]),
    (-1, [2]),
    ([2, 0], [2, 0]),
    ([-3, -1], [0, 2]),
    ([1, -1, 0], [1, 2, 0]),
    (range(1, 3), [1, 2]),
    (np.int64(2), [2]),
    (np.array([2, 0]), [2, 0]),
]


@pytest.fixture(scope="module")
def shared_venvs() -> Iterator[dict[tuple[str, str], vecenv.VecEnv]]:
    """Vec envs of ``counter_fns(3)`` shared by the cases of the index tests below, one per backend and use (built
    on first use, closed at the end of the module): each case would otherwise build its own (for Ray, start two
    actors) to read an attribute or call a method once."""
    built: dict[tuple[str, str], vecenv.VecEnv] = {}
    yield built
    for venv in built.values():
        venv.close()


@pytest.fixture
def three_counters(backend, shared_venvs) -> vecenv.VecEnv:
    """``counter_fns(3)`` on ``backend``, shared by the tests that only read its envs (get_attr, env_method,
    indices refused)."""
    if (backend, "read") not in shared_venvs:
        shared_venvs[backend, "read"] = build_venv(backend, counter_fns(3))
    return shared_venvs[backend, "read"]


@pytest.mark.parametrize(("indices", "expected"), INDEX_CASES)
def test_get_attr_indices(three_counters, indices, expected):
    """get_attr answers in the requested order for None / int / list / negative / range indices."""
    venv = three_counters
    assert venv.get_attr("custom_attr", indices=indices) == [f"custom-{i}" for i in expected]
    assert venv.get_attr("offset", indices) == expected


@pytest.mark.parametrize(("indices", "expected"), INDEX_CASES[:6])
def test_set_attr_indices(backend, shared_venvs, indices, expected):
    """set_attr changes only the addressed envs: they get this case's own value, the others keep theirs (the
    cases share one vec env of their own)."""
    if (backend, "set_attr") not in shared_venvs:
        shared_venvs[backend, "set_attr"] = build_venv(backend, counter_fns(3))
    venv = shared_venvs[backend, "set_attr"]
    before = venv.get_attr("custom_attr")
    value = f"new-{uuid.uuid4().hex}"
    venv.set_attr("custom_attr", value, indices=indices)
    assert venv.get_attr("custom_attr") == [value if i in expected else before[i] for i in range(3)]


@pytest.mark.parametrize(("indices", "expected"), INDEX_CASES[:6])
def test_env_method_indices(three_counters, indices, expected):
    """env_method passes positional and keyword args and answers in the requested order."""
    venv = three_counters
    assert venv.env_method("add", 3, b=4, indices=indices) == [100 * i + 34 for i in expected]
    assert venv.env_method("add", 2, indices=indices) == [100 * i + 20 for i in expected]


def test_set_attr_value_is_used_by_env(backend, make_venv):
    """A value set with set_attr changes the env's behaviour (episode length)."""
    venv = make_venv(backend, counter_fns(2, episode_len=10))
    venv.set_attr("episode_len", 1, indices=[1])
    venv.reset()
    _, _, dones, _ = venv.step(np.array([0, 0]))
    assert dones.tolist() == [False, False]  # env 1 ends at t = 1 + offset 1 = 2
    _, _, dones, _ = venv.step(np.array([0, 0]))
    assert dones.tolist() == [False, True]


@pytest.mark.parametrize("indices", [3, -4, [0, 3]])
def test_indices_out_of_range(three_counters, indices):
    """An index outside [-num_envs, num_envs) raises IndexError; the venv keeps answering."""
    venv = three_counters
    with pytest.raises(IndexError):
        venv.get_attr("offset", indices=indices)
    with pytest.raises(IndexError):
        venv.env_method("add", 1, indices=indices)
    assert venv.get_attr("offset") == [0, 1, 2]


def test_get_attr_missing_raises(backend, make_venv):
    """get_attr of a missing attribute raises AttributeError; has_attr is True / False accordingly."""
    venv = make_venv(backend, counter_fns(2))
    with pytest.raises(AttributeError):
        venv.get_attr("no_such_attribute")
    with pytest.raises(AttributeError):
        venv.get_attr("no_such_attribute", indices=[1])
    assert venv.has_attr("custom_attr") is True
    assert venv.has_attr("no_such_attribute") is False
    # the venv still answers after the AttributeError
    assert venv.get_attr("offset") == [0, 1]


def test_env_method_missing_raises(backend, make_venv):
    """env_method of a missing method raises AttributeError."""
    venv = make_venv(backend, counter_fns(2))
    with pytest.raises(AttributeError):
        venv.env_method("no_such_method")
    assert venv.env_method("add", 1) == [10, 110]


def test_attrs_through_gymnasium_wrappers(backend, make_venv):
    """get_attr / env_method search the gymnasium wrapper chain; set_attr sets on the outermost wrapper."""
    venv = make_venv(backend, [functools.partial(wrapped_counter, i) for i in range(3)])
    assert venv.get_attr("offset") == [0, 1, 2]
    assert venv.get_attr("marker", [2, 0]) == ["m2", "m0"]
    assert venv.env_method("add", 1, b=1, indices=-1) == [211]
    assert venv.has_attr("marker") and venv.has_attr("episode_len")
    venv.set_attr("marker", "x", indices=1)
    assert venv.get_attr("marker") == ["m0", "x", "m2"]
    # set_attr sets on the outermost wrapper (SB3): get_attr finds it there, the inner env keeps its value
    venv.set_attr("episode_len", 7, indices=[0, 2])
    assert venv.get_attr("episode_len") == [7, 50, 7]
    assert [env.episode_len for env in venv.get_attr("unwrapped")] == [50, 50, 50]


def test_env_is_wrapped(backend, make_venv):
    """env_is_wrapped finds wrappers anywhere in each env's gymnasium chain, per index, in order."""
    fns = [
        functools.partial(CounterEnv, offset=0),
        functools.partial(wrapped_counter, 1),
        functools.partial(TimeLimit, CounterEnv(offset=2), max_episode_steps=5),
    ]
    venv = make_venv(backend, fns)
    assert venv.env_is_wrapped(TimeLimit) == [False, True, True]
    assert venv.env_is_wrapped(MarkerWrapper) == [False, True, False]
    assert venv.env_is_wrapped(OtherWrapper) == [False, False, False]
    assert venv.env_is_wrapped(MarkerWrapper, indices=1) == [True]
    assert venv.env_is_wrapped(TimeLimit, indices=[2, 0]) == [True, False]
    assert venv.env_is_wrapped(MarkerWrapper, indices=-2) == [True]
    assert venv.env_is_wrapped(gym.Wrapper, indices=[-1, -2, -3]) == [True, True, False]


# --- rendering ------------------------------------------------------------------------------------------


def expected_frame(offset: int, t: int) -> np.ndarray:
    """The frame CounterEnv(offset) renders at step t."""
    return np.full(FRAME_SHAPE, 10 * (offset + 1) + t, dtype=np.uint8)


def test_render_rgb_array(backend, make_venv):
    """get_images() returns each env's frame; render() / render("rgb_array") tile them into one grid."""
    venv = make_venv(backend, counter_fns(3, render_mode="rgb_array"))
    assert venv.render_mode == "rgb_array"
    venv.reset()
    venv.step(np.array([0, 0, 0]))
    images = venv.get_images()
    assert len(images) == 3
    for i, image in enumerate(images):
        np.testing.assert_array_equal(image, expected_frame(i, 1))
    height, width, _ = FRAME_SHAPE
    grid = np.zeros((2 * height, 2 * width, 3), dtype=np.uint8)
    grid[:height, :width] = expected_frame(0, 1)
    grid[:height, width:] = expected_frame(1, 1)
    grid[height:, :width] = expected_frame(2, 1)
    for frame in (venv.render(), venv.render("rgb_array"), venv.render(mode="rgb_array")):
        assert frame.dtype == np.uint8
        np.testing.assert_array_equal(frame, grid)


def test_metadata(backend, make_venv):
    """DummyVecEnv.metadata is envs[0].metadata (so is the test transport's); SubprocVecEnv's is SB3's
    {"render_modes": [...]} from render_mode."""
    venv = make_venv(backend, counter_fns(2, render_mode="rgb_array"))
    if backend in ("dummy", "thread"):
        assert venv.metadata == CounterEnv.metadata
    else:
        assert venv.metadata == {"render_modes": ["human", "rgb_array"]}


@pytest.mark.parametrize(
    ("render_mode", "modes"), [(None, []), ("human", ["human"]), ("rgb_array", ["human", "rgb_array"])]
)
def test_base_metadata_render_modes(make_venv, render_mode, modes):
    """VecEnv (and VecEnvWrapper) metadata follows SB3: rgb_array -> ["human", "rgb_array"], None -> []."""
    venv = make_venv("dummy", counter_fns(2, render_mode=render_mode))
    wrapper = PassThrough(venv)
    assert wrapper.metadata == {"render_modes": modes}
    assert wrapper.render_mode == render_mode


class PassThrough(vecenv.VecEnvWrapper):
    """Minimal wrapper that forwards reset and step_wait."""

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


def test_render_without_render_mode_warns(backend, make_venv):
    """With render_mode None: get_images warns and gives [None] * n; render() warns and returns None."""
    venv = make_venv(backend, counter_fns(2))
    assert venv.render_mode is None
    with pytest.warns(UserWarning):
        assert list(venv.get_images()) == [None, None]
    with pytest.warns(UserWarning):
        assert venv.render() is None
    with pytest.warns(UserWarning):
        assert venv.render("rgb_array") is None


def test_render_mode_mismatch_warns(backend, make_venv):
    """render(mode) with a mode other than render_mode warns and returns None."""
    venv = make_venv(backend, counter_fns(2, render_mode="human"))
    with pytest.warns(UserWarning):
        assert venv.render("rgb_array") is None
    assert venv.get_attr("render_calls") == [0, 0]


def test_render_human_calls_env_render(backend, make_venv):
    """render() in human mode calls every env's render() and returns None."""
    venv = make_venv(backend, counter_fns(2, render_mode="human"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert venv.render() is None
    assert venv.get_attr("render_calls") == [1, 1]


# --- async state, action count, SB3 attributes ----------------------------------------------------------


def test_step_wait_without_step_async(any_backend, make_venv):
    """step_wait() without step_async() raises NoAsyncCallError; the venv keeps working."""
    venv = make_venv(any_backend, counter_fns(2))
    venv.reset()
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.step_wait()
    obs, _, _, _ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs[:, 2], [1, 1])
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.step_wait()


def test_step_async_twice(any_backend, make_venv):
    """A second step_async() before step_wait() raises AlreadyPendingCallError; the first step still completes."""
    venv = make_venv(any_backend, counter_fns(2))
    venv.reset()
    venv.step_async(np.array([1, 1]))
    with pytest.raises(vecenv.AlreadyPendingCallError):
        venv.step_async(np.array([2, 2]))
    obs, rewards, _, _ = venv.step_wait()
    np.testing.assert_array_equal(obs[:, 2], [1, 1])
    np.testing.assert_array_equal(rewards, [1.5, 1.5])  # the first actions were used


def test_calls_refused_while_a_step_is_pending_or_after_close_name_the_method_called(any_backend, make_venv):
    """The refusal names the method the caller called (env_is_wrapped, get_images), not an internal command."""
    venv = make_venv(any_backend, counter_fns(2, render_mode="rgb_array"))
    venv.reset()
    venv.step_async(np.array([1, 1]))
    with pytest.raises(vecenv.AlreadyPendingCallError, match=r"^Cannot call env_is_wrapped\(\) while a step"):
        venv.env_is_wrapped(gym.Wrapper)
    with pytest.raises(vecenv.AlreadyPendingCallError, match=r"^Cannot call get_images\(\) while a step"):
        venv.get_images()
    venv.step_wait()
    venv.close()
    with pytest.raises(vecenv.ClosedVecEnvError, match=r"^Cannot call env_is_wrapped\(\) on a closed"):
        venv.env_is_wrapped(gym.Wrapper)


def test_reset_while_step_pending(any_backend, make_venv):
    """reset() with a pending step discards the step and resets; stepping works afterwards."""
    venv = make_venv(any_backend, counter_fns(2))
    reference = ReferenceVecEnv(counter_fns(2))
    venv.reset()
    reference.reset()
    venv.step_async(np.array([1, 1]))
    venv.seed(3)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=3))
    with pytest.raises(vecenv.NoAsyncCallError):
        venv.step_wait()
    obs, rewards, dones, infos = venv.step(np.array([2, 0]))
    exp = reference.step([2, 0])
    np.testing.assert_array_equal(obs, exp[0])
    np.testing.assert_array_equal(rewards, exp[1])
    np.testing.assert_array_equal(dones, exp[2])
    assert_infos_equal(infos, exp[3])


def test_reset_drops_or_discards_a_pending_step(any_backend, make_venv):
    """reset() with a step pending: DummyVecEnv drops the recorded actions and its envs never step (SB3's
    DummyVecEnv); SubprocVecEnv's workers started stepping in step_async, so that step ran and is discarded.
    Seen through the envs' RNG: every step draws noise, which changes the next unseeded reset."""
    venv = make_venv(any_backend, counter_fns(2))
    reference = ReferenceVecEnv(counter_fns(2))
    venv.seed(5)
    venv.reset()
    reference.reset(seed=5)
    venv.step_async(np.array([1, 1]))
    if any_backend != "dummy":
        reference.step([1, 1])
    np.testing.assert_array_equal(venv.reset(), reference.reset())
    obs, _, _, _ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs, reference.step([0, 0])[0])


def test_calls_after_close(any_backend, make_venv):
    """Every call that reaches the envs after close() raises ClosedVecEnvError; close() is idempotent."""
    venv = make_venv(any_backend, counter_fns(2, render_mode="rgb_array"))
    venv.reset()
    venv.close()
    venv.close()
    calls = [
        venv.reset,
        lambda: venv.step(np.array([0, 0])),
        lambda: venv.step_async(np.array([0, 0])),
        venv.step_wait,
        lambda: venv.get_attr("offset"),
        lambda: venv.set_attr("offset", 1),
        lambda: venv.has_attr("offset"),
        lambda: venv.env_method("add", 1),
        lambda: venv.env_is_wrapped(TimeLimit),
        venv.get_images,
        venv.render,
    ]
    for call in calls:
        with pytest.raises(vecenv.ClosedVecEnvError):
            call()


def test_dummy_close_closes_envs(make_venv):
    """DummyVecEnv.close() calls close() on every env once, however often it is called."""
    venv = make_venv("dummy", counter_fns(3))
    envs = list(venv.envs)
    venv.close()
    venv.close()
    assert [env.close_calls for env in envs] == [1, 1, 1]


def test_render_modes_must_agree(backend):
    """Sub-envs with different render modes are rejected (SB3's assertion)."""
    fns = [functools.partial(CounterEnv), functools.partial(CounterEnv, render_mode="rgb_array")]
    with pytest.raises(AssertionError, match="render_mode"):
        build_venv(backend, fns)


def test_close_with_pending_step(backend, make_venv):
    """close() while a step is pending returns and leaves the venv closed."""
    venv = make_venv(backend, counter_fns(2))
    venv.reset()
    venv.step_async(np.array([0, 0]))
    venv.close()
    with pytest.raises(vecenv.ClosedVecEnvError):
        venv.step_wait()


@pytest.mark.parametrize("n_actions", [1, 3])
def test_wrong_number_of_actions(any_backend, make_venv, n_actions):
    """step() with the wrong number of actions raises ValueError naming expected and received counts."""
    venv = make_venv(any_backend, counter_fns(2))
    venv.reset()
    with pytest.raises(ValueError, match=rf"expected 2\b.*\b{n_actions}\b"):
        venv.step(np.zeros(n_actions, dtype=np.int64))
    with pytest.raises(ValueError, match=rf"expected 2\b.*\b{n_actions}\b"):
        venv.step([0] * n_actions)
    obs, _, _, _ = venv.step(np.array([0, 0]))  # not left pending
    np.testing.assert_array_equal(obs[:, 2], [1, 1])


def test_actions_as_list(backend, make_venv):
    """Actions may be a list with one action per env (as SB3 accepts)."""
    venv = make_venv(backend, counter_fns(2))
    venv.reset()
    _, rewards, _, _ = venv.step([2, 1])
    np.testing.assert_array_equal(rewards, [2.5, 1.5])


def test_sb3_state_attributes(backend, make_venv):
    """SB3 attributes: DummyVecEnv.envs; SubprocVecEnv.processes, waiting (pending step) and closed."""
    venv = make_venv(backend, counter_fns(2))
    venv.reset()
    if backend == "dummy":
        assert [env.offset for env in venv.envs] == [0, 1]
        return
    if backend != "subproc":
        pytest.skip("processes, waiting and closed are SubprocVecEnv's attributes")
    assert len(venv.processes) == 2
    assert venv.waiting is False
    venv.step_async(np.array([0, 0]))
    assert venv.waiting is True
    venv.step_wait()
    assert venv.waiting is False
    assert venv.closed is False
    venv.close()
    assert venv.closed is True

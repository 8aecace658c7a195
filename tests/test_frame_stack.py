"""StackedObservations (alone, no env) and VecFrameStack (on both backends) against a naive numpy reference.

The reference keeps, per env, a Python list of the last ``n_stack`` raw frames (zeros before the first) and
concatenates them with ``np.concatenate``; raw frames come from an unwrapped venv stepped with the same actions.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import vecenv
from tests.envs import CounterEnv, SpaceEnv
from vecenv.stacked_observations import StackedObservations
from vecenv.wrappers.vec_frame_stack import VecFrameStack

MISSING_TERMINAL = "VecFrameStack wrapping a VecEnv without terminal_observation info"


# --- test envs (importable, so worker processes unpickle them by reference) ------------------------------------


def image_frame(shape: tuple[int, ...], offset: int, t: int, action: int) -> np.ndarray:
    """A uint8 frame in which every pixel differs and which changes with the env offset, the step and the action."""
    return ((np.arange(int(np.prod(shape))).reshape(shape) + 7 * t + 50 * offset + 3 * action) % 256).astype(np.uint8)


class ImageEnv(gym.Env):
    """Image observations ``image_frame(shape, offset, t, last action)``; episodes last ``3 + offset`` steps."""

    def __init__(self, shape: tuple[int, ...] = (5, 4, 2), offset: int = 0) -> None:
        self.shape = shape
        self.offset = offset
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return image_frame(self.shape, self.offset, 0, 0), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return image_frame(self.shape, self.offset, self.t, int(action)), 0.0, self.t >= 3 + self.offset, False, {}


class DictImageEnv(ImageEnv):
    """Dict observations: ``"img"`` an :class:`ImageEnv` frame, ``"mat"`` a (2, 3) float32 matrix of (offset, t)."""

    def __init__(self, shape: tuple[int, ...] = (5, 4, 3), offset: int = 0) -> None:
        super().__init__(shape, offset)
        self.observation_space = spaces.Dict(
            {"img": spaces.Box(0, 255, shape, np.uint8), "mat": spaces.Box(-100.0, 100.0, (2, 3), np.float32)}
        )

    def _mat(self) -> np.ndarray:
        return (np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * self.offset + 0.5 * self.t).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        img, info = super().reset(seed=seed, options=options)
        return {"img": img, "mat": self._mat()}, info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        img, reward, terminated, truncated, info = super().step(action)
        return {"img": img, "mat": self._mat()}, reward, terminated, truncated, info


class StripTerminal(vecenv.VecEnvWrapper):
    """Removes ``terminal_observation`` from the infos (a venv that does not provide it)."""

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            info.pop("terminal_observation", None)
        return obs, rewards, dones, infos


# --- the naive reference -------------------------------------------------------------------------------------


class NaiveStack:
    """Per env, the list of the last ``n_stack`` frames; stacks are ``np.concatenate`` of that list along ``axis``."""

    def __init__(self, n_stack: int, axis: int) -> None:
        self.n_stack = n_stack
        self.axis = axis
        self.frames: list[list[np.ndarray]] = []

    def _fresh(self, frame: np.ndarray) -> list[np.ndarray]:
        return [np.zeros_like(frame)] * (self.n_stack - 1) + [np.array(frame)]

    def _stacks(self) -> np.ndarray:
        return np.stack([np.concatenate(frames, axis=self.axis) for frames in self.frames])

    def reset(self, obs: np.ndarray) -> np.ndarray:
        self.frames = [self._fresh(frame) for frame in obs]
        return self._stacks()

    def step(self, obs: np.ndarray, dones: Any, terminals: list[Any]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """Push ``obs``; returns the stacks and, per done env with a terminal observation, its expected stack."""
        expected_terminals = {}
        for i, frame in enumerate(obs):
            if dones[i]:
                if terminals[i] is not None:
                    expected_terminals[i] = np.concatenate([*self.frames[i][1:], terminals[i]], axis=self.axis)
                self.frames[i] = self._fresh(frame)
            else:
                self.frames[i] = [*self.frames[i][1:], np.array(frame)]
        return self._stacks(), expected_terminals


class NaiveDictStack:
    """One :class:`NaiveStack` per key."""

    def __init__(self, n_stack: int, axes: dict[str, int]) -> None:
        self.stacks = {key: NaiveStack(n_stack, axis) for key, axis in axes.items()}

    def reset(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {key: stack.reset(obs[key]) for key, stack in self.stacks.items()}

    def step(self, obs: dict, dones: Any, terminals: list[Any]) -> tuple[dict, dict[int, dict]]:
        stacked, expected_terminals = {}, {}
        for key, stack in self.stacks.items():
            key_terminals = [None if terminal is None else terminal[key] for terminal in terminals]
            stacked[key], per_env = stack.step(obs[key], dones, key_terminals)
            for env_idx, terminal in per_env.items():
                expected_terminals.setdefault(env_idx, {})[key] = terminal
        return stacked, expected_terminals


def assert_exact(actual: Any, expected: Any) -> None:
    """Arrays (or dicts of arrays) equal in shape, dtype and every value."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected)
        for key in expected:
            assert_exact(actual[key], expected[key])
        return
    assert isinstance(actual, np.ndarray)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, actual.dtype)
    np.testing.assert_array_equal(actual, expected)


def assert_in_space(batch: Any, space: spaces.Space) -> None:
    """Every env's observation in a batch (array or dict of arrays) belongs to ``space``."""
    if isinstance(batch, dict):
        num_envs = len(next(iter(batch.values())))
        assert all({key: value[i] for key, value in batch.items()} in space for i in range(num_envs))
    else:
        assert all(obs in space for obs in batch)


# --- VecFrameStack on real venvs -------------------------------------------------------------------------------


def image_fns(shape: tuple[int, ...], n: int = 2, env_cls: type = ImageEnv) -> list[Callable]:
    return [functools.partial(env_cls, shape=shape, offset=i) for i in range(n)]


def counter_fns(n: int = 2) -> list[Callable]:
    return [functools.partial(CounterEnv, episode_len=2, offset=i) for i in range(n)]


def compare_rollout(
    make_venv: Callable,
    backend: str,
    env_fns: list[Callable],
    n_stack: int,
    channels_order: Any,
    reference: NaiveStack | NaiveDictStack,
    n_steps: int = 9,
) -> VecFrameStack:
    """Step a raw venv and a VecFrameStack over the same envs with the same actions; compare everything exactly."""
    raw = make_venv("dummy", env_fns)  # the reference source: the same envs, unwrapped, in this process
    stacked = VecFrameStack(make_venv(backend, env_fns), n_stack, channels_order)
    raw.seed(0)
    stacked.seed(0)
    obs = stacked.reset()
    assert_exact(obs, reference.reset(raw.reset()))
    assert_in_space(obs, stacked.observation_space)
    rng = np.random.default_rng(0)
    n_terminals = 0
    for _ in range(n_steps):
        actions = rng.integers(0, 2, size=raw.num_envs)
        raw_obs, _, raw_dones, raw_infos = raw.step(actions)
        obs, _, dones, infos = stacked.step(actions)
        expected, expected_terminals = reference.step(
            raw_obs, raw_dones, [info.get("terminal_observation") for info in raw_infos]
        )
        np.testing.assert_array_equal(dones, raw_dones)
        assert_exact(obs, expected)
        assert_in_space(obs, stacked.observation_space)
        assert sorted(i for i, info in enumerate(infos) if "terminal_observation" in info) == sorted(expected_terminals)
        for env_idx, terminal in expected_terminals.items():
            assert_exact(infos[env_idx]["terminal_observation"], terminal)
            n_terminals += 1
    assert n_terminals >= 2, "the rollout should end episodes"
    return stacked


def test_channels_last_image(make_venv, backend):
    stacked = compare_rollout(make_venv, backend, image_fns((5, 4, 2)), 3, None, NaiveStack(3, axis=-1))
    assert stacked.observation_space.shape == (5, 4, 6)
    assert stacked.stacked_obs.channels_first is False


def test_channels_first_image(make_venv, backend):
    stacked = compare_rollout(make_venv, backend, image_fns((2, 5, 4)), 3, None, NaiveStack(3, axis=0))
    assert stacked.observation_space.shape == (6, 5, 4)
    assert stacked.stacked_obs.channels_first is True


def test_explicit_order_overrides_detection(make_venv, backend):
    # (2, 5, 4) looks channels-first; "last" stacks along width anyway
    stacked = compare_rollout(make_venv, backend, image_fns((2, 5, 4)), 2, "last", NaiveStack(2, axis=-1))
    assert stacked.observation_space.shape == (2, 5, 8)


def test_vector_observations(make_venv, backend):
    stacked = compare_rollout(make_venv, backend, counter_fns(), 4, None, NaiveStack(4, axis=-1))
    assert stacked.observation_space.shape == (16,)


def test_dict_per_key_orders(make_venv, backend):
    stacked = compare_rollout(
        make_venv,
        backend,
        image_fns((5, 4, 3), env_cls=DictImageEnv),
        3,
        {"img": None, "mat": "first"},
        NaiveDictStack(3, {"img": -1, "mat": 0}),
    )
    assert stacked.observation_space["img"].shape == (5, 4, 9)
    assert stacked.observation_space["mat"].shape == (6, 3)


def test_dict_single_order_for_all_keys(make_venv, backend):
    stacked = compare_rollout(
        make_venv,
        backend,
        image_fns((3, 5, 4), env_cls=DictImageEnv),
        2,
        "last",
        NaiveDictStack(2, {"img": -1, "mat": -1}),
    )
    assert stacked.observation_space["img"].shape == (3, 5, 8)
    assert stacked.observation_space["mat"].shape == (2, 6)


def test_reset_zeroes_the_stack_and_results_are_copies(make_venv, backend):
    venv = VecFrameStack(make_venv(backend, image_fns((5, 4, 2))), 3)
    first = venv.reset()
    kept = [first]
    for action in (1, 0):
        obs, *_ = venv.step(np.array([action, action]))
        kept.append(obs)
    snapshot = [obs.copy() for obs in kept]
    np.testing.assert_array_equal(kept[-1][..., :2], first[..., 4:])  # the reset frame is now the oldest
    kept[-1][...] = 255  # a caller modifying its observation must not touch the wrapper's stacks
    obs, *_ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs[1, ..., :4], snapshot[-1][1, ..., 2:])  # (env 0 has just ended its episode)
    kept[-1][...] = snapshot[-1]
    again = venv.reset()
    np.testing.assert_array_equal(again[..., :4], 0)
    np.testing.assert_array_equal(again, first)
    for got, want in zip(kept[:-1], snapshot[:-1], strict=True):
        np.testing.assert_array_equal(got, want)


def test_warns_without_terminal_observation(make_venv, backend):
    venv = VecFrameStack(StripTerminal(make_venv(backend, image_fns((5, 4, 2)))), 2)
    venv.reset()
    for _ in range(2):  # no env is done yet: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            venv.step(np.array([0, 0]))
    with pytest.warns(UserWarning, match=MISSING_TERMINAL):
        obs, _, dones, infos = venv.step(np.array([0, 0]))  # env 0 ends its 3-step episode
    assert dones.tolist() == [True, False]
    assert "terminal_observation" not in infos[0]
    np.testing.assert_array_equal(obs[0][..., :2], 0)  # the done env's stack still restarts


def test_wrapper_errors(make_venv):
    with pytest.raises(AssertionError, match=r"Box and gym\.spaces\.Dict"):
        VecFrameStack(make_venv("dummy", [functools.partial(SpaceEnv, obs_kind="discrete")]), 2)
    venv = make_venv("dummy", image_fns((5, 4, 2), n=1))
    with pytest.raises(AssertionError, match="channels_order"):
        VecFrameStack(venv, 2, channels_order="middle")
    with pytest.raises(TypeError, match="can't be a dict"):
        VecFrameStack(venv, 2, channels_order={"img": "last"})
    with pytest.raises(TypeError, match="only supports Box and Dict"):
        VecFrameStack(make_venv("dummy", [functools.partial(SpaceEnv, obs_kind="dict")]), 2)


# --- StackedObservations alone ---------------------------------------------------------------------------------


def image(shape: tuple[int, ...]) -> spaces.Box:
    return spaces.Box(0, 255, shape, np.uint8)


@pytest.mark.parametrize(
    ("space", "order", "expected"),
    [
        (image((84, 84, 4)), None, (False, -1, (84, 84, 12), -1)),
        (image((4, 84, 84)), None, (True, 1, (12, 84, 84), 0)),
        (image((4, 84, 84)), "last", (False, -1, (4, 84, 252), -1)),
        (image((84, 84, 4)), "first", (True, 1, (252, 84, 4), 0)),
        # not images (float, or bounds other than 0..255): channels-last unless told otherwise
        (spaces.Box(0.0, 1.0, (3, 84, 84), np.float32), None, (False, -1, (3, 84, 252), -1)),
        (spaces.Box(0, 1, (3, 84, 84), np.uint8), None, (False, -1, (3, 84, 252), -1)),
        (spaces.Box(-1.0, 1.0, (5,)), None, (False, -1, (15,), -1)),
        (spaces.Box(-1.0, 1.0, (5,)), "first", (True, 1, (15,), 0)),
        (spaces.Box(-1.0, 1.0, (2, 3)), "first", (True, 1, (6, 3), 0)),
        (spaces.Box(-1.0, 1.0, (2, 3)), "last", (False, -1, (2, 9), -1)),
    ],
)
def test_compute_stacking(space, order, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StackedObservations.compute_stacking(3, space, order) == expected


def test_compute_stacking_warns_when_middle_dimension_is_smallest():
    with pytest.warns(UserWarning, match="second dimension was smallest"):
        result = StackedObservations.compute_stacking(2, image((84, 3, 84)), None)
    assert result == (False, -1, (84, 3, 168), -1)


@pytest.mark.parametrize(("order", "axis"), [(None, -1), ("first", 0), ("last", -1)])
def test_stacked_observation_space_bounds_and_dtype(order, axis):
    low = np.arange(6, dtype=np.float64).reshape(2, 3) - 10
    space = spaces.Box(low, low + np.arange(1, 7).reshape(2, 3), dtype=np.float64)
    stacked = StackedObservations(2, 3, space, order).stacked_observation_space
    assert isinstance(stacked, spaces.Box) and stacked.dtype == np.float64
    # SB3's bounds: each entry repeated n_stack times along the stacking axis (np.repeat, not np.tile)
    np.testing.assert_array_equal(stacked.low, np.repeat(low, 3, axis=axis))
    np.testing.assert_array_equal(stacked.high, np.repeat(space.high, 3, axis=axis))
    stacked_image = StackedObservations(1, 4, image((5, 4, 3))).stacked_observation_space
    assert stacked_image == spaces.Box(0, 255, (5, 4, 12), np.uint8)


def test_dict_stacked_observation_space():
    space = spaces.Dict({"img": image((3, 5, 4)), "vec": spaces.Box(-1.0, 1.0, (2,), np.float32)})
    stack = StackedObservations(2, 2, space, {"img": None, "vec": "first"})
    assert list(stack.sub_stacked_observations) == ["img", "vec"]
    assert stack.stacked_observation_space == spaces.Dict(
        {"img": image((6, 5, 4)), "vec": spaces.Box(-1.0, 1.0, (4,), np.float32)}
    )


@pytest.mark.parametrize(
    ("space", "order", "error", "match"),
    [
        (spaces.Discrete(3), None, TypeError, "only supports Box and Dict"),
        (spaces.Tuple((spaces.Box(0, 1, (2,)),)), None, TypeError, "only supports Box and Dict"),
        (spaces.Box(0, 1, (2,)), {"a": "last"}, TypeError, "can't be a dict"),
        (spaces.Box(0, 1, (2,)), "middle", AssertionError, "must be one of following"),
        (spaces.Dict({"a": spaces.Box(0, 1, (2,))}), "middle", AssertionError, "must be one of following"),
        (spaces.Dict({"a": spaces.Box(0, 1, (2,)), "b": spaces.Box(0, 1, (2,))}), {"a": None}, KeyError, "'b'"),
        (spaces.Dict({"a": spaces.Discrete(2)}), None, TypeError, "only supports Box and Dict"),
        (spaces.Box(0, 1, ()), None, ValueError, "shape"),
    ],
)
def test_stacked_observations_errors(space, order, error, match):
    with pytest.raises(error, match=match):
        StackedObservations(2, 3, space, order)


def test_n_stack_must_be_positive():
    with pytest.raises(ValueError, match="n_stack must be at least 1"):
        StackedObservations(2, 0, spaces.Box(0, 1, (2,)))


def test_dict_stack_rejects_array_observations():
    stack = StackedObservations(1, 2, spaces.Dict({"a": spaces.Box(0, 1, (2,))}))
    with pytest.raises(TypeError, match="expects dict observations"):
        stack.reset(np.zeros((1, 2), dtype=np.float32))


def test_reset_zeroes_everything_but_the_newest_frame():
    stack = StackedObservations(2, 3, spaces.Box(0, 9, (2,), np.int64))
    stack.reset(np.array([[1, 1], [2, 2]]))
    stack.update(np.array([[3, 3], [4, 4]]), np.array([False, False]), [{}, {}])
    obs, _ = stack.update(np.array([[5, 5], [6, 6]]), np.array([False, False]), [{}, {}])
    np.testing.assert_array_equal(obs, [[1, 1, 3, 3, 5, 5], [2, 2, 4, 4, 6, 6]])
    np.testing.assert_array_equal(stack.reset(np.array([[7, 8], [9, 9]])), [[0, 0, 0, 0, 7, 8], [0, 0, 0, 0, 9, 9]])


def test_terminal_observation_is_the_previous_stack_plus_the_terminal_frame():
    stack = StackedObservations(2, 3, image((1, 2, 2)), channels_order="first")
    stack.reset(np.full((2, 1, 2, 2), 1, np.uint8))
    stack.update(np.full((2, 1, 2, 2), 2, np.uint8), np.array([False, False]), [{}, {}])
    infos: list[dict] = [{"terminal_observation": np.full((1, 2, 2), 3, np.uint8), "x": 1}, {}]
    obs, out_infos = stack.update(np.full((2, 1, 2, 2), 4, np.uint8), np.array([True, False]), infos)
    assert out_infos is infos and infos[0]["x"] == 1
    assert_exact(infos[0]["terminal_observation"], np.stack([np.full((2, 2), v, np.uint8) for v in (1, 2, 3)]))
    assert "terminal_observation" not in infos[1]
    np.testing.assert_array_equal(obs[0, :, 0, 0], [0, 0, 4])  # restarted: zeros, then the new episode's frame
    np.testing.assert_array_equal(obs[1, :, 0, 0], [1, 2, 4])


def test_missing_terminal_observation_warns_once_per_update():
    space = spaces.Dict({"a": spaces.Box(0, 9, (1,), np.int64), "b": spaces.Box(0, 9, (1,), np.int64)})
    stack = StackedObservations(2, 2, space)
    stack.reset({"a": np.array([[1], [1]]), "b": np.array([[2], [2]])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not done: no terminal observation needed
        stack.update({"a": np.array([[3], [3]]), "b": np.array([[4], [4]])}, np.array([False, False]), [{}, {}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs, _ = stack.update({"a": np.array([[5], [5]]), "b": np.array([[6], [6]])}, np.array([True, True]), [{}, {}])
    assert [str(w.message) for w in caught] == [MISSING_TERMINAL]
    assert_exact(obs, {"a": np.array([[0, 5], [0, 5]]), "b": np.array([[0, 6], [0, 6]])})


def test_dict_terminal_observation_is_stacked_per_key_in_a_new_dict():
    space = spaces.Dict({"a": spaces.Box(0, 9, (1,), np.int64), "b": spaces.Box(0, 9, (2,), np.int64)})
    stack = StackedObservations(1, 2, space, {"a": "last", "b": "first"})
    stack.reset({"a": np.array([[1]]), "b": np.array([[2, 2]])})
    terminal = {"a": np.array([3]), "b": np.array([4, 4]), "extra": "kept"}
    infos: list[dict] = [{"terminal_observation": terminal}]
    obs, _ = stack.update({"a": np.array([[5]]), "b": np.array([[6, 6]])}, np.array([True]), infos)
    got = infos[0]["terminal_observation"]
    assert_exact(got["a"], np.array([1, 3]))
    assert_exact(got["b"], np.array([2, 2, 4, 4]))
    assert got["extra"] == "kept"
    assert terminal["a"].tolist() == [3]  # the env's own terminal dict is left alone
    assert_exact(obs, {"a": np.array([[0, 5]]), "b": np.array([[0, 0, 6, 6]])})


@st.composite
def stacking_cases(draw: st.DrawFn) -> tuple:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from([np.float32, np.int16, np.uint8]))
    order = draw(st.sampled_from([None, "first", "last"]))
    n_stack = draw(st.integers(1, 4))
    num_envs = draw(st.integers(1, 3))
    n_steps = draw(st.integers(0, 8))
    dones = draw(
        st.lists(st.lists(st.booleans(), min_size=num_envs, max_size=num_envs), min_size=n_steps, max_size=n_steps)
    )
    seed = draw(st.integers(0, 2**16))
    return shape, dtype, order, n_stack, num_envs, dones, seed


@settings(max_examples=60, deadline=None)
@given(stacking_cases())
def test_stacking_matches_the_naive_reference(case):
    shape, dtype, order, n_stack, num_envs, dones_per_step, seed = case
    rng = np.random.default_rng(seed)
    space = spaces.Box(0, 100, shape, dtype)  # never an image (bounds), so None means channels-last
    stack = StackedObservations(num_envs, n_stack, space, order)
    reference = NaiveStack(n_stack, axis=0 if order == "first" else -1)

    def draw_obs() -> np.ndarray:
        return rng.integers(0, 100, size=(num_envs, *shape)).astype(dtype)

    obs = draw_obs()
    outputs = [stack.reset(obs)]
    expected_outputs = [reference.reset(obs)]
    assert_exact(outputs[0], expected_outputs[0])
    for dones in dones_per_step:
        obs = draw_obs()
        terminals = [draw_obs()[0] if done else None for done in dones]
        infos = [{} if terminal is None else {"terminal_observation": terminal} for terminal in terminals]
        stacked, infos = stack.update(obs, np.array(dones), infos)
        expected, expected_terminals = reference.step(obs, dones, terminals)
        assert_exact(stacked, expected)
        for env_idx, terminal in expected_terminals.items():
            assert_exact(infos[env_idx]["terminal_observation"], terminal)
        outputs.append(stacked)
        expected_outputs.append(expected)
    # every returned array is the caller's: later updates and resets never changed them
    stack.reset(draw_obs())
    for got, want in zip(outputs, expected_outputs, strict=True):
        assert_exact(got, want)


class _UnsortedDictEnv(gym.Env):
    """Dict observations whose keys come in the order ``b``, ``a`` (a space built from an ``OrderedDict``)."""

    observation_space = spaces.Dict(
        OrderedDict([("b", spaces.Box(0, 9, (2,), np.float32)), ("a", spaces.Box(0, 9, (1,), np.float32))])
    )
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return OrderedDict([("b", np.zeros(2, np.float32)), ("a", np.zeros(1, np.float32))]), {}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        return OrderedDict([("b", np.ones(2, np.float32)), ("a", np.ones(1, np.float32))]), 0.0, False, False, {}


def test_stacked_dict_observations_keep_the_keys_order_of_the_observations():
    """Stacked Dict observations have their keys in the order the wrapped env gives them (SB3's loop over the
    observation's keys), also under a second ``VecFrameStack``, whose space Gymnasium sorts."""
    venv = vecenv.VecFrameStack(vecenv.VecFrameStack(vecenv.DummyVecEnv([_UnsortedDictEnv]), 2), 2)
    try:
        assert list(venv.reset()) == ["b", "a"]
        obs = venv.step(np.zeros(1, dtype=np.int64))[0]
        assert list(obs) == ["b", "a"]
        np.testing.assert_array_equal(obs["a"], [[0, 0, 0, 1]])
    finally:
        venv.close()

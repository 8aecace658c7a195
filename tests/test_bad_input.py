"""Bad input is refused with a ValueError that names what was expected and what was received: actions of the
wrong shape, dtype or range (before anything reaches an env), and observations an env returns outside its
declared observation space (never silently broadcast or cast across kinds into the batch buffers).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from vecenv.actions import make_actions_checker


class ActionSpaceEnv(gym.Env):
    """Counts the actions it receives (so a test can tell that none arrived); any action space."""

    def __init__(self, action_space: gym.Space) -> None:
        self.action_space = action_space
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.received: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.received.append(action)
        return np.zeros(1, np.float32), 0.0, False, False, {"received": len(self.received)}


class BadObsEnv(gym.Env):
    """Declares a float32 ``Box((3,))`` or uint8 image space but returns ``bad`` observations from step 1."""

    def __init__(self, bad: str = "shape", image: bool = False) -> None:
        self.bad, self.image = bad, image
        shape, dtype = ((2, 2, 1), np.uint8) if image else ((3,), np.float32)
        self.observation_space = spaces.Box(0, 255, shape, dtype)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, self.observation_space.dtype), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        shape, dtype = self.observation_space.shape, self.observation_space.dtype
        obs: Any
        if self.bad == "shape":
            obs = np.zeros((1,), dtype)  # would broadcast into (3,)
        elif self.bad == "float-into-uint8":
            obs = np.full(shape, 3.7)
        elif self.bad == "none":
            obs = np.ones(shape, dtype)
        elif self.bad == "float64":  # accepted: same kind, as SB3 accepts it
            obs = np.full(shape, 0.5, np.float64)
        else:
            obs = [0.25] * int(np.prod(shape))
        return obs, 0.0, False, False, {}


DISCRETE = spaces.Discrete(3, start=1)
CASES = [
    # (action space, bad actions for 2 envs, regex the message must match)
    (DISCRETE, np.array([1.0, 2.0]), r"must be integers, got dtype float64"),
    (DISCRETE, np.array([1, 4]), r"out of range .*envs \[1\] got \[4\]"),
    (DISCRETE, np.array([0, 1]), r"out of range .*envs \[0\] got \[0\]"),
    # more than 1024 values: checked with min / max instead of a set of the allowed values
    (spaces.Discrete(5000, start=-2), np.array([4997, 4998]), r"out of range .*envs \[1\] got \[4998\]"),
    (spaces.Discrete(5000, start=-2), np.array([-3, 0]), r"out of range .*envs \[0\] got \[-3\]"),
    (DISCRETE, np.array([[1, 2], [1, 2]]), r"must have shape \(2,\).*got shape \(2, 2\)"),
    (spaces.MultiDiscrete([2, 3]), np.array([[1, 2], [1, 3]]), r"out of range .*envs \[1\] got \[\[1, 3\]\]"),
    (spaces.MultiDiscrete([2, 3]), np.array([[1, 2, 0], [1, 0, 0]]), r"must have shape \(2, 2\).*got shape \(2, 3\)"),
    # one range for every component (checked as a Discrete), with a start
    (
        spaces.MultiDiscrete([3, 3], start=[-1, -1]),
        np.array([[1, 2], [1, 1]]),
        r"out of range .*envs \[0\] got \[\[1, 2\]\]",
    ),
    (spaces.MultiDiscrete([3, 3], start=[-1, -1]), np.array([[0, 0], [-2, 0]]), r"out of range .*envs \[1\]"),
    (spaces.MultiBinary(3), np.array([[0, 1, 2], [0, 0, 0]]), r"out of range .*envs \[0\]"),
    (spaces.MultiBinary(3), np.full((2, 3), 0.5), r"must be integers, got dtype float64"),
    (
        spaces.MultiBinary(3),
        np.array([[0, 1, 1], [0, 2, 0]], np.float32),
        r"must be integers, got dtype float32 with values other than 0 and 1 .*: envs \[1\] got \[\[0.0, 2.0, 0.0\]\]",
    ),
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((2, 3)), r"must have shape \(2, 2\).*got shape \(2, 3\)"),
    (spaces.Box(-1, 1, (2,), np.float32), np.array([["a", "b"], ["c", "d"]]), r"must be real numbers, got dtype <U1"),
    (spaces.Dict({"d": DISCRETE}), {"d": np.array([1, 9])}, r"actions\['d'\] out of range .*envs \[1\] got \[9\]"),
    (
        spaces.Tuple((DISCRETE, DISCRETE)),
        (np.array([1, 1]), np.array([2, 5])),
        r"actions\[1\] out of range .*envs \[1\]",
    ),
]


@pytest.mark.parametrize(("space", "actions", "message"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_bad_actions_refused_before_any_env_steps(backend, make_venv, space, actions, message):
    """The ValueError names the space, expected vs received shape/dtype or the envs and values out of range;
    no env received anything, and the vec env still steps with good actions afterwards."""
    venv = make_venv(backend, [functools.partial(ActionSpaceEnv, space) for _ in range(2)])
    venv.reset()
    with pytest.raises(ValueError, match=message) as info:
        venv.step(actions)
    named = space[next(iter(space.keys()))] if isinstance(space, spaces.Dict) else space
    named = named[1] if isinstance(named, spaces.Tuple) else named
    assert str(named) in str(info.value)
    assert venv.get_attr("received") == [[], []]
    good = [space.sample() for _ in range(2)]
    _, _, _, infos = venv.step(good)
    assert [info["received"] for info in infos] == [1, 1]


NO_ENV_AXIS = [
    (DISCRETE, 1, r"expected a batch of shape \(2,\), got 1 \(type int\), which has no env axis"),
    (DISCRETE, np.int64(1), r"expected a batch of shape \(2,\), got np.int64\(1\) \(type int64\)"),
    (DISCRETE, np.array(1), r"expected a batch of shape \(2,\), got array\(1\) \(type ndarray\)"),
    (spaces.Box(-1, 1, (), np.float32), 0.5, r"expected a batch of shape \(2,\), got 0.5 \(type float\)"),
    (spaces.Dict({"d": DISCRETE}), {"d": 1}, r"expected a batch of 2 actions, got \{'d': 1\} \(type dict\)"),
]


@pytest.mark.parametrize(
    ("space", "actions", "message"), NO_ENV_AXIS, ids=[f"case{i}" for i in range(len(NO_ENV_AXIS))]
)
def test_actions_without_an_env_axis_are_refused_naming_the_batch_expected(backend, make_venv, space, actions, message):
    """A scalar, a 0-d array or a dict of scalars has no env axis: ValueError naming the batch expected (SB3 and
    Gymnasium fail on it with an IndexError or TypeError), and nothing reaches an env."""
    venv = make_venv(backend, [functools.partial(ActionSpaceEnv, space) for _ in range(2)])
    venv.reset()
    with pytest.raises(ValueError, match=r"actions must hold one action per env: " + message):
        venv.step(actions)
    assert venv.get_attr("received") == [[], []]


def test_good_actions_in_every_accepted_layout_pass_the_check():
    """Integer dtypes of any width, bools for MultiBinary, (n, 1) for Discrete and lists all pass."""
    check = make_actions_checker(DISCRETE)
    for actions in (np.array([1, 3], np.int8), np.array([[1], [3]]), [1, 3], np.array([2, 2], np.uint64)):
        check(actions, 2)
    make_actions_checker(spaces.MultiBinary(2))(np.array([[True, False], [False, False]]), 2)
    make_actions_checker(spaces.Box(-1, 1, (2,)))(np.array([[1, 0], [0, 1]], np.int32), 2)  # ints cast to float


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.bool_, np.int8, np.uint8, np.int64, np.complex64]
)
@pytest.mark.parametrize("num_envs", [2, 100], ids=["small-batch", "large-batch"])
def test_multibinary_accepts_any_numeric_dtype_whose_values_are_0_or_1(dtype, num_envs):
    """As Gymnasium's ``MultiBinary.contains`` (SB3's PPO / A2C send float32 ``0.`` / ``1.``, Bernoulli samples);
    batches over 256 values take the vectorized path."""
    space = spaces.MultiBinary(4)
    batch = (np.arange(num_envs * 4).reshape(num_envs, 4) % 3 == 0).astype(dtype)
    assert all(space.contains(row) for row in batch)  # the peer's rule
    make_actions_checker(space)(batch, num_envs)


@pytest.mark.parametrize(
    ("dtype", "value", "message"),
    [
        (np.float32, 0.5, r"must be integers, got dtype float32 with values other than 0 and 1"),
        (np.float64, 2.0, r"must be integers, got dtype float64 with values other than 0 and 1"),
        (np.float64, -1.0, r"must be integers, got dtype float64 with values other than 0 and 1"),
        (np.float64, np.nan, r"must be integers, got dtype float64 with values other than 0 and 1"),
        (np.float16, np.inf, r"must be integers, got dtype float16 with values other than 0 and 1"),
        (np.complex64, 1j, r"must be integers, got dtype complex64 with values other than 0 and 1"),
        (np.int64, 2, r"out of range for action space MultiBinary\(4\)"),
        (np.int8, -1, r"out of range for action space MultiBinary\(4\)"),
    ],
)
@pytest.mark.parametrize("num_envs", [2, 100], ids=["small-batch", "large-batch"])
def test_multibinary_values_other_than_0_or_1_are_refused(dtype, value, message, num_envs):
    space = spaces.MultiBinary(4)
    bad = np.ones((num_envs, 4), dtype)
    bad[num_envs - 1, 2] = value
    assert not space.contains(bad[num_envs - 1])
    with pytest.raises(ValueError, match=message) as info:
        make_actions_checker(space)(bad, num_envs)
    assert f"envs [{num_envs - 1}] got [{bad[num_envs - 1].tolist()}]" in str(info.value)
    assert "for action space MultiBinary(4)" in str(info.value)


def test_partial_batch_send_checks_actions(make_venv):
    venv = make_venv("subproc", [functools.partial(ActionSpaceEnv, DISCRETE) for _ in range(3)])
    venv.async_reset()
    venv.recv()
    with pytest.raises(ValueError, match=r"out of range .*envs \[1\] got \[7\]"):
        venv.send(np.array([1, 7]), [0, 2])
    assert venv.get_attr("received") == [[], [], []]


@pytest.mark.parametrize(
    ("bad", "image", "expected"),
    [
        ("shape", False, r"expected shape \(3,\) and dtype float32.*got shape \(1,\) and dtype float32"),
        (
            "float-into-uint8",
            True,
            r"dtype uint8.*got shape \(2, 2, 1\) and dtype float64",
        ),
    ],
)
def test_observation_outside_the_space_is_an_error_naming_the_env(backend, make_venv, bad, image, expected):
    fns = [functools.partial(BadObsEnv, bad="none", image=image), functools.partial(BadObsEnv, bad=bad, image=image)]
    venv = make_venv(backend, fns)
    venv.reset()
    with pytest.raises(ValueError, match=expected) as info:
        venv.step(np.array([0, 0]))
    assert "observation_space" in str(info.value)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert re.search(r"env 1 during step", notes), notes


@pytest.mark.parametrize("bad", ["float64", "list"])
def test_same_kind_observations_are_cast_like_sb3(backend, make_venv, bad):
    """float64 arrays and lists of floats into a float32 space are stored (cast), as SB3 stores them."""
    venv = make_venv(backend, [functools.partial(BadObsEnv, bad=bad) for _ in range(2)])
    venv.reset()
    obs, _, _, _ = venv.step(np.array([0, 1]))
    expected = np.full((2, 3), 0.5 if bad == "float64" else 0.25, np.float32)
    assert obs.dtype == np.float32 and obs.tobytes() == expected.tobytes()

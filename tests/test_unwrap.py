"""Stacks of 3+ wrappers: unwrap_vec_wrapper, is_vecenv_wrapped, attribute forwarding and env_is_wrapped."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

import vecenv
from tests.conftest import build_venv
from tests.envs import MarkerWrapper, OtherWrapper
from vecenv import VecEnvWrapper, is_vecenv_wrapped, unwrap_vec_wrapper
from vecenv.wrappers.vec_check_nan import VecCheckNan
from vecenv.wrappers.vec_extract_dict_obs import VecExtractDictObs
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder


class DictRenderEnv(gym.Env):
    """Dict observations ``{"pos": [t, offset], "count": t}``; renders a uniform ``(8, 8)`` frame of ``10 * t``."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(self, offset: int = 0, render_mode: str | None = "rgb_array") -> None:
        self.offset = offset
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(-100.0, 100.0, (2,), np.float32), "count": spaces.Discrete(1000)}
        )
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self.t, self.offset], np.float32), "count": self.t}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), float(action[0]), False, False, {}

    def render(self) -> np.ndarray:
        return np.full((8, 8, 3), (10 * self.t) % 256, dtype=np.uint8)

    def double(self, x: int) -> int:
        return 2 * x + self.offset


def wrapped_env_fns() -> list:
    """Env 0: MarkerWrapper(TimeLimit(env)); env 1: TimeLimit(env)."""
    return [
        lambda: MarkerWrapper(TimeLimit(DictRenderEnv(offset=0), max_episode_steps=4)),
        lambda: TimeLimit(DictRenderEnv(offset=1), max_episode_steps=4),
    ]


class PassThrough(VecEnvWrapper):
    """A wrapper that changes nothing."""

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


class SubPassThrough(PassThrough):
    """A subclass, to check that unwrap_vec_wrapper matches subclasses."""


def wrap_in_stack(base: vecenv.VecEnv, video_folder: Path) -> list[vecenv.VecEnv]:
    """``VecCheckNan(VecExtractDictObs(VecVideoRecorder(base)))`` and its levels, outermost first."""
    recorder = VecVideoRecorder(base, str(video_folder), lambda step: step == 0, video_length=3)
    extract = VecExtractDictObs(recorder, key="pos")
    check = VecCheckNan(extract, raise_exception=True)
    return [check, extract, recorder, base]


@pytest.fixture
def stack(make_venv, tmp_path):
    """``VecCheckNan(VecExtractDictObs(VecVideoRecorder(DummyVecEnv)))`` and its levels, outermost first."""

    def build(backend: str = "dummy") -> list[vecenv.VecEnv]:
        return wrap_in_stack(make_venv(backend, wrapped_env_fns()), tmp_path)

    return build


@pytest.fixture(scope="module")
def shared_stacks(tmp_path_factory) -> Iterator[Callable[[str], list[vecenv.VecEnv]]]:
    """``shared(backend)``: one stack per backend, built on first use and closed at the end of the module, for the
    cases of a test that only asks the envs which wrappers they have (each case would otherwise build its own
    vec env; for Ray, start two actors)."""
    built: dict[str, list[vecenv.VecEnv]] = {}

    def shared(backend: str) -> list[vecenv.VecEnv]:
        if backend not in built:
            built[backend] = wrap_in_stack(build_venv(backend, wrapped_env_fns()), tmp_path_factory.mktemp("video"))
        return built[backend]

    yield shared
    for levels in built.values():
        levels[0].close()


def test_unwrap_vec_wrapper_finds_each_level(stack):
    check, extract, recorder, base = stack()
    assert unwrap_vec_wrapper(check, VecCheckNan) is check
    assert unwrap_vec_wrapper(check, VecExtractDictObs) is extract
    assert unwrap_vec_wrapper(check, VecVideoRecorder) is recorder
    assert unwrap_vec_wrapper(extract, VecVideoRecorder) is recorder
    assert unwrap_vec_wrapper(extract, VecCheckNan) is None  # only searches downwards
    assert unwrap_vec_wrapper(check, PassThrough) is None
    assert unwrap_vec_wrapper(check, VecEnvWrapper) is check  # the outermost wrapper
    assert unwrap_vec_wrapper(base, VecEnvWrapper) is None  # a base venv is not a wrapper
    for cls in (VecCheckNan, VecExtractDictObs, VecVideoRecorder):
        assert is_vecenv_wrapped(check, cls)
    assert not is_vecenv_wrapped(check, PassThrough)
    assert not is_vecenv_wrapped(base, VecCheckNan)
    assert not is_vecenv_wrapped(recorder, VecCheckNan)
    assert check.unwrapped is base


def test_unwrap_returns_the_outermost_match_and_subclasses(stack):
    check, _, recorder, _ = stack()
    outer_check = VecCheckNan(SubPassThrough(PassThrough(check)))
    assert unwrap_vec_wrapper(outer_check, VecCheckNan) is outer_check
    assert unwrap_vec_wrapper(outer_check.venv, VecCheckNan) is check
    assert unwrap_vec_wrapper(outer_check, PassThrough) is outer_check.venv  # SubPassThrough is a PassThrough
    assert unwrap_vec_wrapper(outer_check, SubPassThrough) is outer_check.venv
    assert unwrap_vec_wrapper(outer_check, VecVideoRecorder) is recorder
    assert outer_check.unwrapped is check.unwrapped


def test_attributes_are_found_down_the_stack(stack):
    """Unknown attributes come from the first level that has them (SB3's rule), methods bound to that level."""
    check, _, _, base = stack()
    outer = PassThrough(check)
    assert outer.raise_exception is True  # VecCheckNan, 1 level down
    assert outer.key == "pos"  # VecExtractDictObs, 2 levels down
    assert outer.video_length == 3  # VecVideoRecorder, 3 levels down
    assert outer.frames_per_sec == 5
    assert outer.step_id == 0
    assert outer.envs is base.envs  # DummyVecEnv, 4 levels down
    assert outer.check_array_value("x", np.array([np.nan])) == [("x", "nan")]
    assert outer.recorded_frame_count == 0  # a property of the recorder
    outer.reset()
    assert outer.recorded_frame_count == 1
    with pytest.raises(AttributeError):
        _ = outer.no_such_attribute


def test_ambiguous_attributes_raise(stack, tmp_path):
    """An attribute defined on two levels below the one asked is ambiguous (SB3's AttributeError)."""
    check, extract, _, _ = stack()
    double_check = PassThrough(VecCheckNan(check))
    with pytest.raises(AttributeError, match=r"ambiguous and hides attribute from vecenv\.wrappers\.vec_check_nan"):
        _ = double_check.raise_exception
    with pytest.raises(AttributeError, match="ambiguous"):
        _ = double_check.check_array_value
    # asked on a level that defines it, the attribute is not ambiguous
    assert double_check.venv.raise_exception is False
    assert double_check.venv.venv.raise_exception is True
    two_recorders = PassThrough(VecVideoRecorder(extract, str(tmp_path / "outer"), lambda step: False))
    with pytest.raises(AttributeError, match="ambiguous"):
        _ = two_recorders.step_id
    assert two_recorders.key == "pos"  # defined once: fine


@pytest.mark.parametrize("wrapper", [TimeLimit, MarkerWrapper, OtherWrapper])
def test_env_is_wrapped_through_the_stack(backend, shared_stacks, wrapper):
    """env_is_wrapped sees gymnasium wrappers inside the envs through every vec wrapper (both backends)."""
    check, *_ = shared_stacks(backend)
    expected = {TimeLimit: [True, True], MarkerWrapper: [True, False], OtherWrapper: [False, False]}[wrapper]
    assert check.env_is_wrapped(wrapper) == expected
    assert check.env_is_wrapped(wrapper, indices=1) == expected[1:]
    assert check.env_is_wrapped(wrapper, indices=[1, 0]) == expected[::-1]


def test_env_calls_through_the_stack(backend, stack):
    check, *_ = stack(backend)
    assert check.get_attr("offset") == [0, 1]
    assert check.get_attr("marker", indices=0) == ["marked"]
    assert check.env_method("double", 5) == [10, 11]
    assert check.has_attr("marker") is False  # env 1 has no MarkerWrapper
    check.set_attr("offset", 7, indices=[1])
    assert check.get_attr("offset") == [0, 7]


def test_the_stack_steps_checks_and_records(backend, stack, tmp_path):
    """The full stack works together: extracted obs, NaN check before the recorder, a decodable video."""
    check, _, recorder, base = stack(backend)
    obs = check.reset()
    np.testing.assert_array_equal(obs, [[0, 0], [0, 1]])
    assert check.observation_space == spaces.Box(-100.0, 100.0, (2,), np.float32)
    for t in (1, 2):
        obs, rewards, dones, _ = check.step(np.array([[0.5], [-0.5]], np.float32))
        np.testing.assert_array_equal(obs, [[t, 0], [t, 1]])
        np.testing.assert_array_equal(rewards, [0.5, -0.5])
    with pytest.raises(ValueError, match=r"found nan in actions \(env 1\)"):
        check.step(np.array([[0.0], [np.nan]], np.float32))
    assert recorder.step_id == 2  # the bad actions never reached the envs
    np.testing.assert_array_equal(check.render(), vecenv.tile_images(base.get_images()))
    # terminal observations are extracted too (TimeLimit ends episodes after 4 steps)
    check.step(np.zeros((2, 1), np.float32))
    _, _, dones, infos = check.step(np.zeros((2, 1), np.float32))
    assert dones.tolist() == [True, True]
    np.testing.assert_array_equal(infos[1]["terminal_observation"], [4, 1])
    assert not recorder.recording  # 3 steps recorded: done
    check.close()
    with pytest.raises(vecenv.ClosedVecEnvError):
        base.reset()
    capture = cv2.VideoCapture(str(tmp_path / "rl-video-step-0-to-step-3.mp4"))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    assert len(frames) == 4
    assert frames[0].shape == (16, 8, 3)
    means = [frame.mean() for frame in frames]
    assert all(later > earlier + 5 for earlier, later in itertools.pairwise(means))


def test_recorder_on_top_of_other_wrappers(make_venv, tmp_path):
    """Another order: the recorder outermost reads render_mode and fps through the wrappers."""
    base = make_venv("dummy", wrapped_env_fns())
    recorder = VecVideoRecorder(
        VecCheckNan(VecExtractDictObs(PassThrough(base), key="count")), str(tmp_path), lambda step: step == 1, 2
    )
    assert recorder.render_mode == "rgb_array"
    assert recorder.frames_per_sec == 5
    assert unwrap_vec_wrapper(recorder, PassThrough) is recorder.venv.venv.venv
    assert recorder.reset().tolist() == [0, 0]
    for _ in range(4):
        recorder.step(np.zeros((2, 1), np.float32))
    recorder.close()
    assert recorder.video_name == "rl-video-step-1-to-step-3.mp4"


def test_wrappers_accept_envs_built_by_make_vec_env(tmp_path):
    """gymnasium.make's own wrappers are visible through the stack; render_mode is rgb_array by default."""
    venv = vecenv.make_vec_env("CartPole-v1", n_envs=1, seed=0)
    stacked = VecCheckNan(PassThrough(VecVideoRecorder(venv, str(tmp_path), lambda step: False)))
    try:
        assert stacked.env_is_wrapped(TimeLimit) == [True]
        assert stacked.env_is_wrapped(gym.wrappers.OrderEnforcing) == [True]
        assert stacked.env_is_wrapped(MarkerWrapper) == [False]
        assert stacked.render_mode == "rgb_array"
    finally:
        stacked.close()

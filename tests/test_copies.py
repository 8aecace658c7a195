"""Copies of vector envs (``copy.deepcopy``, ``pickle``), as SB3's ``DummyVecEnv`` and Gymnasium's ``SyncVectorEnv``
allow them: the copy steps copies of the envs from where the original was, on its own; vector envs whose envs run
in worker processes refuse, with a :class:`TypeError` that says so, and go on working.

The expected values come from :class:`tests.reference.ReferenceVecEnv`, copied with ``copy.deepcopy`` at the same
point (plain envs stepped by hand).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import vecenv.gymnasium as vg
from vecenv import DummyVecEnv, SubprocVecEnv
from vecenv.errors import ClosedVecEnvError

from .envs import CounterEnv
from .reference import ReferenceVecEnv, assert_step_equal

N = 3
COPIES: dict[str, Callable[[Any], Any]] = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda venv: pickle.loads(pickle.dumps(venv)),
}


def _env_fns() -> list[Callable[[], gym.Env]]:
    # episodes of 3 to 5 steps: the copies meet episode ends (terminal observations, automatic resets)
    return [partial(CounterEnv, episode_len=3, offset=i) for i in range(N)]


def _actions(step: int) -> np.ndarray:
    return np.array([(step + i) % 3 for i in range(N)], dtype=np.int64)


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("obs_slots", [0, 3], ids=["copied-obs", "obs-slots"])
def test_a_copy_of_a_dummy_vec_env_steps_on_its_own_from_where_the_original_was(how: str, obs_slots: int) -> None:
    venv = DummyVecEnv(_env_fns(), obs_slots=obs_slots)
    reference = ReferenceVecEnv(_env_fns())
    venv.seed(11)
    np.testing.assert_array_equal(venv.reset(), reference.reset(seed=11))
    held = [venv.step(_actions(step))[0] for step in range(4)]  # the caller holds observations (slots handed out)
    for step in range(4):
        reference.step(_actions(step))

    duplicate = COPIES[how](venv)
    reference_copy = copy.deepcopy(reference)
    try:
        for step in range(4, 12):
            assert_step_equal(duplicate, reference_copy, _actions(step))
        # the original did not move while the copy stepped, and steps on as the reference does
        for step in range(4, 12):
            assert_step_equal(venv, reference, _actions(step))
        assert [env.t for env in duplicate.envs] == [env.t for env in reference_copy.envs]
        assert all(a is not b for a, b in zip(duplicate.envs, venv.envs, strict=True))
    finally:
        duplicate.close()
        venv.close()
    assert len(held) == 4


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_of_a_closed_dummy_vec_env_is_closed(how: str) -> None:
    venv = DummyVecEnv(_env_fns())
    venv.reset()
    venv.close()
    duplicate = COPIES[how](venv)
    with pytest.raises(ClosedVecEnvError):
        duplicate.step(_actions(0))
    duplicate.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_of_a_sync_vector_env_steps_on_its_own_as_gymnasiums(how: str) -> None:
    ours = vg.SyncVectorEnv(_env_fns())
    theirs = gym.vector.SyncVectorEnv(_env_fns())
    for envs in (ours, theirs):
        envs.reset(seed=5)
        for step in range(4):
            envs.step(_actions(step))
    ours_copy, theirs_copy = COPIES[how](ours), COPIES[how](theirs)
    try:
        for step in range(4, 12):
            got = ours_copy.step(_actions(step))
            expected = theirs_copy.step(_actions(step))
            for a, b in zip(got[:4], expected[:4], strict=True):
                np.testing.assert_array_equal(a, b)
            assert sorted(got[4]) == sorted(expected[4])
        # the originals did not move
        np.testing.assert_array_equal(ours.step(_actions(4))[0], theirs.step(_actions(4))[0])
    finally:
        for envs in (ours_copy, theirs_copy, ours, theirs):
            envs.close()


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("kind", ["subproc", "async"])
def test_vector_envs_in_worker_processes_refuse_copies_and_go_on(how: str, kind: str) -> None:
    if kind == "subproc":
        venv: Any = SubprocVecEnv(_env_fns(), n_workers=2)
        venv.reset()
    else:
        venv = vg.AsyncVectorEnv(_env_fns(), n_workers=2)
        venv.reset(seed=0)
    try:
        name = "SubprocVecEnv" if kind == "subproc" else "AsyncVectorEnv"  # (the class built, not an inner one)
        with pytest.raises(TypeError, match=f"^{name} cannot be copied or pickled: its envs run in worker processes"):
            COPIES[how](venv)
        result = venv.step(_actions(0))
        obs = result[0]
        # CounterEnv: [offset, episode, t, noise]; every env took its first step
        np.testing.assert_array_equal(obs[:, 0], np.arange(N))
        np.testing.assert_array_equal(obs[:, 2], np.ones(N))
    finally:
        venv.close()

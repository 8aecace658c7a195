"""vecenv.gymnasium: SyncVectorEnv / AsyncVectorEnv against Gymnasium's own classes and against envs stepped by hand.

Parity tests run Gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` and vecenv's drop-ins on the same env
factories, seeds and actions and compare every returned value exactly (types, dtypes, values, info keys in
order, ``_key`` masks, ``final_obs`` / ``final_info``). The seeds / options rule (honoured by automatic resets
too, which Gymnasium has no way to do) is checked against :class:`HandVectorEnv`, which steps single envs by
hand; that reference is itself checked against Gymnasium first.
"""

from __future__ import annotations

import contextlib
import copy
import io
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, CustomSpaceError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv

import vecenv.gymnasium as vg
from tests.envs_gym import (
    AttributeEnv,
    BoundsEnv,
    CustomSpaceEnv,
    EnvFaultError,
    OptionsEnv,
    ParityEnv,
    RaisingEnv,
    ReservedKeysResetEnv,
    ReusedObjectsEnv,
    SlowEnv,
)
from vecenv import DummyVecEnv, SubprocVecEnv

MODES = list(AutoresetMode)
MODE_IDS = [mode.name for mode in MODES]
CTX = "fork" if "fork" in mp.get_all_start_methods() else None  # fast worker start for the parity runs
#: observation kind -> action kind used with it in the parity runs
LAYOUTS = {
    "box": "discrete",
    "discrete": "box",
    "dict": "dict",
    "tuple": "tuple",
    "nested": "box",
    "text": "discrete",
    "sequence": "discrete",
}
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "cleanrl_ppo.py")


def env_fns(obs_kind: str = "box", n: int = 3, episode_len: int = 2, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    action_kind = kwargs.pop("action_kind", LAYOUTS[obs_kind])
    return [partial(ParityEnv, obs_kind, action_kind, i, episode_len, **kwargs) for i in range(n)]


def assert_same(actual: Any, expected: Any, where: str = "", ordered: bool = True) -> None:
    """Exact equality of nested results: same types, dtypes, shapes, values and (if ``ordered``) key order."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {type(actual).__name__} instead of dict"
        if ordered:
            assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        else:
            assert sorted(actual) == sorted(expected), f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]", ordered)
    elif isinstance(expected, tuple):
        assert type(actual) is type(expected), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]", ordered)
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: {type(actual).__name__} instead of ndarray"
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        if expected.dtype == object:
            for i, (a, e) in enumerate(zip(actual.tolist(), expected.tolist(), strict=True)):
                assert_same(a, e, f"{where}[{i}]", ordered)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def run_parity(ref: VectorEnv, ours: VectorEnv, steps: int, *, mask_resets: bool, ordered: bool = True) -> int:
    """Step both with the same seeds and sampled actions, comparing everything; return the number of episode ends.

    In DISABLED mode finished envs are reset with ``reset_mask``; with ``mask_resets`` random masked resets
    (with per-env seeds) happen every 5 steps in the other modes too.
    """
    try:
        n = ref.num_envs
        assert ours.num_envs == n
        assert ours.single_observation_space == ref.single_observation_space
        assert ours.observation_space == ref.observation_space
        assert ours.single_action_space == ref.single_action_space
        assert ours.action_space == ref.action_space
        assert ours.metadata == ref.metadata
        assert ours.render_mode == ref.render_mode
        assert_same(ours.reset(seed=123), ref.reset(seed=123), "reset", ordered)
        space = ref.action_space
        space.seed(7)
        rng = np.random.default_rng(1)
        mode = ref.metadata["autoreset_mode"]
        ends = 0
        for t in range(steps):
            actions = space.sample()
            expected = ref.step(copy.deepcopy(actions))
            actual = ours.step(copy.deepcopy(actions))
            assert_same(actual, expected, f"step {t}", ordered)
            assert actual[1].dtype == np.float64
            done = expected[2] | expected[3]
            ends += int(done.sum())
            if mode is AutoresetMode.DISABLED and done.any():
                mask = done.copy()
            elif mask_resets and t % 5 == 4:
                mask = rng.random(n) < 0.5
                mask[t % n] = True
            else:
                continue
            seeds = [1000 + 10 * t + i for i in range(n)]
            assert_same(
                ours.reset(seed=seeds, options={"reset_mask": mask.copy(), "start": 3}),
                ref.reset(seed=seeds, options={"reset_mask": mask.copy(), "start": 3}),
                f"masked reset after step {t}",
                ordered,
            )
        return ends
    finally:
        ref.close()
        ours.close()


# --- parity with Gymnasium --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("obs_kind", list(LAYOUTS))
def test_sync_matches_gymnasium_sync(obs_kind: str, mode: AutoresetMode) -> None:
    fns = env_fns(obs_kind)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    ours = vg.SyncVectorEnv(fns, autoreset_mode=mode)
    assert isinstance(ours, VectorEnv)
    assert run_parity(ref, ours, 24, mask_resets=True) >= 6


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("obs_kind", ["box", "discrete", "dict", "tuple", "nested", "text"])
def test_async_matches_gymnasium_async_shared_memory(obs_kind: str, mode: AutoresetMode) -> None:
    fns = env_fns(obs_kind)
    # Gymnasium 1.4 reads Text observations from shared memory once, at construction, and returns those
    # (empty) strings ever after: for Text the reference is its pickled path, which returns the envs' strings
    ref_shared = obs_kind != "text"
    ref = gym.vector.AsyncVectorEnv(fns, shared_memory=ref_shared, context=CTX, autoreset_mode=mode)
    ours = vg.AsyncVectorEnv(fns, shared_memory=True, context=CTX, autoreset_mode=mode)
    # without shared memory Gymnasium's workers keep a pending NEXT_STEP autoreset across a masked reset
    mask_resets = ref_shared or mode is not AutoresetMode.NEXT_STEP
    assert run_parity(ref, ours, 16, mask_resets=mask_resets) >= 4


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("obs_kind", ["text", "sequence", "nested"])
def test_async_matches_gymnasium_async_pickled(obs_kind: str, mode: AutoresetMode) -> None:
    fns = env_fns(obs_kind)
    ref = gym.vector.AsyncVectorEnv(fns, shared_memory=False, context=CTX, autoreset_mode=mode)
    ours = vg.AsyncVectorEnv(fns, shared_memory=False, context=CTX, autoreset_mode=mode, n_workers=2)
    # Gymnasium's workers without shared memory keep a pending NEXT_STEP autoreset across a masked reset (it
    # then drops the env's next action): compare masked resets only where Gymnasium is right
    mask_resets = mode is not AutoresetMode.NEXT_STEP
    assert run_parity(ref, ours, 16, mask_resets=mask_resets) >= 4


def test_async_default_context_and_one_process_per_env() -> None:
    """vecenv's default start method (forkserver) and Gymnasium's layout (one env per worker) give the same."""
    fns = env_fns("dict", n=2)
    ref = gym.vector.AsyncVectorEnv(fns, context=CTX)
    ours = vg.AsyncVectorEnv(fns, n_workers=2)
    assert ours.n_workers == 2 and len(ours.processes) == 2
    assert run_parity(ref, ours, 12, mask_resets=True) >= 3


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_async_with_parent_envs_matches_gymnasium_async(mode: AutoresetMode) -> None:
    """parent_envs=2 (this process steps envs 0, 1, one worker env 2): the same as Gymnasium's AsyncVectorEnv,
    masked resets included; the worker processes are the only processes listed."""
    fns = env_fns("dict")
    ref = gym.vector.AsyncVectorEnv(fns, context=CTX, autoreset_mode=mode)
    ours = vg.AsyncVectorEnv(fns, context=CTX, autoreset_mode=mode, parent_envs=2)
    assert ours.n_workers == 1 and len(ours.processes) == 1
    assert run_parity(ref, ours, 14, mask_resets=True) >= 3


def test_async_parent_envs_with_timeouts_and_max_concurrency() -> None:
    """With parent_envs, step_wait(timeout) waits for the workers and then steps this process's envs (same
    results as without a timeout); max_concurrency counts this process as one stepper, and 1 is refused."""
    fns = env_fns("box", n=4)
    ours = vg.AsyncVectorEnv(fns, context=CTX, parent_envs=1, max_concurrency=2)
    ref = gym.vector.SyncVectorEnv(fns)
    try:
        assert ours.n_workers == 1
        assert_same(ours.reset(seed=3), ref.reset(seed=3))
        for _ in range(6):
            actions = ref.action_space.sample()
            ours.step_async(actions)
            assert_same(ours.step_wait(timeout=30.0), ref.step(actions))
    finally:
        ours.close()
        ref.close()
    with pytest.raises(ValueError, match=r"max_concurrency` must be at least 2 with parent_envs=1"):
        vg.AsyncVectorEnv(fns, context=CTX, parent_envs=1, max_concurrency=1)
    with pytest.raises(ValueError, match=r"parent_envs must be an integer in 0\.\.3"):
        vg.AsyncVectorEnv(fns, context=CTX, parent_envs=4)


def test_sync_without_copy_matches() -> None:
    fns = env_fns("text")
    ref = gym.vector.SyncVectorEnv(fns, copy=False)
    ours = vg.SyncVectorEnv(fns, copy=False)
    assert run_parity(ref, ours, 10, mask_resets=False) >= 2


def test_reset_mask_resets_only_those_envs() -> None:
    """By hand: the masked envs start a new episode with the given seeds and options; the others are untouched."""
    fns = env_fns("box", n=3)
    for ours in (vg.SyncVectorEnv(fns), vg.AsyncVectorEnv(fns, context=CTX)):
        obs, infos = ours.reset(seed=[5, 6, 7])
        obs, *_ = ours.step(np.array([1, 1, 1]))
        mask = np.array([False, True, False])
        new_obs, infos = ours.reset(seed=[50, 60, 70], options={"reset_mask": mask, "start": 2})
        by_hand = ParityEnv("box", "discrete", 1, 2)
        by_hand.reset(seed=6)
        by_hand.step(1)
        expected_row, expected_info = by_hand.reset(seed=60, options={"start": 2})
        np.testing.assert_array_equal(new_obs[[0, 2]], obs[[0, 2]])
        np.testing.assert_array_equal(new_obs[1], expected_row)
        assert sorted(infos) == sorted(
            ["episode", "seed", "start", "odd_episode", "_episode", "_seed", "_start", "_odd_episode"]
        )
        assert infos["odd_episode"][1].tolist() == expected_info["odd_episode"].tolist() == [1, 1]
        assert infos["seed"].tolist() == [0, 60, 0] and infos["_seed"].tolist() == [False, True, False]
        assert infos["start"][1] == expected_info["start"] == 2 and infos["episode"][1] == 1
        ours.close()


# --- seeds and options of the next reset, honoured by autoresets (vs envs stepped by hand) --------------


class _InfoBuilder(VectorEnv):
    """Only Gymnasium's own ``_add_info``, to build the expected infos."""

    def __init__(self, n: int) -> None:
        self.num_envs = n


class HandVectorEnv:
    """Gymnasium's SyncVectorEnv semantics written out over single envs, plus vecenv's rule for seeds / options
    set with ``seed()`` / ``set_options()``: each is used by the env's next reset (a call to ``reset`` or an
    autoreset), once; a seed / non-empty options given to ``reset`` itself win; ``None`` entries leave the
    pending value as it is."""

    def __init__(self, fns: list[Callable[[], gym.Env]], mode: AutoresetMode) -> None:
        self.envs = [fn() for fn in fns]
        self.n = len(self.envs)
        self.mode = mode
        self.pending_seed: list[int | None] = [None] * self.n
        self.pending_options: list[dict[str, Any] | None] = [None] * self.n
        self.needs_reset = [False] * self.n
        self.obs: list[Any] = [None] * self.n
        self.infos = _InfoBuilder(self.n)
        self.used_pending = 0
        self.used_pending_by_autoreset = 0

    def seed(self, seed: int | list[int | None]) -> list[int | None]:
        seeds = [seed + i for i in range(self.n)] if isinstance(seed, int) else list(seed)
        for i, s in enumerate(seeds):
            if s is not None:
                self.pending_seed[i] = s
        return seeds

    def set_options(self, options: dict[str, Any] | list[dict[str, Any] | None]) -> None:
        entries = [options] * self.n if isinstance(options, dict) else options
        for i, entry in enumerate(entries):
            if entry:
                self.pending_options[i] = dict(entry)

    def _reset_env(
        self, i: int, seed: int | None = None, options: dict[str, Any] | None = None, auto: bool = False
    ) -> Any:
        use_seed = seed if seed is not None else self.pending_seed[i]
        use_options = options if options else self.pending_options[i]
        used = (seed is None and self.pending_seed[i] is not None) + (
            not options and self.pending_options[i] is not None
        )
        self.used_pending += used
        self.used_pending_by_autoreset += used if auto else 0
        self.pending_seed[i] = None
        self.pending_options[i] = None
        self.needs_reset[i] = False
        kwargs: dict[str, Any] = {}
        if use_seed is not None:
            kwargs["seed"] = use_seed
        if use_options:
            kwargs["options"] = use_options
        return self.envs[i].reset(**kwargs)

    def reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        seeds = (
            [None] * self.n if seed is None else [seed + i for i in range(self.n)] if isinstance(seed, int) else seed
        )
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.n, dtype=bool))
        infos: dict[str, Any] = {}
        for i in np.flatnonzero(mask).tolist():
            self.obs[i], info = self._reset_env(i, seeds[i], options)
            infos = self.infos._add_info(infos, info, i)
        return np.stack(self.obs), infos

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        n = self.n
        rewards = np.zeros(n, dtype=np.float64)
        terminations = np.zeros(n, dtype=bool)
        truncations = np.zeros(n, dtype=bool)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if self.mode is AutoresetMode.NEXT_STEP and self.needs_reset[i]:
                self.obs[i], info = self._reset_env(i, auto=True)
            else:
                self.obs[i], rewards[i], terminations[i], truncations[i], info = env.step(actions[i])
                if terminations[i] or truncations[i]:
                    if self.mode is AutoresetMode.SAME_STEP:
                        infos = self.infos._add_info(infos, {"final_obs": self.obs[i], "final_info": info}, i)
                        self.obs[i], info = self._reset_env(i, auto=True)
                    elif self.mode is AutoresetMode.NEXT_STEP:
                        self.needs_reset[i] = True
            infos = self.infos._add_info(infos, info, i)
        return np.stack(self.obs), rewards, terminations, truncations, infos


def drive(hand: Any, ours: Any, schedule: dict[int, Callable[[Any], Any]], steps: int, ordered: bool) -> None:
    """Step both with the same actions; ``schedule[t](venv)`` runs on both before step ``t``; compare everything."""
    assert_same(ours.reset(seed=5), hand.reset(seed=5), "reset", ordered)
    rng = np.random.default_rng(3)
    for t in range(steps):
        if t in schedule:
            assert_same(schedule[t](ours), schedule[t](hand), f"schedule before step {t}", ordered)
        actions = rng.integers(0, 3, size=hand.n if hasattr(hand, "n") else hand.num_envs)
        expected = hand.step(actions)
        actual = ours.step(actions)
        assert_same(actual, expected, f"step {t}", ordered)
        done = expected[2] | expected[3]
        if done.any() and getattr(hand, "mode", None) is AutoresetMode.DISABLED:
            assert_same(
                ours.reset(options={"reset_mask": done}),
                hand.reset(options={"reset_mask": done}),
                f"reset {t}",
                ordered,
            )


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_hand_reference_matches_gymnasium(mode: AutoresetMode) -> None:
    """The by-hand reference reproduces Gymnasium's SyncVectorEnv (so it is a fair judge of the seed rule)."""
    fns = env_fns("box", n=3)
    hand = HandVectorEnv(fns, mode)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    schedule = {6: lambda v: v.reset(seed=[9, None, 11], options={"reset_mask": np.array([True, False, True])})}
    drive(hand, ref, schedule, 20, ordered=True)
    ref.close()


def _seed_schedule() -> dict[int, Callable[[Any], Any]]:
    def mask(*ids: int) -> np.ndarray:
        out = np.zeros(3, dtype=bool)
        out[list(ids)] = True
        return out

    return {
        # pending seeds / options for envs 0 and 2; env 1 gets options only
        1: lambda v: (v.seed([100, None, 300]), v.set_options([{"start": 4}, {"start": 6}, None]))[1],
        # a later call replaces env 2's pending seed and keeps env 0's (None leaves it)
        2: lambda v: v.seed([None, None, 333]),
        # a masked reset of env 1 uses its pending options; envs 0 and 2 keep theirs for their autoresets
        3: lambda v: v.reset(options={"reset_mask": mask(1)}),
        # seeds for every env; the reset's own seed beats env 0's pending one, its pending options still apply
        7: lambda v: (v.seed(1000), v.set_options({"start": 9}))[1],
        8: lambda v: v.reset(seed=[77, None, None], options={"reset_mask": mask(0)}),
        # two calls before the envs see them: the second keeps the first's seed where it gives None
        10: lambda v: (v.seed([500, None, None]), v.seed([None, 600, None]))[1],
        # pending seeds / options used by a full reset
        13: lambda v: v.set_options([None, {"start": 5}, None]),
        14: lambda v: v.reset(),
        16: lambda v: v.seed([None, 42, None]),
        # set right before a reset: the masked reset leaves env 0's options pending for its next reset
        18: lambda v: (v.set_options([{"start": 8}, None, None]), v.reset(options={"reset_mask": mask(1, 2)}))[1],
        # ... and a full reset right after seed() uses the seeds
        21: lambda v: (v.seed([7, None, 9]), v.reset())[1],
    }


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("cls", ["sync", "async"])
def test_seeds_and_options_reach_autoresets(cls: str, mode: AutoresetMode) -> None:
    fns = env_fns("box", n=3)
    hand = HandVectorEnv(fns, mode)
    if cls == "sync":
        ours: Any = vg.SyncVectorEnv(fns, autoreset_mode=mode)
    else:
        ours = vg.AsyncVectorEnv(fns, autoreset_mode=mode, context=CTX)
    try:
        drive(hand, ours, _seed_schedule(), 26, ordered=cls == "sync")
    finally:
        ours.close()
    # the rule was exercised: pending seeds / options were consumed by resets (autoresets in SAME/NEXT_STEP)
    assert hand.used_pending >= 10
    if mode is not AutoresetMode.DISABLED:
        assert hand.used_pending_by_autoreset >= 4


def test_seed_returns_the_seeds_and_validates() -> None:
    ours = vg.SyncVectorEnv(env_fns("box", n=3))
    assert ours.seed(10) == [10, 11, 12]
    assert ours.seed([1, None, 3]) == [1, None, 3]
    with pytest.raises(ValueError, match="expected 3, got 2"):
        ours.seed([1, 2])
    with pytest.raises(ValueError, match="expected 3, got 1"):
        ours.set_options([{"start": 1}])
    for seeds in ([1.5, 2.7, 3], "123", b"123", 1.5):  # (as reset(seed=...) refuses them: a float is truncated)
        with pytest.raises(gym.error.Error, match="Seed must be a python integer"):
            ours.seed(seeds)
    assert ours.seed([1, None, 3]) == [1, None, 3]  # (a refused call changed nothing)
    ours.close()


# --- calls into the envs --------------------------------------------------------------------------


def _wrapped_fns(n: int = 2) -> list[Callable[[], gym.Env]]:
    return [
        partial(gym.wrappers.TimeLimit, ParityEnv("box", "discrete", i, 2, render_mode="rgb_array"), 50)
        for i in range(n)
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")  # Gymnasium logs the error of its call("reset")
@pytest.mark.parametrize("cls", ["sync", "async"])
def test_call_get_attr_set_attr_render_match_gymnasium(cls: str) -> None:
    fns = _wrapped_fns()
    if cls == "sync":
        ref: Any = gym.vector.SyncVectorEnv(fns)
        ours: Any = vg.SyncVectorEnv(fns)
    else:
        ref = gym.vector.AsyncVectorEnv(fns, context=CTX)
        ours = vg.AsyncVectorEnv(fns, context=CTX)
    try:
        for venv in (ref, ours):
            venv.reset(seed=0)
        assert_same(ours.call("score", 10, bonus=1), ref.call("score", 10, bonus=1))
        assert_same(ours.call("level"), ref.call("level"))  # not callable: its value
        assert_same(ours.get_attr("level"), ref.get_attr("level"))
        assert_same(ours.get_attr("get_level"), ref.get_attr("get_level"))  # a method: called, as Gymnasium
        assert_same(ours.get_attr("render_mode"), ref.get_attr("render_mode"))
        assert_same(ours.np_random_seed, ref.np_random_seed)
        assert_same(ours.render(), ref.render())
        # set_wrapper_attr: the env inside TimeLimit gets the value (its method sees it)
        for venv in (ref, ours):
            venv.set_attr("level", [7, 8])
        assert_same(ours.call("get_level"), ref.call("get_level"))
        assert ours.call("get_level") == (7, 8)
        for venv in (ref, ours):
            venv.set_attr("level", 3)
        assert_same(ours.call("score", 2), ref.call("score", 2))
        for venv in (ours, ref):
            with pytest.raises(ValueError) as info:
                venv.set_attr("level", [1, 2, 3])
            assert str(info.value) == (
                "Values must be a list or tuple with length equal to the number of environments. "
                "Got `3` values for 2 environments."
            )
        with pytest.raises(AttributeError):
            ours.get_attr("no_such_attribute")
        with pytest.raises(AttributeError):
            ours.call("no_such_method")
        if cls == "async":
            errors = []
            for venv in (ref, ours):
                with pytest.raises(ValueError) as info:
                    venv.call("reset")
                errors.append(str(info.value))
            assert (
                errors[0] == errors[1] == "Trying to call function `reset` with `call`, use `reset` directly instead."
            )
            ours.step(np.array([0, 1]))  # still usable
    finally:
        ref.close()
        ours.close()


# --- errors -------------------------------------------------------------------------------------------


def _error(fn: Callable[[], Any]) -> BaseException:
    with pytest.raises(Exception) as info:  # the type is compared with Gymnasium's by the caller
        fn()
    return info.value


def _same_error(ours: Callable[[], Any], ref: Callable[[], Any], cls: type[BaseException]) -> BaseException:
    """Both raise ``cls`` with the same message (object addresses aside) and the same ``name`` attribute."""
    got, expected = _error(ours), _error(ref)
    assert isinstance(got, cls) and isinstance(expected, cls), (got, expected)
    assert re.sub(r"0x[0-9a-f]+", "0x", str(got)) == re.sub(r"0x[0-9a-f]+", "0x", str(expected))
    assert getattr(got, "name", None) == getattr(expected, "name", None)
    return got


def test_pending_call_errors_match_gymnasium() -> None:
    fns = env_fns("box", n=2)
    ref = gym.vector.AsyncVectorEnv(fns, context=CTX)
    ours = vg.AsyncVectorEnv(fns, context=CTX)
    try:
        for venv in (ref, ours):
            venv.reset(seed=0)
        _same_error(ours.step_wait, ref.step_wait, NoAsyncCallError)
        _same_error(ours.reset_wait, ref.reset_wait, NoAsyncCallError)
        _same_error(ours.call_wait, ref.call_wait, NoAsyncCallError)
        for venv in (ref, ours):
            venv.step_async(np.array([0, 1]))
        _same_error(
            lambda: ours.step_async(np.array([0, 1])), lambda: ref.step_async(np.array([0, 1])), AlreadyPendingCallError
        )
        _same_error(ours.reset_async, ref.reset_async, AlreadyPendingCallError)
        _same_error(lambda: ours.call_async("score", 1), lambda: ref.call_async("score", 1), AlreadyPendingCallError)
        _same_error(lambda: ours.get_attr("level"), lambda: ref.get_attr("level"), AlreadyPendingCallError)
        _same_error(lambda: ours.set_attr("level", 1), lambda: ref.set_attr("level", 1), AlreadyPendingCallError)
        _same_error(ours.reset_wait, ref.reset_wait, NoAsyncCallError)
        assert_same(ours.step_wait(), ref.step_wait())
        for venv in (ref, ours):
            venv.reset_async(seed=1)
        error = _same_error(
            lambda: ours.step_async(np.array([0, 1])), lambda: ref.step_async(np.array([0, 1])), AlreadyPendingCallError
        )
        assert isinstance(error, AlreadyPendingCallError) and error.name == "reset"
        assert_same(ours.reset_wait(), ref.reset_wait())
        for venv in (ref, ours):
            venv.call_async("score", 3)
        _same_error(ours.step_wait, ref.step_wait, NoAsyncCallError)
        assert_same(ours.call_wait(), ref.call_wait())
    finally:
        ref.close()
        ours.close()


@pytest.mark.parametrize("cls", ["sync", "async"])
def test_closed_env_errors(cls: str) -> None:
    fns = env_fns("box", n=2)
    ours: Any = vg.SyncVectorEnv(fns) if cls == "sync" else vg.AsyncVectorEnv(fns, context=CTX)
    ours.reset()
    ours.close()
    ours.close()  # idempotent
    assert ours.closed
    calls = [
        lambda: ours.step(np.array([0, 0])),
        ours.reset,
        lambda: ours.call("score", 1),
        lambda: ours.get_attr("level"),
    ]
    calls += [lambda: ours.set_attr("level", 1), ours.render, lambda: ours.seed(1)]
    for call in calls:
        with pytest.raises(ClosedEnvironmentError) as info:
            call()
        assert str(info.value) == f"Trying to operate on `{type(ours).__name__}`, after a call to `close()`."
    if cls == "async":
        ref = gym.vector.AsyncVectorEnv(fns, context=CTX)
        ref.close()
        for name in ("step_wait", "reset_wait", "call_wait"):
            _same_error(getattr(ours, name), getattr(ref, name), ClosedEnvironmentError)


@pytest.mark.parametrize("cls", ["sync", "async"])
def test_reset_argument_errors_match_gymnasium(cls: str) -> None:
    fns = env_fns("box", n=2)
    ref: Any = gym.vector.SyncVectorEnv(fns)
    ours: Any = vg.SyncVectorEnv(fns) if cls == "sync" else vg.AsyncVectorEnv(fns, context=CTX)
    bad = [
        ({"seed": [1, 2, 3]}, ValueError),
        ({"options": {"reset_mask": [True, False]}}, TypeError),
        ({"options": {"reset_mask": np.array([True])}}, ValueError),
        ({"options": {"reset_mask": np.array([1, 0])}}, TypeError),
        ({"options": {"reset_mask": np.array([False, False])}}, ValueError),
    ]
    try:
        for kwargs, error in bad:
            _same_error(
                lambda k=kwargs: ours.reset(**copy.deepcopy(k)), lambda k=kwargs: ref.reset(**copy.deepcopy(k)), error
            )
        ours.reset(seed=1)  # still usable after refused resets
        ours.step(np.array([0, 1]))
    finally:
        ref.close()
        ours.close()


def test_reset_does_not_modify_the_callers_options() -> None:
    ours = vg.SyncVectorEnv(env_fns("box", n=2))
    options = {"reset_mask": np.array([True, True]), "start": 1}
    ours.reset(options=options)
    assert sorted(options) == ["reset_mask", "start"]  # Gymnasium pops reset_mask from the caller's dict
    ours.close()


@pytest.mark.filterwarnings("ignore::UserWarning")  # AsyncVectorEnv logs the error as Gymnasium does
@pytest.mark.parametrize("cls", ["sync", "async"])
def test_env_exception_is_reraised_with_its_type(cls: str) -> None:
    fns = env_fns("box", n=3)
    ours: Any = vg.SyncVectorEnv(fns) if cls == "sync" else vg.AsyncVectorEnv(fns, context=CTX)
    try:
        ours.reset(seed=0)
        ours.set_attr("level", [0, -1, 0])
        with pytest.raises(EnvFaultError, match="env 1 cannot step at level -1") as info:
            ours.step(np.array([0, 0, 0]))
        assert any("raised by env 1 during step" in note for note in info.value.__notes__)
        ours.set_attr("level", 0)
        obs, *_ = ours.step(np.array([0, 0, 0]))  # usable again; a reset puts the envs back in step
        assert obs.shape == (3, 4)
    finally:
        ours.close()


def test_disabled_mode_refuses_to_step_a_finished_env_like_gymnasium() -> None:
    fns = env_fns("box", n=2)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
    ours = vg.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
    for venv in (ref, ours):
        venv.reset(seed=0)
        for _ in range(2):
            *_, terminated, truncated, _ = venv.step(np.array([0, 0]))
        assert (terminated | truncated).tolist() == [True, False]
        with pytest.raises(AssertionError):
            venv.step(np.array([0, 0]))
        venv.reset(options={"reset_mask": np.array([True, False])})
        venv.step(np.array([0, 0]))
        venv.close()


def test_timeouts_raise_and_keep_the_call_pending() -> None:
    fns = [partial(SlowEnv, 0.4, i) for i in range(2)]
    ref = gym.vector.AsyncVectorEnv(fns, context=CTX)
    ours = vg.AsyncVectorEnv(fns, context=CTX)
    try:
        messages = []
        for venv in (ref, ours):
            venv.reset()
            venv.step_async(np.array([1, 0]))
            with pytest.raises(mp.TimeoutError) as info:
                venv.step_wait(timeout=0.05)
            messages.append(str(info.value))
        assert messages[0] == messages[1] == "The call to `step_wait` has timed out after 0.05 second(s)."
        # vecenv: the step is still pending and its results arrive (Gymnasium forgets the call)
        with pytest.raises(AlreadyPendingCallError):
            ours.step_async(np.array([0, 0]))
        obs, rewards, *_ = ours.step_wait()
        assert obs.tolist() == [[1.0], [101.0]] and rewards.tolist() == [1.0, 1.0]

        ours.reset_async(options={"slow": True})
        with pytest.raises(mp.TimeoutError, match=r"The call to `reset_wait` has timed out after 0.05 second\(s\)."):
            ours.reset_wait(timeout=0.05)
        obs, infos = ours.reset_wait(timeout=5)
        assert obs.tolist() == [[0.0], [1.0]] and infos["index"].tolist() == [0, 1]

        ours.call_async("slow", 3)
        with pytest.raises(mp.TimeoutError, match=r"The call to `call_wait` has timed out after 0.05 second\(s\)."):
            ours.call_wait(timeout=0.05)
        assert ours.call_wait() == (6, 7)
    finally:
        ref.close(terminate=True)
        ours.close()


def test_close_terminates_workers_with_a_pending_call() -> None:
    fns = [partial(SlowEnv, 5.0, i) for i in range(2)]
    for kwargs in ({"terminate": True}, {"timeout": 0.1}):
        ours = vg.AsyncVectorEnv(fns, context=CTX)
        ours.reset()
        processes = ours.processes
        ours.step_async(np.array([1, 1]))
        start = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Gymnasium's logger warns about the pending call
            ours.close(**kwargs)
        assert time.monotonic() - start < 3.0
        assert ours.closed and not any(process.is_alive() for process in processes)


def test_custom_spaces_shared_memory_refusals_match_gymnasium() -> None:
    custom = [partial(CustomSpaceEnv, i) for i in range(2)]
    got = _same_error(
        lambda: vg.AsyncVectorEnv(custom, context=CTX),
        lambda: gym.vector.AsyncVectorEnv(custom, context=CTX),
        ValueError,
    )
    assert isinstance(got.__cause__, CustomSpaceError)
    sequence = env_fns("sequence", n=2)
    _same_error(
        lambda: vg.AsyncVectorEnv(sequence, context=CTX),
        lambda: gym.vector.AsyncVectorEnv(sequence, context=CTX),
        TypeError,
    )
    # without shared memory (and in SyncVectorEnv) a custom space is batched as a tuple of the envs' values
    for ref, ours in (
        (gym.vector.SyncVectorEnv(custom), vg.SyncVectorEnv(custom)),
        (
            gym.vector.AsyncVectorEnv(custom, shared_memory=False, context=CTX),
            vg.AsyncVectorEnv(custom, shared_memory=False, context=CTX),
        ),
    ):
        assert ours.observation_space == ref.observation_space
        run_parity(ref, ours, 4, mask_resets=False)


def test_custom_action_space_errors_match_gymnasium() -> None:
    fns = [partial(CustomSpaceEnv, i, True) for i in range(2)]
    ref = gym.vector.SyncVectorEnv(fns)
    ours = vg.SyncVectorEnv(fns)
    for venv in (ref, ours):
        venv.reset()
    _same_error(lambda: ours.step(5), lambda: ref.step(5), CustomSpaceError)
    actions = tuple(np.array([0.5, 0.5], dtype=np.float32) for _ in range(2))
    assert_same(ours.step(actions), ref.step(actions))
    ref.close()
    ours.close()


# --- constructor ------------------------------------------------------------------------------------


def test_constructor_refusals_and_mapping() -> None:
    fns = env_fns("box", n=3)
    with pytest.raises(ValueError, match="custom `worker`"):
        vg.AsyncVectorEnv(fns, worker=lambda *args: None)
    with pytest.raises(ValueError, match="daemon=False"):
        vg.AsyncVectorEnv(fns, daemon=False)
    for value in ("2", 0):
        _same_error(
            lambda v=value: vg.AsyncVectorEnv(fns, max_concurrency=v),
            lambda v=value: gym.vector.AsyncVectorEnv(fns, max_concurrency=v),
            ValueError,
        )
    _same_error(
        lambda: vg.SyncVectorEnv(fns, observation_mode="other"),
        lambda: gym.vector.SyncVectorEnv(fns, observation_mode="other"),
        ValueError,
    )
    _same_error(
        lambda: vg.SyncVectorEnv(fns, observation_mode=(1, 2)),
        lambda: gym.vector.SyncVectorEnv(fns, observation_mode=(1, 2)),
        TypeError,
    )
    with pytest.raises(ValueError):
        vg.SyncVectorEnv(fns, autoreset_mode="Sometimes")
    ours = vg.AsyncVectorEnv(fns, context="spawn", max_concurrency=1, autoreset_mode="SameStep")
    try:
        assert ours._sub.start_method == "spawn" and ours.n_workers == 1 and len(ours.processes) == 1
        assert (
            ours.autoreset_mode is AutoresetMode.SAME_STEP
            and ours.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        )
        assert ours.daemon is True and ours.worker is None and ours.shared_memory is True
        obs, _ = ours.reset(seed=0)
        assert obs.shape == (3, 4)
    finally:
        ours.close()


@pytest.mark.parametrize("cls", ["sync", "async"])
def test_observation_mode_different_and_custom_spaces(cls: str) -> None:
    fns = [partial(BoundsEnv, i) for i in range(3)]
    make: Any = (
        (
            lambda mode: gym.vector.SyncVectorEnv(fns, observation_mode=mode),
            lambda mode: vg.SyncVectorEnv(fns, observation_mode=mode),
        )
        if cls == "sync"
        else (
            lambda mode: gym.vector.AsyncVectorEnv(fns, observation_mode=mode, context=CTX),
            lambda mode: vg.AsyncVectorEnv(fns, observation_mode=mode, context=CTX),
        )
    )
    make_ref, make_ours = make
    ref, ours = make_ref("different"), make_ours("different")
    assert ours.observation_space == ref.observation_space
    assert ours.observation_space.high[:, 0].tolist() == [1, 2, 3]
    assert ours.get_attr("observation_space") == tuple(BoundsEnv(i).observation_space for i in range(3))
    run_parity(ref, ours, 8, mask_resets=False)
    custom = (spaces.Box(-5, 5, (3, 2), np.float32), spaces.Box(-5, 5, (2,), np.float32))
    run_parity(make_ref(custom), make_ours(custom), 6, mask_resets=False)
    # spaces that differ in bounds are refused in "same" mode, shapes that differ in any mode
    with pytest.raises(RuntimeError, match="observation_mode='same'"):
        make_ours("same")
    wrong = [partial(BoundsEnv, 0), partial(BoundsEnv, 1, (3,))]
    if cls == "sync":
        _same_error(
            lambda: vg.SyncVectorEnv(wrong, observation_mode="different"),
            lambda: gym.vector.SyncVectorEnv(wrong, observation_mode="different"),
            ValueError,
        )
        tuple_mode = (spaces.Box(-5, 5, (2, 3), np.float32), spaces.Box(-5, 5, (3,), np.float32))
        _same_error(
            lambda: vg.SyncVectorEnv(wrong, observation_mode=tuple_mode),
            lambda: gym.vector.SyncVectorEnv(wrong, observation_mode=tuple_mode),
            RuntimeError,
        )
    else:
        _same_error(
            lambda: vg.AsyncVectorEnv(wrong, observation_mode="different", context=CTX),
            lambda: gym.vector.AsyncVectorEnv(wrong, observation_mode="different", context=CTX),
            ValueError,
        )
        tuple_mode = (spaces.Box(-5, 5, (2, 2), np.float32), spaces.Box(-5, 5, (2,), np.float32))
        with pytest.raises(RuntimeError, match="do not share a common shape and dtype"):
            vg.AsyncVectorEnv(wrong, observation_mode=tuple_mode, context=CTX)


def test_action_space_mismatch_is_a_runtime_error() -> None:
    fns = [partial(ParityEnv, "box", "discrete", 0), partial(ParityEnv, "box", "box", 1)]
    for build in (lambda: vg.SyncVectorEnv(fns), lambda: vg.AsyncVectorEnv(fns, context=CTX, n_workers=2)):
        with pytest.raises(RuntimeError, match="action space"):
            build()


# --- the names of gymnasium.vector, options of masked resets, env errors, attribute reads ----------


def test_every_name_of_gymnasium_vector_is_importable_from_vecenv_gymnasium() -> None:
    from vecenv.gymnasium import (  # the import a gymnasium.vector user rewrites
        AsyncVectorEnv,
        AutoresetMode,
        SyncVectorEnv,
        VectorActionWrapper,
        VectorEnv,
        VectorObservationWrapper,
        VectorRewardWrapper,
        VectorWrapper,
        utils,
    )

    assert set(gym.vector.__all__) <= set(vg.__all__)
    for name in gym.vector.__all__:
        if name in ("SyncVectorEnv", "AsyncVectorEnv"):
            assert getattr(vg, name) is not getattr(gym.vector, name)
            assert issubclass(getattr(vg, name), gym.vector.VectorEnv)
        else:  # re-exported: the very same object
            assert getattr(vg, name) is getattr(gym.vector, name), name
    assert AutoresetMode.SAME_STEP is gym.vector.AutoresetMode.SAME_STEP
    assert utils.batch_space is gym.vector.utils.batch_space
    assert issubclass(SyncVectorEnv, VectorEnv) and issubclass(AsyncVectorEnv, VectorEnv)
    for wrapper in (VectorWrapper, VectorObservationWrapper, VectorActionWrapper, VectorRewardWrapper):
        assert wrapper.__module__.startswith("gymnasium.")
    envs = VectorRewardWrapper(SyncVectorEnv(env_fns("box", n=2)))  # Gymnasium's wrappers wrap ours
    envs.rewards = lambda rewards: rewards * 2  # type: ignore[method-assign]
    envs.reset(seed=0)
    assert envs.step(np.array([0, 1]))[1].dtype == np.float64
    envs.close()


#: ``reset(options=...)`` as given (deep-copied: Gymnasium pops ``reset_mask`` from the caller's dict) and the
#: ``options`` each env's reset receives from Gymnasium 1.4 (Sync and Async alike; None: that env is not reset)
OPTIONS_CASES = [
    (None, ["None", "None"]),
    ({}, ["{}", "{}"]),
    ({"level": 2}, ["{'level': 2}", "{'level': 2}"]),
    ({"reset_mask": np.array([True, False])}, ["{}", None]),
    ({"reset_mask": np.array([False, True]), "level": 3}, [None, "{'level': 3}"]),
]


@pytest.mark.parametrize("cls", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_reset_options_each_env_receives_match_gymnasium(cls: str) -> None:
    kwargs: dict[str, Any] = {} if cls == "SyncVectorEnv" else {"context": CTX}
    ref = getattr(gym.vector, cls)([OptionsEnv, OptionsEnv], **kwargs)
    ours = getattr(vg, cls)([OptionsEnv, OptionsEnv], **kwargs)
    try:
        for venv in (ref, ours):
            venv.reset()
        for options, received in OPTIONS_CASES:
            _, expected = ref.reset(options=copy.deepcopy(options))
            _, infos = ours.reset(options=copy.deepcopy(options))
            assert_same(infos, expected, f"reset(options={options!r})")
            masked = zip(infos["options"], infos["_options"], strict=True)
            assert [value if reset else None for value, reset in masked] == received
    finally:
        ref.close()
        ours.close()


def _warning_texts(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(warning.message.args[0]) for warning in caught]  # type: ignore[union-attr]


def test_env_errors_are_logged_like_gymnasium() -> None:
    """Gymnasium's test_async_vector_subenv_error (tests/vector/test_async_vector_env.py), on ours; with one env
    per worker process (Gymnasium's layout), so that both envs that raise in the step are stepped."""
    envs = vg.AsyncVectorEnv([RaisingEnv] * 2, context=CTX)
    with warnings.catch_warnings(record=True) as caught:
        envs.reset(seed=[0, 0])
    assert len(caught) == 0
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ValueError, match="Error in reset") as info:
        envs.reset(seed=[1, 0])
    assert any("raised by env 0 during reset" in note for note in info.value.__notes__)  # vecenv's details stay
    envs.close()
    texts = _warning_texts(caught)
    assert len(texts) == 3, texts
    assert "Received the following error from Worker-0 - Shutting it down" in texts[0]
    assert 'in reset\n    raise ValueError("Error in reset")\nValueError: Error in reset\n\x1b[0m' in texts[1]
    assert texts[2] == "\x1b[31mERROR: Raising the last exception back to the main process.\x1b[0m"

    envs = vg.AsyncVectorEnv([RaisingEnv] * 3, context=CTX, n_workers=3)
    envs.reset()
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ValueError, match="Error in step") as info:
        envs.step([0, 1, 2])
    envs.close()
    texts = _warning_texts(caught)
    assert len(texts) == 5, texts
    workers = []
    for received, trace in (texts[0:2], texts[2:4]):
        match = re.match(
            r"\x1b\[31mERROR: Received the following error from Worker-([12]) - Shutting it down\x1b\[0m$", received
        )
        assert match, received
        workers.append(match.group(1))
        assert re.match(
            rf"\x1b\[31mERROR: Traceback \(most recent call last\):(?s:.)*in step(?s:.)*"
            rf"ValueError: Error in step with {match.group(1)}\n\x1b\[0m$",
            trace,
        ), trace
    assert sorted(workers) == ["1", "2"]
    assert workers[1] in str(info.value)  # the error raised is the one logged last
    assert texts[4] == "\x1b[31mERROR: Raising the last exception back to the main process.\x1b[0m"


def _printed(error: BaseException) -> str:
    """``error`` as the interpreter prints an uncaught exception (on Python 3.10 / 3.11 only that printer adds the
    "Did you mean" hint, from the error's ``name`` and ``obj``)."""
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
        sys.__excepthook__(type(error), error, error.__traceback__)
    return out.getvalue()


def _last_error_line(printed: str) -> str:
    return [line for line in printed.splitlines() if line.startswith("AttributeError: ")][-1]


def test_attribute_error_hint_survives_the_worker_process() -> None:
    with pytest.raises(AttributeError) as in_process:
        AttributeEnv(typo_in_init=True)
    expected = _last_error_line(_printed(in_process.value))
    assert expected.endswith(". Did you mean: 'level_count'?")  # what the interpreter prints in process
    with pytest.raises(AttributeError) as info:
        vg.AsyncVectorEnv([partial(AttributeEnv, True)] * 2, context=CTX)
    assert _last_error_line(_printed(info.value)) == expected
    assert info.value.name == "levle_count"
    venv = SubprocVecEnv([AttributeEnv, AttributeEnv], start_method=CTX)  # the same error path
    try:
        with pytest.raises(AttributeError) as info:
            venv.env_method("broken", indices=1)
        assert _last_error_line(_printed(info.value)) == expected
        assert any("raised by env 1" in note for note in info.value.__notes__)
    finally:
        venv.close()


@pytest.mark.filterwarnings("ignore::UserWarning")  # both log the pickling error (the log is tested above)
def test_get_attr_reads_each_attribute_once_like_gymnasium() -> None:
    ref = gym.vector.AsyncVectorEnv([AttributeEnv], context=CTX)
    ours = vg.AsyncVectorEnv([AttributeEnv, AttributeEnv], context=CTX)
    try:
        assert ref.get_attr("counted") == (1,) and ref.call("counted") == (2,)  # Gymnasium: one read each
        assert ours.get_attr("counted") == (1, 1)
        assert ours.call("counted") == (2, 2)
        assert ours.get_attr("reads") == (2, 2)
        for read in (ours.get_attr, ours.call):
            error = _error(lambda read=read: read("bad"))
            assert type(error) is ValueError and str(error) == "bad property"
        assert ours.get_attr("bad_reads") == (2, 2)  # one read per get_attr / call, not two
        expected = _error(lambda: ref.get_attr("lock"))
        for read in (ours.get_attr, ours.call):
            error = _error(lambda read=read: read("lock"))
            assert type(error) is type(expected) is TypeError
            assert str(error) == str(expected) == "cannot pickle '_thread.lock' object"
            assert re.match(r"vecenv: raised by env [01] during call$", error.__notes__[0])  # whichever came first
            assert "the result of call('lock') cannot be pickled" in error.__notes__[1]
        assert ours.get_attr("level_count") == (1, 1)  # still usable
    finally:
        ref.close(terminate=True)
        ours.close()


# --- CleanRL-style example (torch) ----------------------------------------------------------------


@pytest.mark.sb3
def test_cleanrl_ppo_example_runs() -> None:
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, EXAMPLE, "--total-timesteps", "512", "--num-envs", "4", "--num-steps", "64", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=os.path.dirname(EXAMPLE),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    returns = [line for line in lines if line.startswith("global_step=") and "episodic_return=" in line]
    assert len(returns) >= 5, result.stdout
    summary = [line for line in lines if line.startswith("finished episodes:")]
    assert summary and int(summary[0].split(":")[1].split()[0]) == len(returns)


@pytest.mark.parametrize("backend", ["sync", "async"])
def test_envs_with_different_render_modes_take_env_0s(backend: str) -> None:
    """CleanRL's ``capture_video and idx == 0``: only env 0 renders. Gymnasium's classes take env 0's
    ``render_mode`` (and render None for the others); so do vecenv's, where SB3's classes assert they agree."""
    pytest.importorskip("pygame")
    fns = [partial(gym.make, "CartPole-v1", render_mode="rgb_array"), partial(gym.make, "CartPole-v1")]
    ours = vg.SyncVectorEnv(fns) if backend == "sync" else vg.AsyncVectorEnv(fns, n_workers=2)
    theirs = gym.vector.SyncVectorEnv(fns)
    try:
        for envs in (ours, theirs):
            envs.reset(seed=0)
        assert ours.render_mode == theirs.render_mode == "rgb_array"
        ours_frames, theirs_frames = ours.render(), theirs.render()
        assert ours_frames[1] is None and theirs_frames[1] is None
        np.testing.assert_array_equal(ours_frames[0], theirs_frames[0])
    finally:
        ours.close()
        theirs.close()
    with pytest.raises(AssertionError, match="render_mode mode should be the same"):
        DummyVecEnv(fns)  # SB3's rule stays for SB3's classes


@pytest.mark.parametrize("copy_flag", [True, False])
def test_async_parent_envs_hand_out_copies_as_pickled_envs_do(copy_flag: bool) -> None:
    """Gymnasium's AsyncVectorEnv pickles everything between the envs and the caller; with ``parent_envs`` the
    envs this process steps hand out copies too: an observation the env changes in place later, what
    ``get_attr`` returns and what ``set_attr`` gave stay the caller's."""
    envs = vg.AsyncVectorEnv([ReusedObjectsEnv] * 2, n_workers=1, parent_envs=1, shared_memory=False, copy=copy_flag)
    try:
        envs.reset(seed=0)
        first = envs.step(np.zeros(2, dtype=np.int64))[0]
        envs.step(np.zeros(2, dtype=np.int64))
        assert [row[0].tolist() for row in first] == [[1.0, 1.0], [1.0, 1.0]]
        config = {"level": 1}
        envs.set_attr("config", config)
        config["level"] = 99
        got = envs.get_attr("config")
        assert got == ({"level": 1}, {"level": 1})
        got[0]["level"] = 7
        assert envs.get_attr("config") == ({"level": 1}, {"level": 1})
    finally:
        envs.close()


@pytest.mark.parametrize("backend", ["sync", "async"])
def test_next_step_autoreset_returns_the_reset_info_as_the_env_gave_it(backend: str) -> None:
    """In NEXT_STEP mode the step that resets an env returns its reset info, keys vecenv uses internally
    (``TimeLimit.truncated``, ``terminal_observation``) included, as Gymnasium's classes and vecenv's reset()."""
    fns = [ReservedKeysResetEnv] * 2
    ours = vg.SyncVectorEnv(fns) if backend == "sync" else vg.AsyncVectorEnv(fns, n_workers=1)
    theirs = gym.vector.SyncVectorEnv(fns)
    try:
        for envs in (ours, theirs):
            envs.reset(seed=0)
            envs.step(np.zeros(2, dtype=np.int64))
        ours_infos = ours.step(np.zeros(2, dtype=np.int64))[4]
        theirs_infos = theirs.step(np.zeros(2, dtype=np.int64))[4]
        assert (
            sorted(ours_infos)
            == sorted(theirs_infos)
            == sorted(
                [
                    "TimeLimit.truncated",
                    "_TimeLimit.truncated",
                    "terminal_observation",
                    "_terminal_observation",
                    "k",
                    "_k",
                ]
            )
        )
        for key in theirs_infos:
            np.testing.assert_array_equal(ours_infos[key], theirs_infos[key])
        assert ours.step(np.zeros(2, dtype=np.int64))[4] == {}  # the episode's one step: nothing to report
    finally:
        ours.close()
        theirs.close()


class _KeyOrderEnv(gym.Env):
    """A Dict action space whose keys are not sorted; the info names the keys of the action received, in order."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Dict(
        OrderedDict([("z", gym.spaces.Discrete(2)), ("a", gym.spaces.Box(-1.0, 1.0, (2,), np.float32))])
    )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        return 0, 0.0, False, False, {"keys": ",".join(action)}


@pytest.mark.parametrize("cls", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_dict_actions_reach_the_envs_with_the_keys_in_gymnasiums_order(cls: str) -> None:
    """Gymnasium's batched Dict space sorts the keys (batch_space), and each env gets its action in that order."""
    kwargs: dict[str, Any] = {"context": "fork"} if cls == "AsyncVectorEnv" else {}
    ours, theirs = (
        getattr(vg, cls)([_KeyOrderEnv] * 2, **kwargs),
        getattr(gym.vector, cls)([_KeyOrderEnv] * 2, **kwargs),
    )
    try:
        got = []
        for envs in (ours, theirs):
            envs.reset(seed=0)
            envs.action_space.seed(0)
            got.append(envs.step(envs.action_space.sample())[4]["keys"].tolist())
        assert got[0] == got[1] == ["a,z", "a,z"]
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("name", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_closing_an_object_whose_constructor_raised_does_nothing(name: str) -> None:
    """Gymnasium before 1.3 calls ``close()`` from ``VectorEnv.__del__``, also on an object whose constructor
    raised: vecenv's classes then have nothing to close, and raise nothing."""
    import vecenv.gymnasium as vg

    cls = getattr(vg, name)
    half_built = cls.__new__(cls)
    half_built.close()
    assert half_built.closed


class _EndsAfterOne(gym.Env):
    """Discrete(4) actions; the episode terminates at each step; observation: the last action (-1 after a reset)."""

    observation_space = spaces.Box(-1, 4, (1,), np.float32)
    action_space = spaces.Discrete(4)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.array([-1.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.array([float(action)], np.float32), 1.0, True, False, {}


@pytest.mark.parametrize("name", ["SyncVectorEnv", "AsyncVectorEnv"])
def test_gymnasium_rules_for_odd_actions_and_seeds(name: str) -> None:
    """As Gymnasium's classes: a batch with no env axis (``step(0)``) is a ``TypeError`` (vecenv's error is a
    ``ValueError`` too); in ``NEXT_STEP`` mode the action of an env that this step resets is not checked (it is
    ignored), while the others' still are; a seed that is not an integer is Gymnasium's ``Error``."""
    import vecenv.gymnasium as vg

    kwargs = {"n_workers": 1} if name == "AsyncVectorEnv" else {}
    envs = getattr(vg, name)(
        [_EndsAfterOne, _EndsAfterOne], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP, **kwargs
    )
    try:
        envs.reset(seed=0)
        with pytest.raises(TypeError, match="no env axis") as info:
            envs.step(0)
        assert isinstance(info.value, ValueError)
        envs.step(np.array([1, 2]))  # both episodes end
        obs, rewards, *_ = envs.step(np.array([4, 0]))  # 4 is out of range: env 0 is reset, its action ignored
        np.testing.assert_array_equal(obs[:, 0], [-1.0, -1.0])
        np.testing.assert_array_equal(rewards, [0.0, 0.0])
        with pytest.raises(ValueError, match=r"envs \[0\] got \[4\]"):  # a stepping env's action is checked
            envs.step(np.array([4, 0]))
        for seed in ([1.5, 2], "ab", 2.0):
            with pytest.raises(gym.error.Error, match="Seed must be a python integer"):
                envs.reset(seed=seed)  # type: ignore[arg-type]
        envs.reset(seed=[np.int64(3), None])
    finally:
        envs.close()

"""vecenv.adapters: to_gymnasium / from_gymnasium.

Expectations come from independent implementations stepped with the same env factories, seeds and
actions: Gymnasium's own ``SyncVectorEnv`` / ``AsyncVectorEnv`` (for ``to_gymnasium``) and vecenv's
``DummyVecEnv`` (for ``from_gymnasium``), or from values computed by hand from the deterministic envs
of :mod:`tests.envs`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import TimeLimit

from tests.envs import FRAME_SHAPE, CounterEnv, MarkerWrapper, SpaceEnv
from vecenv import ClosedVecEnvError, DummyVecEnv, SubprocVecEnv, VecMonitor, VecNormalize, tile_images
from vecenv.adapters import GymnasiumToVecEnv, VecEnvToGymnasium, from_gymnasium, to_gymnasium
from vecenv.errors import ActionsWithoutEnvAxisError, AlreadyPendingCallError, NoAsyncCallError

ALL_MODES = [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]

# --- env sets ----------------------------------------------------------------------------------------


def counter_mix() -> list[Callable[[], gym.Env]]:
    """Env 0 terminates every 2 steps, env 1 is truncated by TimeLimit every 3, env 2 truncates itself every 4."""
    return [
        functools.partial(CounterEnv, episode_len=2),
        lambda: TimeLimit(CounterEnv(episode_len=100, offset=1), max_episode_steps=3),
        functools.partial(CounterEnv, episode_len=2, end="truncate", offset=2),
    ]


def cartpole() -> list[Callable[[], gym.Env]]:
    """CartPole with episodes of at most 10 steps (terminated or truncated quickly)."""
    return [lambda: gym.make("CartPole-v1", max_episode_steps=10) for _ in range(3)]


def space_envs(obs_kind: str, action_kind: str) -> list[Callable[[], gym.Env]]:
    return [functools.partial(SpaceEnv, obs_kind, action_kind, offset=i, episode_len=2 + i) for i in range(2)]


class TextEnv(gym.Env):
    """Observation: a string ``"<offset>:<t>"`` (a space without a fixed-size dtype); episodes of 2 steps."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.observation_space = spaces.Text(max_length=8, charset="0123456789:")
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.t = 0
        return f"{self.offset}:{self.t}", {}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        self.t += 1
        return f"{self.offset}:{self.t}", float(action), self.t >= 2, False, {}


ENV_SETS: dict[str, Callable[[], list[Callable[[], gym.Env]]]] = {
    "counter": counter_mix,
    "cartpole": cartpole,
    "box-obs/discrete-act": lambda: space_envs("box", "discrete"),
    "discrete-obs/box-act": lambda: space_envs("discrete", "box"),
    "dict-obs/dict-act": lambda: space_envs("dict", "dict"),
    "tuple-obs/tuple-act": lambda: space_envs("tuple", "tuple"),
    "multibinary-obs": lambda: space_envs("multibinary", "discrete"),
    "text-obs": lambda: [functools.partial(TextEnv, offset=i) for i in range(2)],
}


def _integral(value: Any) -> Any:
    """Round float actions to integers, so SpaceEnv's rewards are exact in float32 (vecenv stores float32)."""
    if isinstance(value, dict):
        return {key: _integral(v) for key, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_integral(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return np.round(value)
    return value


def batched_actions(single_space: spaces.Space, n: int, steps: int, seed: int = 0) -> list[Any]:
    """``steps`` batches of actions in Gymnasium's batched layout (also accepted by vecenv)."""
    space = batch_space(single_space, n)
    space.seed(seed)
    return [_integral(space.sample()) for _ in range(steps)]


# --- comparisons -------------------------------------------------------------------------------------


def assert_same(actual: Any, expected: Any, where: str = "") -> None:
    """Exact equality; arrays must also have the same dtype and shape; dicts the same keys."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert set(actual) == set(expected), (where, sorted(actual), sorted(expected))
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), (where, type(actual), type(expected))
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), (where, type(actual))
        assert actual.dtype == expected.dtype, (where, actual.dtype, expected.dtype)
        assert actual.shape == expected.shape, (where, actual.shape, expected.shape)
        if expected.dtype == object:
            for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
                assert_same(a, e, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
    else:
        assert actual == expected, (where, actual, expected)


def assert_vec_infos(actual: list[dict], expected: list[dict], ignore: tuple[str, ...] = ()) -> None:
    """vecenv infos equal: terminal_observation with the same dtype, other values equal (numpy scalars allowed)."""
    assert len(actual) == len(expected)
    for i, (actual_info, expected_info) in enumerate(zip(actual, expected, strict=True)):
        got = {k: v for k, v in actual_info.items() if k not in ignore}
        want = {k: v for k, v in expected_info.items() if k not in ignore}
        assert set(got) == set(want), (i, sorted(got), sorted(want))
        assert got["TimeLimit.truncated"] is want["TimeLimit.truncated"], i
        for key, value in want.items():
            if key == "terminal_observation":
                assert_same(_plain(got[key]), _plain(value), f"infos[{i}][{key!r}]")
            else:
                assert _plain(got[key]) == _plain(value), (i, key, got[key], value)


def _plain(value: Any) -> Any:
    """Numpy scalars to Python values, dicts stay dicts (the order of dict keys does not matter)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


# --- to_gymnasium ------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_set", sorted(ENV_SETS))
def test_to_gymnasium_matches_sync_vector_env(env_set):
    """Same fns, seeds and actions: identical obs, rewards, terminations, truncations and infos (final_obs too)."""
    fns = ENV_SETS[env_set]()
    ours = to_gymnasium(DummyVecEnv(fns))
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    n = len(fns)
    assert_same(ours.reset(seed=3), ref.reset(seed=3), "reset")
    ended = 0
    for t, actions in enumerate(batched_actions(ref.single_action_space, n, steps=12)):
        got, want = ours.step(actions), ref.step(actions)
        assert_same(got, want, f"step {t}")
        ended += int(np.sum(want[2] | want[3]))
    assert ended >= n  # episodes did end during the run, so final_obs / final_info were compared
    seeds = [None, 11, 5][:n]  # None first: Gymnasium's _add_info cannot put None into an int array
    assert_same(ours.reset(seed=seeds), ref.reset(seed=seeds), "reset with a list of seeds")
    for actions in batched_actions(ref.single_action_space, n, steps=3, seed=1):
        assert_same(ours.step(actions), ref.step(actions), "steps after the second reset")
    ours.close()
    ref.close()


def test_to_gymnasium_counter_values_by_hand():
    """The infos of an episode end, written out: final_obs / final_info for the finished env, reset info on top."""
    envs = to_gymnasium(
        DummyVecEnv([functools.partial(CounterEnv, episode_len=2), functools.partial(CounterEnv, offset=1)])
    )
    obs, infos = envs.reset(seed=0)
    np.testing.assert_array_equal(obs[:, :3], [[0, 0, 0], [1, 0, 0]])
    assert list(infos["seed"]) == [0, 1] and infos["_seed"].tolist() == [True, True]
    envs.step(np.array([1, 1]))
    obs, rewards, terminations, truncations, infos = envs.step(np.array([2, 0]))
    np.testing.assert_array_equal(obs[:, :3], [[0, 1, 0], [1, 0, 2]])  # env 0 reset: episode 1, t 0
    assert rewards.dtype == np.float64 and rewards.tolist() == [3.0, 1.0]  # action + 0.5 * t
    assert terminations.tolist() == [True, False] and truncations.tolist() == [False, False]
    assert terminations.dtype == truncations.dtype == np.bool_
    assert infos["_final_obs"].tolist() == [True, False] and infos["final_obs"][1] is None
    np.testing.assert_array_equal(infos["final_obs"][0][:3], [0, 0, 2])
    assert infos["_final_info"].tolist() == [True, False]
    assert infos["final_info"]["t"].tolist()[0] == 2 and infos["final_info"]["_t"].tolist() == [True, False]
    assert infos["episode"].tolist() == [1, 0]  # env 0: its reset info; env 1: its step info
    assert infos["_seed"].tolist() == [True, False] and infos["seed"][0] is None
    assert infos["_t"].tolist() == [False, True]
    for key in ("terminal_observation", "TimeLimit.truncated", "_terminal_observation", "_TimeLimit.truncated"):
        assert key not in infos and key not in infos["final_info"]
    envs.close()


def test_to_gymnasium_spaces_and_metadata():
    venv = DummyVecEnv(space_envs("dict", "tuple"))
    envs = to_gymnasium(venv)
    assert isinstance(envs, VectorEnv) and isinstance(envs, VecEnvToGymnasium)
    assert envs.num_envs == 2
    assert envs.single_observation_space == venv.observation_space
    assert envs.single_action_space == venv.action_space
    assert envs.observation_space == batch_space(venv.observation_space, 2)
    assert envs.action_space == batch_space(venv.action_space, 2)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert envs.render_mode is None
    obs, _ = envs.reset()
    assert list(obs) == ["z", "a"]  # the space's key order
    assert (obs["z"].shape, obs["z"].dtype, obs["a"].shape, obs["a"].dtype) == ((2, 2, 3), np.float32, (2,), np.int64)
    envs.close()
    assert envs.closed
    with pytest.raises(ClosedVecEnvError):
        venv.reset()  # closing the adapter closed the vecenv env
    with pytest.raises(ClosedVecEnvError, match="closed VecEnvToGymnasium"):
        envs.step(np.zeros(2))


def test_to_gymnasium_seeds_and_options_reach_the_envs():
    venv = DummyVecEnv([functools.partial(CounterEnv, offset=i) for i in range(3)])
    envs = to_gymnasium(venv)
    obs, _ = envs.reset(seed=5, options={"start_t": 2})
    assert envs.get_attr("last_seed") == (5, 6, 7)
    assert envs.get_attr("last_options") == ({"start_t": 2},) * 3
    assert obs[:, 2].tolist() == [2, 2, 2]
    envs.reset(seed=[None, 9, 4])  # not consecutive: one seed per env
    assert envs.get_attr("last_seed") == (None, 9, 4)
    assert envs.get_attr("last_options") == (None, None, None)  # options apply to one reset only
    envs.reset()
    assert envs.get_attr("seeds_received") == ([5, None, None], [6, 9, None], [7, 4, None])
    with pytest.raises(ValueError, match="expected 3 entries, got 2"):
        envs.reset(seed=[1, 2])
    with pytest.raises(TypeError, match="seed"):
        envs.reset(seed="7")
    with pytest.raises(TypeError, match="options"):
        envs.reset(options=[{}])
    with pytest.raises(ValueError, match="reset_mask"):
        envs.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    envs.close()


def test_to_gymnasium_terminated_and_truncated_together():
    """An env both terminated and truncated is reported with both flags, as Gymnasium does."""
    fns = [functools.partial(CounterEnv, episode_len=1, end="both")]
    envs = to_gymnasium(DummyVecEnv(fns))
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    envs.reset(seed=0)
    ref.reset(seed=0)
    _, _, terminations, truncations, infos = envs.step(np.array([0]))
    _, _, ref_terminations, ref_truncations, ref_infos = ref.step(np.array([0]))
    assert (terminations.tolist(), truncations.tolist()) == ([True], [True])
    assert (ref_terminations.tolist(), ref_truncations.tolist()) == ([True], [True])
    assert_same(infos, ref_infos)


def test_to_gymnasium_through_vecenv_wrappers():
    """A wrapper stack: VecMonitor's episode stats land in final_info; reset infos are the base env's."""
    venv = VecMonitor(
        DummyVecEnv([functools.partial(CounterEnv, episode_len=2), functools.partial(CounterEnv, offset=1)])
    )
    envs = to_gymnasium(venv)
    envs.reset(seed=0)
    envs.step(np.array([1, 0]))
    _, _, terminations, _, infos = envs.step(np.array([2, 0]))
    assert terminations.tolist() == [True, False]
    # rewards 1 + 0.5 and 2 + 1.0: return 4.5 over 2 steps
    assert infos["final_info"]["_episode"].tolist() == [True, False]
    assert infos["final_info"]["episode"]["r"][0] == pytest.approx(4.5)
    assert infos["final_info"]["episode"]["l"][0] == 2
    assert infos["episode"].tolist()[0] == 1 and infos["_episode"].tolist() == [True, True]  # reset info of env 0
    envs.close()


def test_to_gymnasium_subproc_matches_sync():
    fns = [functools.partial(CounterEnv, episode_len=2 + i, offset=i) for i in range(3)]
    ours = to_gymnasium(SubprocVecEnv(fns, n_workers=2))
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert_same(ours.reset(seed=1), ref.reset(seed=1), "reset")
        for t, actions in enumerate(batched_actions(ref.single_action_space, 3, steps=6)):
            assert_same(ours.step(actions), ref.step(actions), f"step {t}")
    finally:
        ours.close()
        ref.close()


def test_to_gymnasium_calls_and_render():
    fns = [functools.partial(CounterEnv, offset=i, render_mode="rgb_array") for i in range(2)]
    envs = to_gymnasium(DummyVecEnv(fns))
    envs.reset(seed=0)
    assert envs.call("add", 1, b=2) == (12, 112)  # 100 * offset + 10 * a + b
    assert envs.call("custom_attr") == ("custom-0", "custom-1")  # not callable: its value, as SyncVectorEnv
    with pytest.raises(TypeError):
        envs.call("custom_attr", 1)
    assert envs.get_attr("offset") == (0, 1)
    envs.set_attr("custom_attr", ["x", "y"])
    assert envs.get_attr("custom_attr") == ("x", "y")
    envs.set_attr("custom_attr", "z")
    assert envs.get_attr("custom_attr") == ("z", "z")
    with pytest.raises(ValueError, match="one entry per env"):
        envs.set_attr("custom_attr", ["x"])
    frames = envs.render()
    assert isinstance(frames, tuple) and len(frames) == 2
    for offset, frame in enumerate(frames):
        assert_same(frame, np.full(FRAME_SHAPE, 10 * (offset + 1), dtype=np.uint8))
    envs.close()


def test_to_gymnasium_rejects_non_vecenv():
    with pytest.raises(TypeError, match=r"must be a vecenv VecEnv.*got SyncVectorEnv"):
        to_gymnasium(SyncVectorEnv([CounterEnv]))


# --- from_gymnasium ----------------------------------------------------------------------------------


def run_against_dummy(venv: Any, ref: DummyVecEnv, steps: int, mode: AutoresetMode, actions_seed: int = 0) -> int:
    """Step both with the same actions and compare everything; return the number of episode ends."""
    ignore = () if mode is AutoresetMode.SAME_STEP else ("options",)
    n = ref.num_envs
    ended = 0
    for t, actions in enumerate(batched_actions(ref.action_space, n, steps, seed=actions_seed)):
        obs, rewards, dones, infos = venv.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = ref.step(actions)
        assert_same(obs, ref_obs, f"obs at step {t}")
        assert_same(rewards, ref_rewards, f"rewards at step {t}")
        assert_same(dones, ref_dones, f"dones at step {t}")
        assert_vec_infos(infos, ref_infos)
        assert_vec_infos(
            [{**i, "TimeLimit.truncated": False} for i in venv.reset_infos],
            [{**i, "TimeLimit.truncated": False} for i in ref.reset_infos],
            ignore=ignore,
        )
        ended += int(ref_dones.sum())
    return ended


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("env_set", sorted(ENV_SETS))
def test_from_gymnasium_matches_dummy_vec_env(env_set, mode):
    """Every autoreset mode gives SB3's semantics: identical obs, rewards, dones, terminal obs and truncation flags."""
    fns = ENV_SETS[env_set]()
    venv = from_gymnasium(SyncVectorEnv(fns, autoreset_mode=mode))
    ref = DummyVecEnv(fns)
    assert isinstance(venv, GymnasiumToVecEnv)
    assert venv.vector_env_autoreset_mode is mode
    assert venv.autoreset_mode is AutoresetMode.SAME_STEP  # the adapter's own steps follow SB3's rule
    assert venv.observation_space == ref.observation_space and venv.action_space == ref.action_space
    assert venv.seed(3) == ref.seed(3)
    assert_same(venv.reset(), ref.reset(), "reset")
    assert_vec_infos(
        [{**i, "TimeLimit.truncated": False} for i in venv.reset_infos],
        [{**i, "TimeLimit.truncated": False} for i in ref.reset_infos],
    )
    assert run_against_dummy(venv, ref, steps=12, mode=mode) >= len(fns)
    venv.seed(20)
    ref.seed(20)
    assert_same(venv.reset(), ref.reset(), "second reset")
    run_against_dummy(venv, ref, steps=4, mode=mode, actions_seed=1)
    venv.close()
    ref.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED], ids=lambda m: m.name)
def test_from_gymnasium_resets_finished_envs_at_once(mode):
    """NEXT_STEP / DISABLED: the finished env is reset in the same step call, and its next action is not lost."""
    venv = from_gymnasium(SyncVectorEnv([functools.partial(CounterEnv, episode_len=1)], autoreset_mode=mode))
    venv.reset()
    for episode in range(3):
        obs, rewards, dones, infos = venv.step(np.array([2]))
        assert dones.tolist() == [True] and rewards.tolist() == [2.5]  # a real step: action 2 + 0.5 * t
        assert obs[0, 1:3].tolist() == [episode + 1, 0]  # first obs of the next episode
        assert infos[0]["terminal_observation"][1:3].tolist() == [episode, 1]
        assert infos[0]["TimeLimit.truncated"] is False
        assert venv.reset_infos[0]["episode"] == episode + 1
        assert venv.reset_infos[0]["options"] == {}  # Gymnasium passes options={} with reset_mask (documented)
    venv.close()


def test_from_gymnasium_async_vector_env():
    fns = counter_mix()
    venv = from_gymnasium(AsyncVectorEnv(fns))  # NEXT_STEP, shared memory
    ref = DummyVecEnv(fns)
    try:
        venv.seed(4)
        ref.seed(4)
        assert_same(venv.reset(), ref.reset())
        assert run_against_dummy(venv, ref, steps=6, mode=AutoresetMode.NEXT_STEP) >= 3
        assert venv.get_attr("offset", indices=[2, 0]) == [2, 0]
        with pytest.raises(AttributeError, match="does not expose its envs"):
            venv.env_is_wrapped(TimeLimit)
    finally:
        venv.close()
        ref.close()


def test_from_gymnasium_refuses_async_without_shared_memory_in_next_step():
    vector_env = AsyncVectorEnv([CounterEnv], shared_memory=False)
    try:
        with pytest.raises(ValueError, match=r"shared_memory=False\) in NEXT_STEP"):
            from_gymnasium(vector_env)
    finally:
        vector_env.close()


def test_from_gymnasium_round_trip():
    """from_gymnasium(to_gymnasium(venv)) behaves as venv itself."""
    fns = counter_mix()
    venv = from_gymnasium(to_gymnasium(DummyVecEnv(fns)))
    ref = DummyVecEnv(fns)
    venv.seed(8)
    ref.seed(8)
    assert_same(venv.reset(), ref.reset())
    assert run_against_dummy(venv, ref, steps=8, mode=AutoresetMode.SAME_STEP) >= 4
    assert venv.env_is_wrapped(TimeLimit) == [False, True, False]
    venv.close()


def test_to_gymnasium_of_from_gymnasium_matches_same_step_sync():
    """to_gymnasium(from_gymnasium(next-step env)) gives the same-step results of a SAME_STEP SyncVectorEnv."""
    fns = counter_mix()
    envs = to_gymnasium(from_gymnasium(SyncVectorEnv(fns)))
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    envs.reset(seed=2)
    ref.reset(seed=2)
    for t, actions in enumerate(batched_actions(ref.single_action_space, 3, steps=8)):
        got, want = envs.step(actions), ref.step(actions)
        assert_same(got[:4], want[:4], f"step {t}")
        for key in ("final_obs", "_final_obs", "_final_info"):
            if key in want[4]:
                assert_same(got[4][key], want[4][key], f"step {t} {key}")
    envs.close()


def test_vecenv_wrappers_on_from_gymnasium():
    """VecNormalize gives the same numbers as on DummyVecEnv; VecMonitor's episode returns are the sums by hand."""
    fns = counter_mix()
    venv = VecNormalize(from_gymnasium(SyncVectorEnv(fns)))
    ref = VecNormalize(DummyVecEnv(fns))
    venv.seed(0)
    ref.seed(0)
    assert_same(venv.reset(), ref.reset())
    for actions in batched_actions(ref.action_space, 3, steps=8):
        got, want = venv.step(actions), ref.step(actions)
        for a, e in zip(got[:3], want[:3], strict=True):
            assert_same(a, e)
        for a, e in zip(got[3], want[3], strict=True):
            if "terminal_observation" in e:
                assert_same(a["terminal_observation"], e["terminal_observation"])
    venv.close()
    ref.close()

    monitored = VecMonitor(from_gymnasium(SyncVectorEnv([functools.partial(CounterEnv, episode_len=3)])))
    monitored.reset()
    episodes = []
    for _ in range(6):
        _, _, dones, infos = monitored.step(np.array([1]))
        if dones[0]:
            episodes.append(infos[0]["episode"])
    # rewards 1 + 0.5 * t for t = 1, 2, 3: 6.0 per episode of 3 steps
    assert [(e["r"], e["l"]) for e in episodes] == [(6.0, 3), (6.0, 3)]
    monitored.close()


def test_from_gymnasium_seeds_options_and_async_errors():
    vector_env = SyncVectorEnv([functools.partial(CounterEnv, offset=i) for i in range(2)])
    venv = from_gymnasium(vector_env)
    venv.seed(10)
    venv.set_options({"start_t": 3})
    obs = venv.reset()
    assert [env.last_seed for env in vector_env.envs] == [10, 11]
    assert [env.last_options for env in vector_env.envs] == [{"start_t": 3}] * 2
    assert obs[:, 2].tolist() == [3, 3]
    venv.reset()  # seeds and options were used once
    assert [env.last_seed for env in vector_env.envs] == [None, None]
    assert [env.last_options for env in vector_env.envs] == [None, None]
    venv.set_options([{"start_t": 1}, {}])
    with pytest.raises(ValueError, match="ONE options dict"):
        venv.reset()
    venv.set_options(None)
    with pytest.raises(NoAsyncCallError):
        venv.step_wait()
    with pytest.raises(ValueError, match="expected 2 actions, got 3"):
        venv.step_async(np.array([0, 1, 2]))
    for no_env_axis in (0, np.int64(1)):  # (as vecenv's own vector envs: a ValueError and a TypeError)
        with pytest.raises(ActionsWithoutEnvAxisError, match=r"expected a batch of shape \(2,\), got .*no env axis"):
            venv.step_async(no_env_axis)
    venv.step_async(np.array([0, 1]))
    with pytest.raises(AlreadyPendingCallError):
        venv.step_async(np.array([0, 1]))
    assert venv.waiting
    venv.reset()  # discards the pending step
    assert not venv.waiting
    venv.close()
    venv.close()  # closing twice is fine
    assert venv.closed and vector_env.closed
    with pytest.raises(ClosedVecEnvError):
        venv.reset()
    with pytest.raises(ClosedVecEnvError):
        venv.step_async(np.array([0, 1]))


def test_from_gymnasium_per_env_action_lists():
    """A list with one action per env (vecenv's layout) reaches each env as DummyVecEnv's would."""
    fns = space_envs("box", "dict")
    venv = from_gymnasium(SyncVectorEnv(fns))
    ref = DummyVecEnv(fns)
    venv.reset()
    ref.reset()
    actions = [{"a": 2, "b": np.array([1.0, 3.0], np.float32)}, {"a": 1, "b": np.array([-2.0, 0.0], np.float32)}]
    _, rewards, _, _ = venv.step(actions)
    assert rewards.tolist() == ref.step(actions)[1].tolist() == [213.0, 80.0]  # a * 100 + b0 * 10 + b1
    venv.close()


def test_from_gymnasium_calls_and_render():
    fns = [
        lambda i=i: MarkerWrapper(TimeLimit(CounterEnv(offset=i, render_mode="rgb_array"), 50), marker=f"m{i}")
        for i in range(3)
    ]
    venv = from_gymnasium(SyncVectorEnv(fns))
    venv.reset()
    assert venv.render_mode == "rgb_array"
    assert venv.get_attr("marker") == ["m0", "m1", "m2"]
    assert venv.get_attr("offset", indices=[2, 0, -1]) == [2, 0, 2]
    assert venv.get_attr("offset", indices=1) == [1]
    assert venv.has_attr("marker") and not venv.has_attr("no_such_attribute")
    assert venv.env_method("add", 1, b=2) == [12, 112, 212]
    assert venv.env_method("add", 1, indices=[2, 1, 0]) == [210, 110, 10]
    with pytest.raises(NotImplementedError, match="indices"):
        venv.env_method("add", 1, indices=[0])
    with pytest.raises(IndexError, match="out of range"):
        venv.get_attr("offset", indices=3)
    venv.set_attr("marker", "new")
    assert venv.get_attr("marker") == ["new"] * 3
    with pytest.raises(NotImplementedError, match="indices"):
        venv.set_attr("marker", "x", indices=[1])
    assert venv.env_is_wrapped(TimeLimit) == [True] * 3
    assert venv.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics, indices=[0]) == [False]
    expected_frames = [np.full(FRAME_SHAPE, 10 * (i + 1), dtype=np.uint8) for i in range(3)]
    assert_same(venv.render(), tile_images(expected_frames))
    venv.close()


def test_from_gymnasium_rejects_non_vector_envs():
    with pytest.raises(TypeError, match=r"must be a gymnasium\.vector\.VectorEnv.*got CounterEnv"):
        from_gymnasium(CounterEnv())
    with pytest.raises(ValueError, match="autoreset_mode"):

        class BadMode(SyncVectorEnv):
            pass

        bad = BadMode([CounterEnv])
        bad.metadata["autoreset_mode"] = "sometimes"
        from_gymnasium(bad)


# --- an EnvPool-style pool (a stand-in with EnvPool's gymnasium-style API; tests/test_envpool.py uses envpool) ---


class FakeEnvPool:
    """EnvPool's gymnasium-style surface: single-env spaces, ``config``, ``reset(env_id)``, next-step autoreset.

    No ``metadata`` autoreset mode, infos without ``_key`` masks and with an ``env_id`` array.
    """

    def __init__(self, fns: list[Callable[[], gym.Env]], seed: int = 0, batch_size: int = 0) -> None:
        self._vec = SyncVectorEnv(fns)  # NEXT_STEP
        self._seed: int | None = seed  # EnvPool takes its seed in envpool.make, and seeds the first reset
        self.config = {"num_envs": len(fns), "batch_size": batch_size}
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space

    def __len__(self) -> int:
        return self.config["num_envs"]

    def reset(self, env_id: np.ndarray | None = None) -> tuple[Any, dict]:
        if env_id is None:
            obs, _ = self._vec.reset(seed=self._seed)
            self._seed = None
            return obs, {"env_id": np.arange(len(self))}
        mask = np.zeros(len(self), dtype=bool)
        mask[env_id] = True
        obs, _ = self._vec.reset(options={"reset_mask": mask})
        return obs[env_id], {"env_id": np.asarray(env_id)}

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> tuple:
        obs, rewards, terminated, truncated, _ = self._vec.step(action)
        return obs, rewards.astype(np.float32), terminated, truncated, {"env_id": np.arange(len(self))}

    def close(self) -> None:
        self._vec.close()


def test_from_gymnasium_envpool_style_pool():
    fns = counter_mix()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no render_mode warning although the pool has no get_attr
        venv = VecMonitor(from_gymnasium(FakeEnvPool(fns, seed=6)))
    ref = DummyVecEnv(fns)
    ref.seed(6)
    assert venv.num_envs == 3 and venv.unwrapped.vector_env_autoreset_mode is AutoresetMode.NEXT_STEP
    assert venv.render_mode is None
    assert_same(venv.reset(), ref.reset())
    assert [info["env_id"] for info in venv.unwrapped.reset_infos] == [0, 1, 2]
    ended = 0
    for actions in batched_actions(ref.action_space, 3, steps=8):
        obs, rewards, dones, infos = venv.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = ref.step(actions)
        assert_same((obs, rewards, dones), (ref_obs, ref_rewards, ref_dones))
        for i, (info, ref_info) in enumerate(zip(infos, ref_infos, strict=True)):
            assert ("episode" in info) == bool(ref_dones[i])  # VecMonitor on top of the pool
            assert info["env_id"] == i
            assert info["TimeLimit.truncated"] is ref_info["TimeLimit.truncated"]
            assert ("terminal_observation" in info) == ("terminal_observation" in ref_info)
            if "terminal_observation" in ref_info:
                assert_same(info["terminal_observation"], ref_info["terminal_observation"])
                assert venv.unwrapped.reset_infos[i] == {"env_id": i}
        ended += int(ref_dones.sum())
    assert ended >= 4
    with pytest.raises(AttributeError, match="no get_attr"):
        venv.get_attr("offset")
    venv.seed(1)
    with pytest.raises(ValueError, match="EnvPool pool, whose reset ignores seeds"):
        venv.reset()
    venv.close()
    with pytest.raises(ValueError, match="batch_size"):
        from_gymnasium(FakeEnvPool(fns, batch_size=2))


def test_from_gymnasium_through_gymnasium_vector_wrappers():
    """Calls reach the sub-envs below Gymnasium vector wrappers; a top-level info of a finished env (SAME_STEP) is
    its reset info, so RecordEpisodeStatistics' stats land in reset_infos (documented)."""
    fns = space_envs("box", "discrete")  # episodes of 2 and 3 steps
    vector_env = gym.wrappers.vector.RecordEpisodeStatistics(SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv = VecNormalize(from_gymnasium(vector_env), norm_obs=False, norm_reward=False)
    ref = DummyVecEnv(fns)
    assert venv.get_attr("episode_len") == [2, 3]
    assert_same(venv.reset(), ref.reset())
    for t in range(6):
        actions = np.array([1, 2])
        obs, rewards, dones, infos = venv.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = ref.step(actions)
        assert_same((obs, rewards, dones), (ref_obs, ref_rewards, ref_dones), f"step {t}")
        assert_vec_infos(infos, ref_infos)
        for i in np.flatnonzero(dones):
            reset_info = venv.unwrapped.reset_infos[i]
            assert reset_info["episode"]["l"] == 2 + i and reset_info["episode"]["r"] == (2 + i) * (1 + i)
    venv.close()


def test_from_gymnasium_options_holding_arrays() -> None:
    """Equal options that hold arrays go to the Gymnasium vector env as its one options dict; options whose
    arrays differ are refused with the adapter's own message (NumPy's "truth value ... is ambiguous" before)."""
    vector_env = SyncVectorEnv([functools.partial(CounterEnv, offset=i) for i in range(2)])
    venv = from_gymnasium(vector_env)
    try:
        venv.set_options([{"start_t": 2, "init": np.array([1.0, 2.0])}, {"start_t": 2, "init": np.array([1.0, 2.0])}])
        obs = venv.reset()
        assert obs[:, 2].tolist() == [2, 2]
        for env in vector_env.envs:
            np.testing.assert_array_equal(env.last_options["init"], [1.0, 2.0])
        venv.set_options([{"init": np.array([1.0, 2.0])}, {"init": np.array([1.0, 3.0])}])
        with pytest.raises(ValueError, match="ONE options dict"):
            venv.reset()
    finally:
        venv.close()


def test_to_gymnasium_seeds_an_agent_vec_env_by_its_envs() -> None:
    """An AgentVecEnv's rows are its PettingZoo envs' agents: reset(seed=s) goes through its seed(s), which gives
    env e (all its rows) the seed s + e, as the adapter's docs say; the observations are those of that seeding."""
    pytest.importorskip("pettingzoo")
    from tests.envs_pettingzoo import ScriptedAgentsEnv
    from vecenv.pettingzoo import make_vec_env as make_agent_vec_env

    adapted = to_gymnasium(make_agent_vec_env(ScriptedAgentsEnv, 2))
    reference = make_agent_vec_env(ScriptedAgentsEnv, 2)
    try:
        reference.seed(7)
        expected = reference.reset()
        reference.seed(8)
        assert not np.array_equal(reference.reset(), expected)  # (the seed shows in the observations)
        obs, _ = adapted.reset(seed=7)
        np.testing.assert_array_equal(obs, expected)
        obs, _ = adapted.reset(seed=[7 + i for i in range(adapted.num_envs)])  # consecutive: seed(7)
        np.testing.assert_array_equal(obs, expected)
        with pytest.raises(ValueError, match="one seed \\(or None\\) per env: expected 2"):
            adapted.reset(seed=[1] * adapted.num_envs)
    finally:
        adapted.close()
        reference.close()

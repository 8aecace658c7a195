"""Autoreset modes of the SB3-style classes (one implementation in EnvGroup for every backend) and the rule
for seeds / options: each applies to the env's NEXT reset, whether the caller or an autoreset triggers it.

Expectations come from CounterEnv's documented observations ``[offset, episode, t, noise]`` and from envs
reset and stepped by hand with the same seeds.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import vecenv
from tests.conftest import RAY_TEST_OPTIONS
from tests.envs import CounterEnv


def counter_fns(n: int, **kwargs) -> list:
    return [functools.partial(CounterEnv, offset=i, **kwargs) for i in range(n)]


def build(backend: str, fns: list, mode: AutoresetMode) -> vecenv.VecEnv:
    if backend == "thread":
        from tests.fake_transport import ThreadVecEnv

        return ThreadVecEnv(fns, autoreset_mode=mode)
    if backend == "dummy":
        return vecenv.DummyVecEnv(fns, autoreset_mode=mode)
    if backend == "ray":
        return vecenv.RayVecEnv(fns, autoreset_mode=mode, **RAY_TEST_OPTIONS)  # type: ignore[arg-type]
    method = backend.removeprefix("subproc").removeprefix("-") or None
    return vecenv.SubprocVecEnv(fns, start_method=method, n_workers=2, autoreset_mode=mode)


@pytest.fixture
def venvs():
    built: list[vecenv.VecEnv] = []
    yield built
    for venv in built:
        venv.close()


@pytest.mark.parametrize("end", ["terminate", "truncate"])
def test_next_step_mode(any_backend, venvs, end):
    """Gymnasium's NEXT_STEP: the final obs is returned with done; the next step ignores the action, resets the
    env and returns its first obs with reward 0, done False and the reset info as info."""
    venv = build(any_backend, counter_fns(2, episode_len=2, end=end), AutoresetMode.NEXT_STEP)
    venvs.append(venv)
    assert venv.autoreset_mode is AutoresetMode.NEXT_STEP
    obs = venv.reset()
    assert obs[:, 2].tolist() == [0, 0]
    venv.step(np.array([1, 1]))
    obs, rewards, dones, infos = venv.step(np.array([2, 2]))  # env 0 ends at t=2
    assert dones.tolist() == [True, False]
    assert obs[0, 1:3].tolist() == [0, 2]  # the final observation, episode 0
    assert "terminal_observation" not in infos[0]
    assert infos[0] == {"t": 2, "episode": 0, "TimeLimit.truncated": end == "truncate"}
    assert rewards.tolist() == [2 + 0.5 * 2, 2 + 0.5 * 2]
    obs, rewards, dones, infos = venv.step(np.array([1, 1]))  # env 0 resets, env 1 ends at t=3
    assert dones.tolist() == [False, True]
    assert obs[0, 1:3].tolist() == [1, 0]  # episode 1, t=0
    assert rewards[0] == 0.0
    assert infos[0] == {"episode": 1, "seed": None, "options": None, "TimeLimit.truncated": False}
    assert venv.reset_infos[0] == {"episode": 1, "seed": None, "options": None}
    obs, _, dones, _ = venv.step(np.array([1, 1]))
    assert obs[:, 1:3].tolist() == [[1, 1], [1, 0]] and dones.tolist() == [False, False]


def test_disabled_mode(any_backend, venvs):
    """DISABLED: nothing resets; the caller resets (here with reset()); the env keeps counting if stepped."""
    venv = build(any_backend, counter_fns(2, episode_len=1), AutoresetMode.DISABLED)
    venvs.append(venv)
    venv.reset()
    obs, _, dones, infos = venv.step(np.array([0, 0]))
    assert dones.tolist() == [True, False] and obs[0, 1:3].tolist() == [0, 1]
    assert "terminal_observation" not in infos[0]
    obs, _, dones, _ = venv.step(np.array([0, 0]))
    assert obs[:, 1:3].tolist() == [[0, 2], [0, 2]] and dones.tolist() == [True, True]
    obs = venv.reset()
    assert obs[:, 1:3].tolist() == [[1, 0], [1, 0]]


def test_same_step_is_the_default_with_terminal_observation(backend, venvs):
    venv = build(backend, counter_fns(1, episode_len=1), AutoresetMode.SAME_STEP)
    venvs.append(venv)
    assert vecenv.DummyVecEnv(counter_fns(1)).autoreset_mode is AutoresetMode.SAME_STEP
    venv.reset()
    obs, _, dones, infos = venv.step(np.array([0]))
    assert dones.tolist() == [True] and obs[0, 1:3].tolist() == [1, 0]
    assert infos[0]["terminal_observation"][1:3].tolist() == [0, 1]


def test_unknown_autoreset_mode():
    with pytest.raises(ValueError, match=r"autoreset_mode must be .*got 'sometimes'"):
        vecenv.DummyVecEnv(counter_fns(1), autoreset_mode="sometimes")


def noise_after_reset(seed: int | None, options: dict | None = None) -> list[int]:
    env = CounterEnv()
    obs, _ = env.reset(seed=seed, options=options)
    return obs[2:].tolist()


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_seed_and_options_honoured_by_autoreset(any_backend, venvs, mode):
    """seed(100) / set_options(...) before stepping: env i's autoreset uses seed 100 + i and the options, and
    they are used once: the next reset() gives env 0 (which autoreset) no seed, but env 1 (which had not
    reset yet) its pending seed 101."""
    venv = build(any_backend, counter_fns(2, episode_len=1), mode)
    venvs.append(venv)
    venv.reset()
    venv.seed(100)
    venv.set_options([{"start_t": 5}, {}])
    obs, _, dones, _ = venv.step(np.array([0, 0]))  # env 0 ends at t=1
    assert dones.tolist() == [True, False]
    if mode is AutoresetMode.NEXT_STEP:
        obs, _, _, _ = venv.step(np.array([0, 0]))  # the reset happens now
    assert obs[0, 2:].tolist() == noise_after_reset(100, {"start_t": 5})
    assert venv.get_attr("seeds_received", indices=[0]) == [[None, 100]]
    assert venv.get_attr("last_options", indices=[0]) == [{"start_t": 5}]
    obs = venv.reset()
    assert venv.get_attr("seeds_received") == [[None, 100, None], [None, 101]]
    assert obs[1, 2:].tolist() == noise_after_reset(101)


def test_seed_list_and_reset(backend, venvs):
    """seed([...]) gives one seed per env (Gymnasium's list form); the SB3 form seed(s) gives s + i."""
    venv = build(backend, counter_fns(3), AutoresetMode.SAME_STEP)
    venvs.append(venv)
    assert venv.seed([7, None, 9]) == [7, None, 9]
    venv.reset()
    assert venv.get_attr("last_seed") == [7, None, 9]
    with pytest.raises(ValueError, match=r"one seed .* per env: expected 3, got 2"):
        venv.seed([1, 2])
    venv.seed(3)
    venv.reset()
    assert venv.get_attr("last_seed") == [3, 4, 5]


def _reset_seeds_and_options(venv: vecenv.VecEnv) -> list[tuple[int | None, dict | None]]:
    return [(info["seed"], info["options"]) for info in venv.reset_infos]


@pytest.mark.parametrize(
    "layout",
    ["dummy", "subproc-w1", "subproc-w2", "subproc-parent"],
)
@pytest.mark.parametrize("between", ["step", "send"])
def test_seed_and_set_options_replace_what_was_handed_to_the_envs(layout: str, between: str, venvs) -> None:
    """SB3's rule: seed() / set_options() replace what an earlier call set, a None seed and None options
    included, also once a step or a partial batch handed the earlier values to the envs (still unused: no
    episode ended). Every layout gives the same resets: before, values the workers held could not be cleared."""
    fns = counter_fns(2, episode_len=50)
    kwargs = {"subproc-w1": {"n_workers": 1}, "subproc-w2": {"n_workers": 2}, "subproc-parent": {"parent_envs": 1}}
    venv = vecenv.DummyVecEnv(fns) if layout == "dummy" else vecenv.SubprocVecEnv(fns, **kwargs[layout])
    venvs.append(venv)
    venv.reset()
    venv.set_options({"start_t": 1})
    venv.seed([5, None])
    if between == "step":
        venv.step(np.zeros(2, dtype=np.int64))
    else:
        venv.send(np.zeros(1, dtype=np.int64), [1])
        venv.recv()
    venv.set_options(None)
    venv.seed([None, 9])
    venv.reset()
    assert _reset_seeds_and_options(venv) == [(None, None), (9, None)]
    # options handed over and not replaced stay for the next reset, as SB3 keeps them until reset()
    venv.set_options({"start_t": 3})
    venv.step(np.zeros(2, dtype=np.int64))
    venv.seed([7, 8])
    venv.reset()
    assert _reset_seeds_and_options(venv) == [(7, {"start_t": 3}), (8, {"start_t": 3})]

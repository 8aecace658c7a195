"""from_gymnasium on real EnvPool pools (envpool, installed by the test extra where a wheel exists).

The independent expectation is the raw pool stepped by hand with EnvPool's own next-step autoreset: an env whose
episode ended spends the next step resetting (its action ignored). The adapter resets such an env at once
(``reset(env_id=...)``), so its actions all reach the env; the by-hand loop therefore keeps one action stream
per env and hands an env its next action only when the env will use it. Per env, both sides must give the
same transitions (action, reward, terminated, truncated, next / terminal observation) and the same first
observations of every episode.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from vecenv import VecMonitor, VecNormalize
from vecenv.adapters import from_gymnasium

envpool = pytest.importorskip("envpool")

SEED = 3
#: envpool.make options per env: Atari episodes cut to 40 steps so that a short test sees several ends
MAKE_KWARGS: dict[str, dict[str, Any]] = {"Pong-v5": {"max_episode_steps": 40}}


def make_pool(env_id: str, num_envs: int, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's Box precision warnings for EnvPool's float64 bounds
        options = {**MAKE_KWARGS.get(env_id, {}), **kwargs}
        return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=SEED, **options)


def action_streams(env_id: str, num_envs: int, length: int) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    if env_id == "CartPole-v1":
        return [list(rng.integers(0, 2, length)) for _ in range(num_envs)]
    if env_id == "Pong-v5":
        return [list(rng.integers(0, 6, length)) for _ in range(num_envs)]
    return [list(rng.uniform(-2, 2, (length, 1)).astype(np.float32)) for _ in range(num_envs)]


def by_hand(env_id: str, num_envs: int, streams: list[list[Any]], transitions: int) -> tuple[list, list]:
    """The raw pool with its own autoreset: per env, its transitions and the first observation of each episode."""
    pool = make_pool(env_id, num_envs)
    obs, _ = pool.reset()
    steps: list[list[tuple]] = [[] for _ in range(num_envs)]
    starts: list[list[np.ndarray]] = [[obs[i].copy()] for i in range(num_envs)]
    used = [0] * num_envs
    resetting = [False] * num_envs
    while min(len(s) for s in steps) < transitions:
        actions = np.stack([streams[i][used[i]] for i in range(num_envs)])
        obs, rewards, terminated, truncated, _ = pool.step(actions)
        for i in range(num_envs):
            if resetting[i]:  # EnvPool's next-step autoreset: the action was ignored
                assert rewards[i] == 0 and not terminated[i] and not truncated[i]
                starts[i].append(obs[i].copy())
                resetting[i] = False
                continue
            done = (bool(terminated[i]), bool(truncated[i]))
            steps[i].append((actions[i], np.float32(rewards[i]), *done, obs[i].copy()))
            used[i] += 1
            resetting[i] = bool(terminated[i] or truncated[i])
    pool.close()
    return steps, starts


@pytest.mark.parametrize(
    ("env_id", "num_envs", "transitions"), [("CartPole-v1", 4, 120), ("Pendulum-v1", 2, 430), ("Pong-v5", 2, 90)]
)
def test_same_transitions_as_the_pool_stepped_by_hand(env_id, num_envs, transitions) -> None:
    streams = action_streams(env_id, num_envs, transitions + 5)
    expected_steps, expected_starts = by_hand(env_id, num_envs, streams, transitions)
    venv = from_gymnasium(make_pool(env_id, num_envs))
    assert venv.is_envpool
    obs = venv.reset()
    steps: list[list[tuple]] = [[] for _ in range(num_envs)]
    starts: list[list[np.ndarray]] = [[obs[i].copy()] for i in range(num_envs)]
    episodes = 0
    for t in range(transitions):
        actions = np.stack([streams[i][t] for i in range(num_envs)])
        obs, rewards, dones, infos = venv.step(actions)
        terminated, truncated = venv.terminations, venv.truncations
        assert rewards.dtype == np.float32 and obs.dtype == venv.observation_space.dtype
        for i in range(num_envs):
            next_obs = infos[i]["terminal_observation"] if dones[i] else obs[i]
            steps[i].append((actions[i], rewards[i], bool(terminated[i]), bool(truncated[i]), next_obs))
            assert infos[i]["TimeLimit.truncated"] == bool(truncated[i] and not terminated[i])
            if dones[i]:
                episodes += 1
                starts[i].append(obs[i].copy())
                assert infos[i]["elapsed_step"] > 0 and venv.reset_infos[i]["elapsed_step"] == 0
    venv.close()
    assert episodes >= num_envs  # every env ended at least one episode
    for i in range(num_envs):
        for got, want in zip(steps[i], expected_steps[i][:transitions], strict=True):
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1:4] == want[1:4]
            np.testing.assert_array_equal(got[4], want[4])
        for got, want in zip(starts[i], expected_starts[i], strict=False):
            np.testing.assert_array_equal(got, want)
        assert len(starts[i]) <= len(expected_starts[i])


def test_wrappers_on_top_count_each_episode_once() -> None:
    """VecMonitor over the adapter reports EnvPool's episodes once, with the pool's own returns and lengths."""
    num_envs, transitions = 3, 150
    streams = action_streams("CartPole-v1", num_envs, transitions + 5)
    expected_steps, _ = by_hand("CartPole-v1", num_envs, streams, transitions)
    venv = VecNormalize(VecMonitor(from_gymnasium(make_pool("CartPole-v1", num_envs))))
    venv.reset()
    monitored: list[list[tuple[float, int]]] = [[] for _ in range(num_envs)]
    for t in range(transitions):
        _, _, _, infos = venv.step(np.stack([streams[i][t] for i in range(num_envs)]))
        for i, info in enumerate(infos):
            if "episode" in info:
                monitored[i].append((round(float(info["episode"]["r"]), 3), int(info["episode"]["l"])))
    venv.close()
    for i in range(num_envs):
        expected, ret, length = [], 0.0, 0
        for _, reward, terminated, truncated, _ in expected_steps[i][:transitions]:
            ret, length = ret + float(reward), length + 1
            if terminated or truncated:
                expected.append((round(ret, 3), length))
                ret, length = 0.0, 0
        assert monitored[i] == expected and expected


def test_async_pools_are_refused_with_what_to_do() -> None:
    what_to_do = r"asynchronous \(batch_size=2 < num_envs=4\).*envpool.make\(\.\.\., num_envs=4\)"
    with pytest.raises(ValueError, match=what_to_do):
        from_gymnasium(make_pool("CartPole-v1", 4, batch_size=2))


def test_seeds_options_and_sub_env_calls_say_what_envpool_cannot_do() -> None:
    venv = from_gymnasium(make_pool("CartPole-v1", 2))
    try:
        venv.seed(1)
        with pytest.raises(ValueError, match=r"seeds are fixed by envpool.make\(\.\.\., seed=s\)"):
            venv.reset()
        venv.seed([None, None])  # forget the seeds
        venv.set_options({"x": 1})
        with pytest.raises(ValueError, match="whose reset ignores options: its envs take no reset options"):
            venv.reset()
        calls = (lambda: venv.get_attr("gravity"), lambda: venv.env_method("render"), lambda: venv.set_attr("x", 1))
        for call in calls:
            with pytest.raises(AttributeError, match="C\\+\\+ objects without Python attributes"):
                call()
        with pytest.raises(AttributeError, match="cannot tell whether"):
            venv.env_is_wrapped(VecMonitor)  # type: ignore[arg-type]
        assert venv.get_attr("render_mode") == [None, None]
    finally:
        venv.close()

"""Stable-Baselines3's PPO on PettingZoo envs through ``vecenv.pettingzoo.make_vec_env`` (parameter sharing: one
policy, one row per agent). Run with ``make test-sb3`` (``pytest -m sb3``).

The rows PPO saw are checked against the same PettingZoo envs stepped by hand with the actions PPO chose: env
``i`` reset with seed ``i`` (``make_vec_env(seed=0)``), row ``k`` = env ``k // 3``, agent ``k % 3``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.sb3

sb3 = pytest.importorskip("stable_baselines3")
simple_spread_v3 = pytest.importorskip("mpe2.simple_spread_v3")

from vecenv import DummyVecEnv, SubprocVecEnv, VecEnvWrapper, VecMonitor  # noqa: E402
from vecenv.pettingzoo import make_vec_env  # noqa: E402

ENV_KWARGS = {"max_cycles": 25, "continuous_actions": False}
N_ENVS, N_STEPS = 2, 32
AGENTS = ["agent_0", "agent_1", "agent_2"]


class Recorder(VecEnvWrapper):
    """Keeps every step's actions, rewards and dones, as PPO sent and received them."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self.actions: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.dones: list[np.ndarray] = []

    def reset(self) -> Any:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        self.actions.append(np.array(actions))
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.rewards.append(rewards.copy())
        self.dones.append(dones.copy())
        return obs, rewards, dones, infos


@pytest.fixture
def close_after() -> Iterator[list[Any]]:
    built: list[Any] = []
    yield built
    for venv in built:
        venv.close()


def _ppo(venv: Any, seed: int) -> Any:
    return sb3.PPO("MlpPolicy", venv, seed=seed, n_steps=N_STEPS, batch_size=64, n_epochs=2, device="cpu")


def _hand_rewards(actions: list[np.ndarray]) -> np.ndarray:
    """The rewards of each row, stepping N_ENVS PettingZoo envs by hand with ``actions`` (vector steps x rows)."""
    envs = [simple_spread_v3.parallel_env(**ENV_KWARGS) for _ in range(N_ENVS)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    rewards = np.zeros((len(actions), N_ENVS * len(AGENTS)), dtype=np.float32)
    for t, batch in enumerate(actions):
        for i, env in enumerate(envs):
            step = {agent: int(batch[i * len(AGENTS) + j]) for j, agent in enumerate(AGENTS)}
            _, reward, _, _, _ = env.step(step)
            rewards[t, i * len(AGENTS) : (i + 1) * len(AGENTS)] = [reward[agent] for agent in AGENTS]
            if not env.agents:
                env.reset()
    return rewards


def test_ppo_learns_on_rows_and_vec_monitor_records_every_agent_episode(close_after: list[Any]) -> None:
    """PPO.learn runs on a SubprocVecEnv of 2 envs x 3 agents; the rewards it saw are the hand-stepped envs';
    VecMonitor records one episode per agent and finished env episode, with the row's reward sum."""
    agent_venv = make_vec_env(
        simple_spread_v3.parallel_env, n_envs=N_ENVS, seed=0, vec_env_cls=SubprocVecEnv, env_kwargs=ENV_KWARGS
    )
    close_after.append(agent_venv)
    recorder = Recorder(agent_venv)
    venv = VecMonitor(recorder)
    assert venv.num_envs == N_ENVS * len(AGENTS)
    model = _ppo(venv, seed=0)
    model.learn(total_timesteps=200)
    steps = len(recorder.actions)
    assert steps == 2 * N_STEPS  # 200 timesteps of 6 rows: two rollouts of 32 vector steps
    assert model.num_timesteps == steps * venv.num_envs

    rewards, dones = np.array(recorder.rewards), np.array(recorder.dones)
    np.testing.assert_array_equal(rewards, _hand_rewards(recorder.actions))
    # every env ends its episode after max_cycles=25 steps, all its agents at once
    expected_done_steps = [t for t in range(steps) if (t + 1) % ENV_KWARGS["max_cycles"] == 0]
    assert [t for t in range(steps) if dones[t].any()] == expected_done_steps
    assert dones[expected_done_steps].all()
    expected: list[tuple[float, int]] = []
    start = 0
    for t in expected_done_steps:
        for row in range(venv.num_envs):
            expected.append((round(float(rewards[start : t + 1, row].sum(dtype=np.float32)), 6), t + 1 - start))
        start = t + 1
    assert len(expected) == len(expected_done_steps) * N_ENVS * len(AGENTS) == 12
    recorded = [(info["r"], info["l"]) for info in model.ep_info_buffer]
    assert len(recorded) == len(expected)
    for (r, length), (r_expected, length_expected) in zip(recorded, expected, strict=True):
        assert length == length_expected
        assert r == pytest.approx(r_expected, abs=1e-5)

    obs = venv.reset()
    actions, _ = model.predict(obs)
    assert obs.shape == (6, 18) and actions.shape == (6,)
    assert ((actions >= 0) & (actions < 5)).all()


def _first_rollout(seed: int, close_after: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    venv = VecMonitor(
        make_vec_env(simple_spread_v3.parallel_env, n_envs=N_ENVS, vec_env_cls=DummyVecEnv, env_kwargs=ENV_KWARGS)
    )
    close_after.append(venv)
    model = _ppo(venv, seed=seed)
    model.learn(total_timesteps=N_STEPS * venv.num_envs)
    buffer = model.rollout_buffer
    return buffer.observations.copy(), buffer.actions.copy(), buffer.rewards.copy()


def test_ppo_seed_seeds_the_envs(close_after: list[Any]) -> None:
    """PPO(seed=...) calls venv.seed(seed): the same seed gives the same first rollout, another seed another one."""
    first = _first_rollout(0, close_after)
    again = _first_rollout(0, close_after)
    other = _first_rollout(1, close_after)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])
    # and the first observations are those of the envs reset with seeds 0 and 1 (seed + i, as SB3); after
    # training, SB3's buffer holds them flattened row-major: row r's step t at r * N_STEPS + t
    first_obs = first[0].reshape(N_ENVS * len(AGENTS), N_STEPS, -1)[:, 0]
    env = simple_spread_v3.parallel_env(**ENV_KWARGS)
    for i in range(N_ENVS):
        obs, _ = env.reset(seed=i)
        np.testing.assert_array_equal(first_obs[i * 3 : (i + 1) * 3], np.stack([obs[agent] for agent in AGENTS]))


def test_supersuit_concat_vec_env_has_no_seed_for_ppo() -> None:
    """What docs/pettingzoo.md says of SuperSuit: its SB3 vector env cannot be seeded, so PPO(seed=...) fails."""
    supersuit = pytest.importorskip("supersuit")
    venv = supersuit.concat_vec_envs_v1(
        supersuit.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env(**ENV_KWARGS)),
        N_ENVS,
        num_cpus=0,
        base_class="stable_baselines3",
    )
    try:
        with pytest.raises(AttributeError, match="seed"):
            _ppo(venv, seed=0)
    finally:
        venv.close()


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cleanrl_ppo_pettingzoo.py"


def test_cleanrl_pettingzoo_example_runs() -> None:
    """examples/cleanrl_ppo_pettingzoo.py, briefly: 2 envs x 3 agents, 2 iterations of 64 steps. Every env ends an
    episode every 25 steps (max_cycles), so 128 steps end 5 episodes of each of the 6 rows, each printed once."""
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--total-timesteps", "768", "--num-envs", "2", "--num-steps", "64"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=EXAMPLE.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "mpe2.simple_spread_v3: 2 envs x 3 agents = 6 rows"
    episodes = [
        re.fullmatch(
            r"global_step=(\d+), env=(\d), agent=(agent_\d), episodic_return=(\S+), episodic_length=(\d+)", line
        )
        for line in lines
        if line.startswith("global_step=")
    ]
    assert all(episodes), lines
    found = sorted((int(m[1]), int(m[2]), m[3]) for m in episodes if m)
    assert found == sorted((6 * t, env, agent) for t in (25, 50, 75, 100, 125) for env in (0, 1) for agent in AGENTS)
    assert all(m[5] == "25" and float(m[4]) < 0 for m in episodes if m)  # simple_spread's rewards are negative
    assert [line.split()[0] for line in lines if line.startswith("iteration=")] == ["iteration=1/2", "iteration=2/2"]
    assert lines[-1].startswith("finished agent episodes: 30 (mean return of the last 30: ")

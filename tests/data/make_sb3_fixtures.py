"""Write the Stable-Baselines3 ``VecNormalize`` pickles that ``tests/test_vec_normalize.py`` imports.

The tests never run this script and never import SB3: they read the files it produced. Regenerate
them (only needed if the fixtures must change) with a Python that has stable-baselines3 installed,
from the repository root::

    python tests/data/make_sb3_fixtures.py

It writes, next to itself:

- ``sb3_cartpole_box.pkl``: ``VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0))`` with the
  default settings, after ``reset()`` and 40 steps of seeded random actions (some episodes end).
- ``sb3_dict_norm_obs_keys.pkl``: ``VecNormalize`` over 2 :class:`TwoPartEnv` (a Dict space with keys
  ``position`` Box(3,), ``velocity`` Box(2,), ``mode`` Discrete(4)) with
  ``norm_obs_keys=["position", "velocity"]``, ``clip_obs=5.0``, ``gamma=0.9``, after 12 steps.
- ``sb3_norm_obs_false.pkl``: ``VecNormalize(..., norm_obs=False, clip_reward=3.0)`` over 2 CartPole
  envs, after 25 steps (no ``obs_rms`` attribute in the pickle).
- ``sb3_fixtures.json``: what SB3 holds in each of those objects right after saving (configuration,
  ``obs_rms`` / ``ret_rms`` mean, var and count, as exact Python floats), the versions used, and for
  each fixture a probe: a raw observation batch / reward batch and SB3's ``normalize_obs`` /
  ``normalize_reward`` of it. The tests compare vecenv's import of the pickles with these numbers.

Every ``VecNormalize.save`` call is SB3's own (``pickle.dump`` of the whole wrapper).
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import stable_baselines3
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

HERE = pathlib.Path(__file__).resolve().parent


class TwoPartEnv(gym.Env):
    """Dict observation ``{"position": (3,), "velocity": (2,), "mode": Discrete(4)}``; episodes of 5 steps.

    ``tests/test_vec_normalize.py`` defines an env with the same spaces to load the fixture into.
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-100.0, 100.0, (3,), np.float32),
                "velocity": spaces.Box(-100.0, 100.0, (2,), np.float32),
                "mode": spaces.Discrete(4),
            }
        )
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        t = float(self.t)
        return {
            "position": np.array([t, 2.0 * t + 1.0, -t], dtype=np.float32)
            + self.np_random.normal(size=3).astype(np.float32),
            "velocity": np.array([1.0, -0.5 * t], dtype=np.float32),
            "mode": self.t % 4,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), float(action) + 0.25 * self.t, self.t >= 5, False, {}


def rms_record(rms: RunningMeanStd) -> dict[str, Any]:
    return {"mean": np.asarray(rms.mean).tolist(), "var": np.asarray(rms.var).tolist(), "count": float(rms.count)}


def record(vn: VecNormalize, probe_obs: Any, probe_reward: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {
        "config": {
            "training": vn.training,
            "norm_obs": vn.norm_obs,
            "norm_reward": vn.norm_reward,
            "clip_obs": vn.clip_obs,
            "clip_reward": vn.clip_reward,
            "gamma": vn.gamma,
            "epsilon": vn.epsilon,
            "norm_obs_keys": vn.norm_obs_keys,
        },
        "ret_rms": rms_record(vn.ret_rms),
        "obs_rms": None,
        "probe_reward": probe_reward.tolist(),
        "probe_normalized_reward": vn.normalize_reward(probe_reward).tolist(),
    }
    if hasattr(vn, "obs_rms"):
        out["obs_rms"] = (
            {key: rms_record(rms) for key, rms in vn.obs_rms.items()}
            if isinstance(vn.obs_rms, dict)
            else rms_record(vn.obs_rms)
        )
    normalized = vn.normalize_obs(probe_obs)
    if isinstance(probe_obs, dict):
        out["probe_obs"] = {key: np.asarray(value).tolist() for key, value in probe_obs.items()}
        out["probe_normalized_obs"] = {key: np.asarray(value).tolist() for key, value in normalized.items()}
    else:
        out["probe_obs"] = probe_obs.tolist()
        out["probe_normalized_obs"] = normalized.tolist()
    return out


def run(vn: VecNormalize, n_steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vn.reset()
    for _ in range(n_steps):
        vn.step(rng.integers(0, 2, size=vn.num_envs))


def main() -> None:
    expected: dict[str, Any] = {
        "stable_baselines3": stable_baselines3.__version__,
        "numpy": np.__version__,
        "gymnasium": gym.__version__,
        "python": sys.version.split()[0],
        "fixtures": {},
    }

    # 1. CartPole, Box observations, default settings
    vn = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    run(vn, 40, seed=1)
    vn.save(str(HERE / "sb3_cartpole_box.pkl"))
    probe = np.array([[0.1, -0.2, 0.03, 0.4], [-1.0, 2.0, -0.1, -3.0]], dtype=np.float32)
    expected["fixtures"]["sb3_cartpole_box.pkl"] = record(vn, probe, np.array([1.0, -2.0], dtype=np.float32))
    vn.close()

    # 2. Dict observations, only two keys normalized
    venv = DummyVecEnv([TwoPartEnv, TwoPartEnv])
    venv.seed(3)
    vn = VecNormalize(venv, norm_obs_keys=["position", "velocity"], clip_obs=5.0, gamma=0.9)
    run(vn, 12, seed=2)
    vn.save(str(HERE / "sb3_dict_norm_obs_keys.pkl"))
    probe_dict = {
        "position": np.array([[1.0, 2.0, 3.0], [-4.0, 5.0, -6.0]], dtype=np.float32),
        "velocity": np.array([[0.5, -0.5], [2.0, 20.0]], dtype=np.float32),
        "mode": np.array([1, 3], dtype=np.int64),
    }
    expected["fixtures"]["sb3_dict_norm_obs_keys.pkl"] = record(vn, probe_dict, np.array([0.5, 3.0], dtype=np.float32))
    vn.close()

    # 3. Rewards only
    vn = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=5), norm_obs=False, clip_reward=3.0)
    run(vn, 25, seed=4)
    vn.save(str(HERE / "sb3_norm_obs_false.pkl"))
    expected["fixtures"]["sb3_norm_obs_false.pkl"] = record(vn, probe, np.array([10.0, -0.5], dtype=np.float32))
    vn.close()

    (HERE / "sb3_fixtures.json").write_text(json.dumps(expected, indent=1) + "\n")
    for name in expected["fixtures"]:
        print(name, (HERE / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main()

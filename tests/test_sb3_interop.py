"""Stable-Baselines3 accepts vecenv objects (virtual subclass registration), and vecenv never imports SB3 itself.

The SB3 tests need stable-baselines3 (and torch); they are skipped when it is not installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (so import order and sys.modules are clean); return its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_does_not_load_sb3_or_torch():
    """``import vecenv`` loads neither stable_baselines3 nor torch (workers must stay light)."""
    out = run_python(
        """
        import sys, vecenv
        print(sorted(m for m in ("torch", "stable_baselines3") if m in sys.modules))
        """
    )
    assert out.strip() == "[]"


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
@pytest.mark.parametrize("sb3_first", [True, False], ids=["sb3-imported-first", "vecenv-imported-first"])
def test_sb3_isinstance_checks_accept_vecenv(sb3_first):
    """SB3's VecEnv/VecEnvWrapper/DummyVecEnv isinstance checks accept vecenv objects, whatever the import order."""
    imports = (
        "import stable_baselines3.common.vec_env as sb3\nimport vecenv"
        if sb3_first
        else "import vecenv\nimport stable_baselines3.common.vec_env as sb3"
    )
    out = run_python(
        imports
        + """
import gymnasium as gym
venv = vecenv.DummyVecEnv([lambda: gym.make("CartPole-v1")])
class Passthrough(vecenv.VecEnvWrapper):
    def reset(self):
        return self.venv.reset()
    def step_wait(self):
        return self.venv.step_wait()
wrapped = Passthrough(venv)
print(isinstance(venv, sb3.VecEnv), isinstance(venv, sb3.DummyVecEnv), isinstance(wrapped, sb3.VecEnvWrapper))
print(sb3.is_vecenv_wrapped(sb3.VecNormalize(wrapped), sb3.VecNormalize), sb3.unwrap_vec_normalize(wrapped))
"""
    )
    assert out.split() == ["True", "True", "True", "True", "None"]


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
def test_ppo_trains_on_subproc_vec_env():
    """PPO learns on a vecenv SubprocVecEnv (under SB3's own VecNormalize) and evaluate_policy runs on it.

    The rollout buffer must hold exactly the transitions the vec env produced: PPO collects n_steps * n_envs.
    """
    out = run_python(
        """
        import vecenv
        from stable_baselines3 import PPO
        from stable_baselines3.common.evaluation import evaluate_policy
        from stable_baselines3.common.vec_env import VecNormalize

        if __name__ == "__main__":
            venv = vecenv.make_vec_env("CartPole-v1", n_envs=2, seed=0, vec_env_cls=vecenv.SubprocVecEnv)
            model = PPO("MlpPolicy", VecNormalize(venv), n_steps=32, batch_size=64, n_epochs=1, seed=0)
            model.learn(128)
            print(model.num_timesteps, model.get_env().venv is venv)
            mean, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=2, warn=False)
            print(mean > 0)
            model.get_env().close()
        """
    )
    assert out.split() == ["128", "True", "True"]

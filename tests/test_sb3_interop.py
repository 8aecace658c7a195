"""Stable-Baselines3 accepts vecenv objects (virtual subclass registration), and vecenv never imports SB3 itself.

The SB3 tests need stable-baselines3 (and torch); they are skipped when it is not installed.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
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
def test_vecenvs_stack_helpers_walk_through_sb3s_wrappers():
    """vecenv's ``unwrap_vec_normalize`` / ``is_vecenv_wrapped`` / ``sync_envs_normalization`` walk through a wrapper
    written against SB3's ``VecEnvWrapper`` and find SB3's ``VecNormalize``, as SB3's own helpers do with vecenv's
    classes: the evaluation env gets the training env's statistics."""
    import gymnasium as gym
    from stable_baselines3.common import vec_env as sb3

    import vecenv

    class SB3Passthrough(sb3.VecEnvWrapper):
        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            return self.venv.step_wait()

    def stack(normalize: Any) -> Any:
        return SB3Passthrough(normalize(vecenv.DummyVecEnv([lambda: gym.make("CartPole-v1")])))

    for normalize in (vecenv.VecNormalize, sb3.VecNormalize):
        train, evaluation = stack(normalize), stack(normalize)
        train.reset()
        for _ in range(20):
            train.step(np.zeros(1, dtype=np.int64))
        assert vecenv.unwrap_vec_normalize(train) is train.venv
        assert vecenv.is_vecenv_wrapped(train, vecenv.VecNormalize)
        assert sb3.unwrap_vec_normalize(train) is train.venv
        vecenv.sync_envs_normalization(train, evaluation)
        np.testing.assert_array_equal(evaluation.venv.obs_rms.mean, train.venv.obs_rms.mean)
        np.testing.assert_array_equal(evaluation.venv.ret_rms.var, train.venv.ret_rms.var)
        assert evaluation.venv.obs_rms is not train.venv.obs_rms
        name = f"{type(train.venv).__module__}.{type(train.venv).__name__}".replace(".", r"\.")
        with pytest.warns(UserWarning, match=f"already normalized by a {name} wrapper"):
            vecenv.VecNormalize(train)
        train.close()
        evaluation.close()


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


# --- the actions SB3's algorithms send are accepted, and reach the envs as with SB3's own vector envs ----------


def sb3_identity_venv(vec_env: str, kind: str) -> Any:
    """Two recording SB3 identity envs (:func:`tests.envs_drop_in.make_sb3_identity`) in ``vec_env``: "vecenv-dummy",
    "vecenv-subproc", "sb3-dummy" or "sb3-subproc" (SB3's own classes, the peers)."""
    from stable_baselines3.common import vec_env as sb3_vec_env

    import vecenv
    from tests.conftest import DEFAULT_START_METHOD
    from tests.envs_drop_in import make_sb3_identity

    fns = [functools.partial(make_sb3_identity, kind)] * 2
    classes = {
        "vecenv-dummy": vecenv.DummyVecEnv,
        "vecenv-subproc": functools.partial(vecenv.SubprocVecEnv, start_method=DEFAULT_START_METHOD),
        "sb3-dummy": sb3_vec_env.DummyVecEnv,
        "sb3-subproc": functools.partial(sb3_vec_env.SubprocVecEnv, start_method=DEFAULT_START_METHOD),
    }
    return classes[vec_env](fns)


def record_batches(venv: Any) -> Any:
    """``venv`` in an SB3 VecEnvWrapper that keeps a copy of every batch of actions the algorithm steps with."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class RecordBatches(VecEnvWrapper):
        def __init__(self, venv: Any) -> None:
            super().__init__(venv)
            self.batches: list[np.ndarray] = []

        def step_async(self, actions: np.ndarray) -> None:
            self.batches.append(np.array(actions, copy=True))
            self.venv.step_async(actions)

        def reset(self) -> Any:
            return self.venv.reset()

        def step_wait(self) -> Any:
            return self.venv.step_wait()

    return RecordBatches(venv)


def learn_and_record(algo: str, vec_env: str, kind: str) -> tuple[list[np.ndarray], list[Any]]:
    """``algo.learn(64)`` (seed 0) on two recording identity envs; the batches it sent and what each env got."""
    import stable_baselines3

    venv = record_batches(sb3_identity_venv(vec_env, kind))
    try:
        model = getattr(stable_baselines3, algo)("MlpPolicy", venv, seed=0, **ALGO_KWARGS[algo])
        model.learn(64)
        assert model.num_timesteps >= 64
        return venv.batches, list(venv.get_attr("actions_seen"))
    finally:
        venv.close()


#: tiny settings: a rollout or the warm-up fits in 64 steps, and the policy's own actions follow it
ALGO_KWARGS: dict[str, dict[str, Any]] = {
    "PPO": {"n_steps": 16, "batch_size": 32, "n_epochs": 1},
    "A2C": {"n_steps": 4},
    "DQN": {"learning_starts": 16, "batch_size": 16, "buffer_size": 1000, "exploration_fraction": 0.1},
    "SAC": {"learning_starts": 16, "batch_size": 16, "buffer_size": 1000},
    "TD3": {"learning_starts": 16, "batch_size": 16, "buffer_size": 1000},
}


def row_record(action: np.ndarray) -> tuple[str, str | None, str]:
    return type(action).__name__, action.dtype.name, repr(action)


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("algo", ["PPO", "A2C"])
def test_on_policy_algorithms_learn_on_multibinary_and_envs_get_sb3s_rows(algo, backend):
    """PPO and A2C sample MultiBinary actions as float32 0. / 1. (Bernoulli): vecenv accepts them, and each env
    receives row i of every batch unchanged (SB3's DummyVecEnv steps env i with ``actions[i]``, its
    SubprocVecEnv pipes ``actions[i]``), exactly what the same run gives with SB3's own class."""
    batches, received = learn_and_record(algo, f"vecenv-{backend}", "multibinary")
    assert batches[0].dtype == np.float32 and batches[0].shape == (2, 4)
    assert {value for batch in batches for value in batch.ravel().tolist()} == {0.0, 1.0}
    # SB3's vec envs hand env i the row actions[i] of each batch as it is (its dtype, its values)
    assert received == [[row_record(batch[i]) for batch in batches] for i in range(2)]
    # and the peer, SB3's own class, on the same seeds
    peer_batches, peer_received = learn_and_record(algo, f"sb3-{backend}", "multibinary")
    assert received == peer_received
    assert all(np.array_equal(a, b) for a, b in zip(batches, peer_batches, strict=True))


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("algo", "kind"),
    [
        ("PPO", "multibinary"),
        ("A2C", "multibinary"),
        ("PPO", "multidiscrete"),
        ("A2C", "discrete"),
        ("PPO", "box"),
        ("DQN", "discrete"),
        ("SAC", "box"),
        ("TD3", "box"),
    ],
)
def test_each_algorithms_own_actions_are_accepted(algo, kind):
    """learn (random warm-up actions, then the policy's, with TD3's action noise), ``model.predict`` then
    ``step`` (as rl_zoo3's enjoy does) and ``evaluate_policy``: vecenv refuses none of the algorithm's actions,
    and each env gets row i of each batch."""
    import stable_baselines3
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.noise import NormalActionNoise

    venv = record_batches(sb3_identity_venv("vecenv-dummy", kind))
    try:
        kwargs = dict(ALGO_KWARGS[algo])
        if algo == "TD3":
            kwargs["action_noise"] = NormalActionNoise(np.zeros(1), np.full(1, 0.1))
        model = getattr(stable_baselines3, algo)("MlpPolicy", venv, seed=0, **kwargs)
        model.learn(64)
        obs = venv.reset()
        for deterministic in (True, False):
            actions, _ = model.predict(obs, deterministic=deterministic)
            obs, _, _, _ = venv.step(actions)
        evaluate_policy(model, venv, n_eval_episodes=2, warn=False)
        received = list(venv.get_attr("actions_seen"))
    finally:
        venv.close()
    assert received == [[row_record(batch[i]) for batch in venv.batches] for i in range(2)]


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 not installed")
@pytest.mark.parametrize("backend", ["DummyVecEnv", "SubprocVecEnv"])
def test_video_recorder_reads_the_envs_metadata_from_sb3_backends(backend: str, tmp_path: Any) -> None:
    """Over SB3's own vector envs, vecenv's VecVideoRecorder takes the envs' metadata (their ``render_fps``) as
    SB3's recorder does: SB3's ``SubprocVecEnv.metadata`` lists only the render modes."""
    from stable_baselines3.common import vec_env as sb3_vec_env

    import vecenv
    from tests.envs_faults import FaultInjectEnv

    base = getattr(sb3_vec_env, backend)([FaultInjectEnv, FaultInjectEnv])
    recorder = vecenv.VecVideoRecorder(base, str(tmp_path), lambda step: False, video_length=3)
    try:
        assert FaultInjectEnv.metadata["render_fps"] == 4
        assert recorder.frames_per_sec == 4 and base.metadata == FaultInjectEnv.metadata
    finally:
        recorder.close()


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 not installed")
@pytest.mark.parametrize("backend", ["DummyVecEnv", "SubprocVecEnv"])
def test_make_vec_env_with_sb3_classes_wraps_envs_in_sb3_monitor(backend: str) -> None:
    """vecenv's make_vec_env given SB3's vector env class: SB3's env_is_wrapped (isinstance) finds a Monitor, so
    SB3's evaluate_policy reads the Monitor's episode returns (the env's own rewards, not those of an outer
    wrapper that scales them) and does not warn, as with SB3's own make_vec_env."""
    import warnings

    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common import vec_env as sb3_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor as Sb3Monitor

    import vecenv

    venv = vecenv.make_vec_env(
        "CartPole-v1",
        n_envs=1,
        seed=0,
        vec_env_cls=getattr(sb3_vec_env, backend),
        wrapper_class=gym.wrappers.TransformReward,
        wrapper_kwargs={"func": lambda reward: 10 * reward},
    )
    try:
        assert venv.env_is_wrapped(Sb3Monitor) == [True]
        model = PPO("MlpPolicy", venv, n_steps=64, seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rewards, lengths = evaluate_policy(model, venv, n_eval_episodes=2, return_episode_rewards=True)
        assert not [w for w in caught if "Monitor" in str(w.message)]
        assert rewards == [float(length) for length in lengths]  # CartPole's reward 1 per step, unscaled
    finally:
        venv.close()

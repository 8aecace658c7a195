"""How envs are called: ``reset`` keywords and the actions each env receives, against the peers' own classes.

- ``vecenv.gymnasium``'s classes and ``to_gymnasium`` reset envs as Gymnasium's vector envs do: an explicit
  reset passes ``seed=`` and ``options=`` always (None when not given), an automatic reset passes nothing.
- The SB3-style classes reset as SB3's do: ``seed=`` always, ``options=`` only when set; automatic resets
  pass nothing.
- Every class gives env ``i`` row ``i`` of the caller's batch in the caller's dtype, as
  ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv`` and SB3's ``DummyVecEnv`` / ``SubprocVecEnv`` do.

Expectations come from Gymnasium's own vector envs stepped with the same calls (recorded by
:class:`tests.envs_drop_in.RecordingEnv`), and for SB3 from its documented calls (the sb3-marked tests run
SB3's classes themselves).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import vecenv
import vecenv.gymnasium as vgym
from tests.conftest import DEFAULT_START_METHOD
from tests.envs_drop_in import make_recording, make_required_options, make_sleep
from vecenv.adapters import to_gymnasium

N = 3
HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None


def recording_fns(**kwargs: Any) -> list[Callable[[], gym.Env]]:
    return [functools.partial(make_recording, i, **kwargs) for i in range(N)]


#: Gymnasium-API vector envs built by vecenv, each with the peer it must behave like
GYM_BUILDERS: dict[str, Callable[..., Any]] = {
    "sync": lambda fns, mode: vgym.SyncVectorEnv(fns, autoreset_mode=mode),
    "async": lambda fns, mode: vgym.AsyncVectorEnv(fns, autoreset_mode=mode, context=DEFAULT_START_METHOD),
    "async-one-worker": lambda fns, mode: vgym.AsyncVectorEnv(
        fns, autoreset_mode=mode, context=DEFAULT_START_METHOD, n_workers=1
    ),
    "async-no-shared-memory": lambda fns, mode: vgym.AsyncVectorEnv(
        fns, autoreset_mode=mode, context=DEFAULT_START_METHOD, shared_memory=False
    ),
    "to_gymnasium-dummy": lambda fns, mode: to_gymnasium(vecenv.DummyVecEnv(fns)),
    "to_gymnasium-subproc": lambda fns, mode: to_gymnasium(
        vecenv.SubprocVecEnv(fns, n_workers=1, start_method=DEFAULT_START_METHOD)
    ),
}


def gym_mode(name: str) -> AutoresetMode:
    return AutoresetMode.SAME_STEP if name.startswith("to_gymnasium") else AutoresetMode.NEXT_STEP


def gym_script(envs: Any, batches: list[Any]) -> tuple[list[Any], list[Any]]:
    """Resets without and with seed / options, then steps through an automatic reset; the envs' records."""
    try:
        envs.reset()
        envs.reset(seed=3)
        envs.reset(options={"x": 1})
        envs.reset(seed=[None, 5, None])
        for batch in batches:
            envs.step(batch)
        return list(envs.get_attr("resets_seen")), list(envs.get_attr("actions_seen"))
    finally:
        envs.close()


def box_batches(dtype: Any) -> list[np.ndarray]:
    return [np.full((N, 2), 0.25 * (k + 1), dtype=dtype) for k in range(4)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(GYM_BUILDERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gymnasium_classes_reset_and_deliver_actions_as_gymnasium(name, dtype):
    mode = gym_mode(name)
    batches = box_batches(dtype)
    expected = gym_script(gym.vector.SyncVectorEnv(recording_fns(), autoreset_mode=mode), batches)
    assert gym_script(GYM_BUILDERS[name](recording_fns(), mode), batches) == expected
    # what Gymnasium does, spelled out: both keywords on every reset call, nothing on the automatic one
    resets, actions = expected
    assert resets[1] == [
        ((), {"seed": None, "options": None}),
        ((), {"seed": 4, "options": None}),
        ((), {"seed": None, "options": {"x": 1}}),
        ((), {"seed": 5, "options": None}),
        ((), {}),
    ]
    assert actions[1][0][:2] == ("ndarray", np.dtype(dtype).name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sync", "async", "async-no-shared-memory", "to_gymnasium-subproc"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_gymnasium_classes_deliver_discrete_actions_in_the_callers_dtype(name, dtype):
    fns = recording_fns(action_space=spaces.Discrete(3))
    batches = [np.array([k % 3, (k + 1) % 3, 2], dtype=dtype) for k in range(4)]
    mode = gym_mode(name)
    expected = gym_script(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode), batches)
    assert gym_script(GYM_BUILDERS[name](fns, mode), batches) == expected
    assert expected[1][0][0][:2] == (f"{np.dtype(dtype).name}", np.dtype(dtype).name)


#: MultiBinary(4) batches as trainers send them: SB3's PPO / A2C float32 Bernoulli samples, and other dtypes
MULTIBINARY_DTYPES = [np.float32, np.float64, np.bool_, np.int8, np.int64]


def multibinary_batches(dtype: Any) -> list[np.ndarray]:
    return [((np.arange(N * 4).reshape(N, 4) + k) % 3 == 0).astype(dtype) for k in range(4)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(GYM_BUILDERS))
@pytest.mark.parametrize("dtype", MULTIBINARY_DTYPES)
def test_gymnasium_classes_deliver_multibinary_rows_of_any_dtype_as_gymnasium(name, dtype):
    fns = recording_fns(action_space=spaces.MultiBinary(4))
    batches = multibinary_batches(dtype)
    mode = gym_mode(name)
    expected = gym_script(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode), batches)
    assert gym_script(GYM_BUILDERS[name](fns, mode), batches) == expected
    # what Gymnasium does, spelled out: env i gets row i unchanged (iterate over the batch), in the caller's dtype;
    # the episodes end after 3 steps, so in NEXT_STEP mode the 4th step resets the envs instead of stepping them
    stepped = batches if mode is AutoresetMode.SAME_STEP else batches[:3]
    assert expected[1] == [[row_record(batch[i]) for batch in stepped] for i in range(N)]
    assert expected[1][0][0][:2] == ("ndarray", np.dtype(dtype).name)


@pytest.mark.timeout(60)
def test_gymnasium_async_delivers_float_multibinary_rows_as_gymnasiums_async_vector_env():
    fns = recording_fns(action_space=spaces.MultiBinary(4))
    batches = multibinary_batches(np.float32)
    mode = AutoresetMode.NEXT_STEP
    peer = gym.vector.AsyncVectorEnv(fns, context=DEFAULT_START_METHOD, autoreset_mode=mode)
    assert gym_script(GYM_BUILDERS["async"](fns, mode), batches) == gym_script(peer, batches)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sync", "async"])
def test_gymnasium_classes_refuse_multibinary_values_other_than_0_or_1(name):
    envs = GYM_BUILDERS[name](recording_fns(action_space=spaces.MultiBinary(4)), AutoresetMode.NEXT_STEP)
    try:
        envs.reset(seed=0)
        for bad, message in (
            (np.full((N, 4), 0.5, np.float32), "must be integers, got dtype float32 with values other than 0 and 1"),
            (np.full((N, 4), 2, np.int64), "out of range for action space MultiBinary(4)"),
        ):
            with pytest.raises(ValueError, match=re.escape(message)):
                envs.step(bad)
        assert list(envs.get_attr("actions_seen")) == [[]] * N
    finally:
        envs.close()


@pytest.mark.timeout(60)
def test_gymnasium_async_matches_gymnasiums_async_vector_env():
    """Gymnasium's AsyncVectorEnv (pickled rows, both reset keywords) is the peer of vecenv's."""
    batches = box_batches(np.float64)
    mode = AutoresetMode.NEXT_STEP
    peer = gym.vector.AsyncVectorEnv(recording_fns(), context=DEFAULT_START_METHOD, autoreset_mode=mode)
    assert gym_script(GYM_BUILDERS["async"](recording_fns(), mode), batches) == gym_script(peer, batches)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(GYM_BUILDERS))
def test_env_whose_reset_requires_seed_and_options_runs_as_under_gymnasium(name):
    fns = [make_required_options] * 2
    mode = gym_mode(name)
    envs = GYM_BUILDERS[name](fns, mode)
    try:
        _, infos = envs.reset(seed=0)
        assert list(infos["options"]) == [None, None]
        envs.reset(options={"level": 2})
        envs.step(np.zeros(2, dtype=np.int64))
    finally:
        envs.close()


# --- the SB3-style classes -----------------------------------------------------------------------------


SB3_BUILDERS: dict[str, Callable[[list[Callable[[], gym.Env]]], vecenv.VecEnv]] = {
    "dummy": vecenv.DummyVecEnv,
    "subproc": lambda fns: vecenv.SubprocVecEnv(fns, start_method=DEFAULT_START_METHOD),
    "subproc-one-worker": lambda fns: vecenv.SubprocVecEnv(fns, n_workers=1, start_method=DEFAULT_START_METHOD),
    "subproc-no-shared-memory": lambda fns: vecenv.SubprocVecEnv(
        fns, start_method=DEFAULT_START_METHOD, shared_memory=False
    ),
    "parent": lambda fns: vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=1, start_method=DEFAULT_START_METHOD),
}


def sb3_script(venv: Any, batches: list[Any]) -> tuple[list[Any], list[Any]]:
    """SB3's calls: resets without and with seeds / options, then steps through an automatic reset."""
    try:
        venv.reset()
        venv.seed(3)
        venv.reset()
        venv.set_options({"x": 1})
        venv.reset()
        for batch in batches:
            venv.step(batch)
        return list(venv.get_attr("resets_seen")), list(venv.get_attr("actions_seen"))
    finally:
        venv.close()


def row_record(action: Any) -> tuple[str, str | None, str]:
    dtype = getattr(action, "dtype", None)
    return type(action).__name__, None if dtype is None else dtype.name, repr(action)


#: SB3's vector envs reset with ``seed=`` always and ``options=`` when set; automatic resets pass nothing
SB3_RESETS = [
    ((), {"seed": None}),
    ((), {"seed": 4}),
    ((), {"seed": None, "options": {"x": 1}}),
    ((), {}),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SB3_BUILDERS))
@pytest.mark.parametrize(
    "batches",
    [
        pytest.param(box_batches(np.float32), id="float32"),
        pytest.param(box_batches(np.float64), id="float64"),
        pytest.param([b.tolist() for b in box_batches(np.float64)], id="list"),
        pytest.param([np.full((N, 1, 2), 0.5, dtype=np.float32)] * 4, id="extra-axis"),
    ],
)
def test_sb3_classes_reset_as_sb3_and_deliver_the_callers_rows(name, batches):
    resets, actions = sb3_script(SB3_BUILDERS[name](recording_fns()), batches)
    assert resets[1] == SB3_RESETS
    assert actions[1] == [row_record(batch[1]) for batch in batches[:4]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SB3_BUILDERS))
@pytest.mark.parametrize("dtype", MULTIBINARY_DTYPES)
def test_sb3_classes_deliver_multibinary_rows_of_any_dtype_as_sb3(name, dtype):
    """SB3's DummyVecEnv steps env i with ``actions[i]``, its SubprocVecEnv sends ``actions[i]`` through a pipe:
    the row unchanged, in the caller's dtype (float32 ``0.`` / ``1.`` from PPO / A2C)."""
    batches = multibinary_batches(dtype)
    resets, actions = sb3_script(SB3_BUILDERS[name](recording_fns(action_space=spaces.MultiBinary(4))), batches)
    assert resets[1] == SB3_RESETS
    assert actions == [[row_record(batch[i]) for batch in batches] for i in range(N)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SB3_BUILDERS))
def test_an_env_that_uses_its_action_as_a_python_number_gets_the_callers_value(name):
    venv = SB3_BUILDERS[name]([make_sleep, make_sleep])
    try:
        venv.reset()
        _, rewards, _, infos = venv.step(np.array([0.001, 0.003]))  # float64, the space is float32
    finally:
        venv.close()
    np.testing.assert_array_equal(rewards, np.array([0.002, 0.006], dtype=np.float32))
    assert [info["action_type"] for info in infos] == ["float64", "float64"]


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["dummy", "subproc"])
def test_sb3_classes_call_envs_as_sb3_does(name):
    from stable_baselines3.common import vec_env as sb3_vec_env

    peer_cls = {"dummy": sb3_vec_env.DummyVecEnv, "subproc": sb3_vec_env.SubprocVecEnv}[name]
    multibinary = spaces.MultiBinary(4)
    for batches, space in (
        (box_batches(np.float64), None),
        (box_batches(np.float32), None),
        (multibinary_batches(np.float32), multibinary),
        (multibinary_batches(np.float64), multibinary),
    ):
        kwargs = {"start_method": DEFAULT_START_METHOD} if name == "subproc" else {}
        expected = sb3_script(peer_cls(recording_fns(action_space=space), **kwargs), batches)
        assert sb3_script(SB3_BUILDERS[name](recording_fns(action_space=space)), batches) == expected


# --- SB3's Monitor and vecenv's stand for each other in env_is_wrapped --------------------------------------


#: a class named as SB3's Monitor (module and name), for the tests that run without SB3 installed
FakeSB3Monitor = type("Monitor", (gym.Wrapper,), {"__module__": "stable_baselines3.common.monitor"})


@pytest.mark.timeout(60)
@pytest.mark.parametrize("vec_env_cls", [vecenv.DummyVecEnv, vecenv.SubprocVecEnv])
def test_env_is_wrapped_answers_sb3s_monitor_for_vecenvs_monitor(vec_env_cls):
    kwargs = {"vec_env_kwargs": {"start_method": DEFAULT_START_METHOD}} if vec_env_cls is vecenv.SubprocVecEnv else {}
    monitored = vecenv.make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=vec_env_cls, **kwargs)
    bare = vec_env_cls([lambda: gym.make("CartPole-v1")] * 2, **kwargs.get("vec_env_kwargs", {}))
    try:
        assert monitored.env_is_wrapped(FakeSB3Monitor) == [True, True]
        assert monitored.env_is_wrapped(vecenv.Monitor) == [True, True]
        assert monitored.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics) == [False, False]
        assert bare.env_is_wrapped(FakeSB3Monitor) == [False, False]
        assert bare.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    finally:
        monitored.close()
        bare.close()


class FirstActionPolicy:
    """A model for ``evaluate_policy``: always action 0 (CartPole episodes then last about 10 steps)."""

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False):
        return np.zeros(len(observation), dtype=np.int64), None


@pytest.mark.sb3
@pytest.mark.skipif(not HAS_SB3, reason="stable-baselines3 is not installed (make test-sb3)")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("vec_env_cls", [vecenv.DummyVecEnv, vecenv.SubprocVecEnv])
def test_evaluate_policy_finds_vecenvs_monitor_and_returns_its_episodes(vec_env_cls):
    import warnings

    from stable_baselines3.common.evaluation import evaluate_policy

    kwargs = {"vec_env_kwargs": {"start_method": DEFAULT_START_METHOD}} if vec_env_cls is vecenv.SubprocVecEnv else {}
    venv = vecenv.make_vec_env("CartPole-v1", n_envs=2, seed=0, vec_env_cls=vec_env_cls, **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # SB3 warns when it finds no Monitor
            returns, lengths = evaluate_policy(
                FirstActionPolicy(), venv, n_eval_episodes=4, return_episode_rewards=True
            )
        recorded = venv.env_method("get_episode_rewards")
        recorded_lengths = venv.env_method("get_episode_lengths")
    finally:
        venv.close()
    # evaluate_policy takes n_eval_episodes // n_envs episodes from each env, as the Monitor recorded them
    assert sorted(returns) == sorted(float(r) for env_returns in recorded for r in env_returns[:2])
    assert sorted(lengths) == sorted(int(n) for env_lengths in recorded_lengths for n in env_lengths[:2])


# --- a script without the main-module guard ----------------------------------------------------------------


NO_GUARD_SCRIPT = """
import gymnasium as gym
import vecenv
venv = vecenv.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 2, start_method={method!r})
venv.reset()
venv.close()
"""

GUARDED_CRASH_SCRIPT = """
import os
import vecenv
def crash():
    os._exit(1)
if __name__ == "__main__":
    vecenv.SubprocVecEnv([crash], start_method={method!r})
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "method", [m for m in ("forkserver", "spawn") if m in __import__("multiprocessing").get_all_start_methods()]
)
def test_a_script_without_the_main_guard_is_told_so_first(method, tmp_path):
    """A script that builds a SubprocVecEnv at top level, run by a fresh interpreter: the advice is the first
    line on stderr and the error's last line, without the workers' tracebacks (stderr stays short);
    VECENV_DEBUG=1 shows multiprocessing's own error in the workers; a worker that crashes for another reason
    keeps the plain message."""
    import subprocess
    import sys

    def run(name: str, source: str, **env: str) -> list[str]:
        script = tmp_path / name
        script.write_text(source.format(method=method))
        proc = subprocess.run(
            [sys.executable, str(script)],
            check=False,
            capture_output=True,
            text=True,
            timeout=100,
            cwd=tmp_path,
            env={**os.environ, **env},
        )
        assert proc.returncode == 1, proc.stderr
        return proc.stderr.strip().splitlines()

    advice = (
        f'The script {tmp_path / "no_guard.py"} has no `if __name__ == "__main__":` guard. With the {method} start '
        "method each worker process imports the main script first"
    )
    lines = run("no_guard.py", NO_GUARD_SCRIPT, VECENV_DEBUG="0")
    assert lines[0].startswith(f"vecenv: {advice}"), lines[0]
    assert "VECENV_DEBUG=1 shows multiprocessing's own error in each worker" in lines[0]
    assert lines[-1] == f"vecenv.errors.WorkerDiedError: {lines[0].removeprefix('vecenv: ')}"
    assert len(lines) < 30
    assert "RuntimeError" not in "\n".join(lines)  # multiprocessing's bootstrapping error, once per worker
    # the debug switch: the workers' own errors, and the message that points to them
    lines = run("no_guard.py", NO_GUARD_SCRIPT, VECENV_DEBUG="1")
    assert any("An attempt has been made to start a new process before" in line for line in lines)
    assert (
        f'most likely because the script {tmp_path / "no_guard.py"} has no `if __name__ == "__main__":` guard'
        in (lines[-1])
    )
    # a worker that crashes for another reason keeps the plain message
    last = run("guarded.py", GUARDED_CRASH_SCRIPT)[-1]
    assert last.startswith("vecenv.errors.WorkerDiedError: ")
    assert "__main__" not in last and "exited with code 1 during env construction" in last


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sync", "async", "async-no-shared-memory"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_dict_actions_follow_the_spaces_key_order_as_in_gymnasium(name, dtype):
    space = spaces.Dict({"jump": spaces.Discrete(2), "move": spaces.Box(-1, 1, (2,), np.float32)})
    fns = recording_fns(action_space=space)
    batches = [
        # the caller's key order differs from the space's; an extra key is not part of the action
        {"move": np.full((N, 2), 0.5, np.float32), "extra": np.ones(N), "jump": np.array([k % 2, 1, 0], dtype=dtype)}
        for k in range(4)
    ]
    mode = AutoresetMode.NEXT_STEP
    expected = gym_script(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode), batches)
    assert gym_script(GYM_BUILDERS[name](fns, mode), batches) == expected
    # Gymnasium's Dict sorts the keys of a plain dict: the space's order is jump, move
    assert expected[1][0][0][2].startswith("{'jump': np.")

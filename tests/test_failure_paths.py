"""What a vector env looks like after something went wrong, on every backend it applies to.

- A step that raised (an env's exception, KeyboardInterrupt in an env or in the caller's wait) is completed by the
  next step: the envs that finished stepping in the failed call report that result once (their new action is
  ignored), the others step now; no done flag outlives the step that set it.
- A worker that was killed (step timeout) or died is never written to or read from again: every later call raises
  the recorded cause, or goes through the restart rule when ``max_restarts`` allows.
- Seeds / options set while partial batches are in flight reach each env's next reset; a refused ``send`` changes
  nothing.
- A step whose info holds a value that cannot be copied (a lock, a generator) raises ``UncopyableInfoError`` after
  every env stepped; the next step returns them all (the value left out), so no episode end is lost.
- The SB3-style wrappers that count episodes or stack frames are right in every autoreset mode.
- ``to_gymnasium`` carries the real terminated / truncated flags.

Expectations come from :class:`tests.envs_failure.ScriptEnv`, whose observations ``[offset, episode, t, seed]``
and rewards ``t`` are computed by hand, and from Gymnasium's own vector envs stepped with the same actions.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import vecenv
import vecenv.gymnasium as vgym
from tests.conftest import DEFAULT_START_METHOD, START_METHODS
from tests.envs import RefusedResetObsEnv
from tests.envs_failure import (
    BAD_INFOS,
    BOTH,
    GENERATOR_INFO,
    INTERRUPT,
    RAISE,
    SLOW,
    STEP,
    TERMINATE,
    TERMINATE_BAD_RESET,
    TERMINATE_LOCK_INFO,
    TERMINATE_UNPICKLABLE_INFO,
    TIMEOUT,
    TRUNCATE,
    ScriptFault,
    expected_obs,
    make,
)
from tests.envs_faults import make_env as make_fault_env
from vecenv.adapters import from_gymnasium, to_gymnasium
from vecenv.errors import AlreadyPendingCallError, WorkerDiedError

#: SB3-style backends: one group in this process, one group in one worker process (each start method), one env
#: per worker process (the failed call's other groups complete), and a group in this process beside a worker
SB3_BACKENDS = ["dummy", *(f"subproc-{method}" for method in START_METHODS), "subproc-split", "parent"]


def script_fns(n: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    return [functools.partial(make, i, **kwargs) for i in range(n)]


def build(kind: str, env_fns: list[Callable[[], gym.Env]], **kwargs: Any) -> vecenv.VecEnv:
    """A vector env of ``kind`` (see :data:`SB3_BACKENDS`)."""
    if kind == "dummy":
        return vecenv.DummyVecEnv(env_fns, **kwargs)
    if kind == "subproc-split":
        return vecenv.SubprocVecEnv(env_fns, n_workers=len(env_fns), **kwargs)
    if kind == "parent":
        return vecenv.SubprocVecEnv(env_fns, n_workers=1, parent_envs=1, **kwargs)
    assert kind.startswith("subproc-"), kind
    return vecenv.SubprocVecEnv(env_fns, start_method=kind.removeprefix("subproc-"), n_workers=1, **kwargs)


@pytest.fixture
def built() -> Any:
    venvs: list[Any] = []
    yield venvs
    for venv in venvs:
        with contextlib.suppress(Exception):
            venv.close()


def actions(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def steps_taken(venv: vecenv.VecEnv) -> list[int]:
    return list(venv.get_attr("steps_taken"))


# --- 1. a step that raised is completed by the next step -------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", SB3_BACKENDS)
def test_episode_end_in_a_failed_step_is_reported_once_and_no_done_outlives_it(kind, built):
    """Env 0 ends its episode, env 1 raises in the same call. The next step reports env 0's episode end once (its
    terminal observation and reward from the failed call; its new action ignored), steps envs 1 and 2, and the
    step after reports no done at all."""
    venv = build(kind, script_fns(3))
    built.append(venv)
    venv.reset()
    venv.step(actions(STEP, STEP, STEP))
    with pytest.raises(ScriptFault, match="env 1 raised in step") as info:
        venv.step(actions(TERMINATE, RAISE, STEP))
    assert "vecenv: raised by env 1 during step" in info.value.__notes__

    obs, rewards, dones, infos = venv.step(actions(TERMINATE, STEP, STEP))  # env 0's TERMINATE is ignored
    np.testing.assert_array_equal(dones, [True, False, False])
    np.testing.assert_array_equal(rewards, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(obs[0], expected_obs(0, 1, 0))  # the new episode's first observation
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected_obs(0, 0, 2))
    assert infos[0]["last_t"] == 2 and infos[0]["TimeLimit.truncated"] is False
    np.testing.assert_array_equal(obs[1], expected_obs(1, 0, 2))
    np.testing.assert_array_equal(obs[2], expected_obs(2, 0, 2))
    assert infos[1] == infos[2] == {"TimeLimit.truncated": False}
    assert venv.reset_infos[0] == {"reset_episode": 1}
    assert steps_taken(venv) == [2, 2, 2]  # no env stepped twice, none skipped

    obs, rewards, dones, infos = venv.step(actions(STEP, STEP, STEP))
    np.testing.assert_array_equal(dones, [False, False, False])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 1), expected_obs(1, 0, 3), expected_obs(2, 0, 3)])
    assert all("terminal_observation" not in info for info in infos)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "subproc-split", "parent", f"subproc-{DEFAULT_START_METHOD}"])
def test_failed_autoreset_is_finished_by_the_next_step(kind, built):
    """Env 0 ends its episode and its automatic reset raises: the next step retries the reset (its new action is
    ignored) and reports the episode end with its terminal observation then."""
    venv = build(kind, script_fns(2))
    built.append(venv)
    venv.reset()
    venv.step(actions(STEP, STEP))
    with pytest.raises(ScriptFault, match="reset of env 0 failed") as info:
        venv.step(actions(TERMINATE_BAD_RESET, STEP))
    assert "vecenv: raised by env 0 during step" in info.value.__notes__
    obs, rewards, dones, infos = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(dones, [True, False])
    np.testing.assert_array_equal(rewards, [2.0, 2.0])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 0), expected_obs(1, 0, 2)])
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected_obs(0, 0, 2))
    assert venv.reset_infos[0] == {"reset_episode": 1}
    assert steps_taken(venv) == [2, 2]
    _, _, dones, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(dones, [False, False])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "subproc-split", f"subproc-{DEFAULT_START_METHOD}"])
def test_next_step_mode_failed_step_and_failed_reset_step(kind, built):
    """NEXT_STEP: env 0's termination in a failed call is reported by the next step (last observation), the step
    after resets it; a reset step that raises is retried by the next step."""
    venv = build(kind, script_fns(2), autoreset_mode=AutoresetMode.NEXT_STEP)
    built.append(venv)
    venv.reset()
    with pytest.raises(ScriptFault):
        venv.step(actions(TERMINATE, RAISE))
    obs, rewards, dones, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(dones, [True, False])
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 1), expected_obs(1, 0, 1)])
    obs, rewards, dones, _ = venv.step(actions(TERMINATE_BAD_RESET, STEP))  # env 0: the reset step
    np.testing.assert_array_equal(obs[0], expected_obs(0, 1, 0))
    np.testing.assert_array_equal(rewards, [0.0, 2.0])
    obs, _, dones, _ = venv.step(actions(TERMINATE_BAD_RESET, STEP))
    np.testing.assert_array_equal(dones, [True, False])
    with pytest.raises(ScriptFault, match="reset of env 0 failed"):
        venv.step(actions(STEP, STEP))  # env 0's reset step raises
    obs, rewards, dones, _ = venv.step(actions(STEP, STEP))  # retried: env 0 resets now
    np.testing.assert_array_equal(dones, [False, False])
    np.testing.assert_array_equal(obs[0], expected_obs(0, 2, 0))
    np.testing.assert_array_equal(rewards[0], 0.0)
    assert steps_taken(venv)[0] == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "parent"])
def test_keyboard_interrupt_in_an_env_then_resume_keeps_vecmonitor_exact(kind, built):
    """Ctrl-C inside an env and going on without reset() (as SB3's learn(reset_num_timesteps=False)): every
    episode VecMonitor records has the env's real length (5) and return (1+2+3+4+5)."""
    venv = vecenv.VecMonitor(build(kind, script_fns(2, max_steps=5)))
    built.append(venv)
    venv.reset()
    for _ in range(4):
        venv.step(actions(STEP, STEP))
    # one env ends its episode (t = 5) in the call in which the other one (in this process) is interrupted
    with pytest.raises(KeyboardInterrupt):
        venv.step(actions(STEP, INTERRUPT) if kind == "dummy" else actions(INTERRUPT, STEP))
    ended: list[tuple[int, float, int]] = []
    for _ in range(11):
        _, _, dones, infos = venv.step(actions(STEP, STEP))
        ended += [(i, infos[i]["episode"]["r"], infos[i]["episode"]["l"]) for i in np.flatnonzero(dones)]
    assert ended == [(0, 15.0, 5), (1, 15.0, 5), (0, 15.0, 5), (1, 15.0, 5), (0, 15.0, 5), (1, 15.0, 5)]


def _interrupt_main_after(seconds: float) -> threading.Timer:
    """SIGINT to the main thread after ``seconds`` (as a terminal's Ctrl-C reaches a program waiting in poll)."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(seconds, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_ctrl_c_while_waiting_for_workers_loses_no_step(n_workers, built):
    """Ctrl-C while the parent waits for the workers: the workers finish that step, and the next step returns it
    (their new actions ignored) instead of stepping again."""
    venv = vecenv.SubprocVecEnv(script_fns(2, slow=1.0), n_workers=n_workers)
    built.append(venv)
    venv.reset()
    venv.step(actions(STEP, STEP))
    timer = _interrupt_main_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        venv.step(actions(SLOW, SLOW))
    timer.join()
    obs, _rewards, dones, _ = venv.step(actions(TERMINATE, TERMINATE))  # returns the interrupted step
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 2), expected_obs(1, 0, 2)])
    np.testing.assert_array_equal(dones, [False, False])
    assert steps_taken(venv) == [2, 2]
    obs, _, dones, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 3), expected_obs(1, 0, 3)])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", f"subproc-{DEFAULT_START_METHOD}"])
def test_reset_after_a_failed_step_drops_what_it_held(kind, built):
    venv = build(kind, script_fns(2))
    built.append(venv)
    venv.reset()
    with pytest.raises(ScriptFault):
        venv.step(actions(TERMINATE, RAISE))
    obs = venv.reset()
    np.testing.assert_array_equal(obs, [expected_obs(0, 2, 0), expected_obs(1, 1, 0)])
    obs, _, dones, _infos = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(dones, [False, False])
    np.testing.assert_array_equal(obs, [expected_obs(0, 2, 1), expected_obs(1, 1, 1)])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", f"subproc-{DEFAULT_START_METHOD}"])
def test_partial_batch_that_raised_returns_its_finished_envs_with_the_next_recv(kind, built):
    """send() to envs of one group, one raises: recv() raises, the next recv() returns the envs that stepped."""
    venv = build(kind, script_fns(2))
    built.append(venv)
    venv.async_reset()
    venv.recv()
    venv.send(actions(TERMINATE, RAISE), [0, 1])
    with pytest.raises(ScriptFault):
        venv.recv()
    obs, _rewards, dones, infos, env_ids = venv.recv()
    np.testing.assert_array_equal(env_ids, [0])
    np.testing.assert_array_equal(dones, [True])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 0)])
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected_obs(0, 0, 1))
    venv.send(actions(STEP, STEP), [0, 1])
    obs, _, dones, _, env_ids = venv.recv()
    np.testing.assert_array_equal(env_ids, [0, 1])
    np.testing.assert_array_equal(dones, [False, False])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 1), expected_obs(1, 0, 1)])


GYM_MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::UserWarning")  # AsyncVectorEnv logs the env's error as Gymnasium does
@pytest.mark.parametrize("cls", ["sync", "async"])
@pytest.mark.parametrize("mode", GYM_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(
    ("failing", "error"),
    [((TERMINATE, RAISE), ScriptFault), ((TERMINATE_LOCK_INFO, STEP), vecenv.UncopyableInfoError)],
    ids=["env-error", "uncopyable-info"],
)
def test_gymnasium_api_failed_step_reports_the_termination_once(cls, mode, failing, error, built):
    """Env 0 terminates in a step that raises (env 1's error, or a lock in env 0's info): the next step reports the
    termination once."""
    if cls == "sync":
        envs = vgym.SyncVectorEnv(script_fns(2), autoreset_mode=mode)
    else:
        envs = vgym.AsyncVectorEnv(script_fns(2), autoreset_mode=mode, n_workers=1)
    built.append(envs)
    envs.reset()
    with pytest.raises(error):
        envs.step(actions(*failing))
    obs, rewards, terminations, truncations, infos = envs.step(actions(STEP, STEP))
    np.testing.assert_array_equal(terminations, [True, False])
    np.testing.assert_array_equal(truncations, [False, False])
    np.testing.assert_array_equal(rewards, [1.0, 1.0])
    assert "handle" not in infos
    if mode is AutoresetMode.SAME_STEP:
        np.testing.assert_array_equal(infos["final_obs"][0], expected_obs(0, 0, 1))
        np.testing.assert_array_equal(obs[0], expected_obs(0, 1, 0))
    else:
        np.testing.assert_array_equal(obs[0], expected_obs(0, 0, 1))
    _, _, terminations, _, _ = envs.step(actions(STEP, STEP))
    np.testing.assert_array_equal(terminations, [False, False])


# --- 2. a killed or dead worker is never used again ------------------------------------------------------------


def _every_call(venv: vecenv.VecEnv) -> dict[str, Callable[[], Any]]:
    n = venv.num_envs
    return {
        "reset": venv.reset,
        "step": lambda: venv.step(np.zeros(n, dtype=np.int64)),
        "get_attr": lambda: venv.get_attr("offset"),
        "set_attr": lambda: venv.set_attr("knob", 1),
        "env_method": lambda: venv.env_method("poke", 1),
        "env_is_wrapped": lambda: venv.env_is_wrapped(gym.Wrapper),
        "has_attr": lambda: venv.has_attr("offset"),
        "get_images": venv.get_images,
        "seed_then_step": lambda: (venv.seed(1), venv.step(np.zeros(n, dtype=np.int64))),
        "options_then_reset": lambda: (venv.set_options({"a": 1}), venv.reset()),
        "async_reset_recv": lambda: (venv.async_reset(), venv.recv()),
    }


@pytest.mark.timeout(90)
@pytest.mark.parametrize("start_method", START_METHODS)
@pytest.mark.parametrize("how", ["timeout", "death"])
def test_a_killed_or_dead_worker_never_touches_the_callers_files(how, start_method, tmp_path):
    """After a step timeout killed a worker (or it died in a step), the caller opens files, which take the freed
    descriptor numbers; every later call raises WorkerDiedError naming what happened during step, and nothing
    is written to or read from those files."""
    fault = {"timeout": "hang", "death": "sigkill"}[how]
    fns = [functools.partial(make_fault_env, 0, where="step", fault=fault, at=2), functools.partial(make_fault_env, 1)]
    venv = vecenv.SubprocVecEnv(fns, start_method=start_method, n_workers=1, step_timeout=1.0)
    try:
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
        expected = TimeoutError if how == "timeout" else WorkerDiedError
        with pytest.raises(expected):
            venv.step(np.zeros(2, dtype=np.int64))
        files = []
        for i in range(24):
            f = open(tmp_path / f"user_file_{i}.txt", "w+b")  # noqa: SIM115 - closed below
            f.write(f"contents of file {i}".encode())
            f.flush()
            f.seek(0)
            files.append(f)
        for name, call in _every_call(venv).items():
            with pytest.raises(WorkerDiedError) as info:
                call()
            message = str(info.value)
            assert "during step" in message, (name, message)
            if how == "timeout":
                assert "step_timeout" in message and "out-of-memory" not in message, (name, message)
            else:
                assert "SIGKILL" in message, (name, message)
        venv.close()
        for i, f in enumerate(files):
            assert f.tell() == 0, f"vecenv moved the position of user_file_{i}.txt"
            f.close()
            assert (tmp_path / f"user_file_{i}.txt").read_bytes() == f"contents of file {i}".encode()
    finally:
        venv.close()


# --- 3. seeds / options while partial batches are in flight ------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["dummy", "subproc-2", "parent"])
def test_seed_while_a_partial_batch_is_in_flight(kind, built):
    """send() to env 0; seed(123); send() to env 2 (another worker in subproc-2, the same group otherwise): nothing
    in flight is lost or overwritten, a refused send changes nothing, and every env gets its seed at its next
    reset."""
    fns = script_fns(4)
    if kind == "dummy":
        venv = vecenv.DummyVecEnv(fns)
    elif kind == "parent":
        venv = vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2)
    else:
        venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    built.append(venv)
    venv.async_reset()
    venv.recv()
    venv.send(actions(STEP), [0])
    venv.seed(123)
    venv.set_options({"t": 5})
    if kind == "dummy":
        with pytest.raises(AlreadyPendingCallError):
            venv.send(actions(STEP), [2])  # env 2's group is busy
        expected_ids = [0]
    else:
        venv.send(actions(STEP), [2])
        expected_ids = [0, 2]
    got: list[int] = []
    while len(got) < len(expected_ids):
        obs, _rewards, _dones, _infos, env_ids = venv.recv()
        got += env_ids.tolist()
        for row, env_id in zip(obs, env_ids, strict=True):
            np.testing.assert_array_equal(row, expected_obs(env_id, 0, 1))
    assert sorted(got) == expected_ids
    obs = venv.reset()
    np.testing.assert_array_equal(obs, [expected_obs(i, 1, 5, seed=123 + i) for i in range(4)])


# --- 4. restarts cover a worker that died while seeds or options were pending ------------------------------


def _kill(venv: vecenv.SubprocVecEnv, w: int) -> None:
    process = venv.processes[w]
    os.kill(process.pid, signal.SIGKILL)
    process.join(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["seed", "set_options", "nothing"])
def test_restart_covers_a_worker_that_died_with_seeds_pending(what, built):
    venv = vecenv.SubprocVecEnv(script_fns(4), n_workers=2, max_restarts=3)
    built.append(venv)
    venv.reset()
    _kill(venv, 0)
    if what == "seed":
        venv.seed(5)
    elif what == "set_options":
        venv.set_options({"t": 7})
    with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[0, 1\]"):
        obs, _rewards, dones, infos = venv.step(actions(STEP, STEP, STEP, STEP))
    assert venv.restarts == 1
    np.testing.assert_array_equal(dones, [True, True, False, False])
    assert all(infos[i]["vecenv.restarted"] and infos[i]["TimeLimit.truncated"] for i in (0, 1))
    # the restarted envs were reset with the seeds / options still pending for them
    seed = {"seed": 5, "set_options": -1, "nothing": -1}[what]
    t0 = 7 if what == "set_options" else 0
    for i in (0, 1):
        np.testing.assert_array_equal(obs[i], expected_obs(i, 0, t0, seed=seed + i if seed >= 0 else -1))
    for i in (2, 3):
        np.testing.assert_array_equal(obs[i], expected_obs(i, 0, 1))
    obs = venv.reset()  # envs 2 and 3 got theirs at this reset
    seeds = [-1, -1, 7, 8] if what == "seed" else [-1] * 4
    for i in range(4):
        t = 7 if what == "set_options" and i >= 2 else 0
        np.testing.assert_array_equal(obs[i], expected_obs(i, 1, t, seed=seeds[i]))


@pytest.mark.timeout(60)
def test_restart_rule_covers_calls_and_reports_the_restart_at_the_next_step(built):
    venv = vecenv.SubprocVecEnv(script_fns(4), n_workers=2, max_restarts=2)
    built.append(venv)
    venv.reset()
    venv.step(actions(STEP, STEP, STEP, STEP))
    _kill(venv, 1)
    with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[2, 3\]"):
        assert venv.get_attr("offset") == [0, 1, 2, 3]
    obs, rewards, dones, infos = venv.step(actions(STEP, STEP, STEP, STEP))
    np.testing.assert_array_equal(dones, [False, False, True, True])
    np.testing.assert_array_equal(rewards, [2.0, 2.0, 0.0, 0.0])
    assert infos[2]["vecenv.restarted"] and infos[3]["vecenv.restarted"]
    np.testing.assert_array_equal(obs[2:], [expected_obs(2, 0, 0), expected_obs(3, 0, 0)])
    obs, _, dones, _ = venv.step(actions(STEP, STEP, STEP, STEP))
    np.testing.assert_array_equal(dones, [False] * 4)
    np.testing.assert_array_equal(obs[2:], [expected_obs(2, 0, 1), expected_obs(3, 0, 1)])


@pytest.mark.timeout(60)
def test_restart_rule_covers_a_death_during_reset(built):
    fns = [functools.partial(make_fault_env, i, where="reset", fault="sigkill", at=2) for i in range(2)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=1, max_restarts=1)
    built.append(venv)
    venv.reset()
    venv.seed(3)
    with pytest.warns(RuntimeWarning, match="restarting the worker"):
        obs = venv.reset()
    assert venv.restarts == 1
    np.testing.assert_array_equal(obs[:, :2], [[0, 0], [1, 0]])  # a fresh episode 0 of new envs
    assert venv.get_attr("np_random_seed") == [3, 4]


# --- 5. SB3-style wrappers in every autoreset mode -------------------------------------------------------------


MODES = [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]


def mode_venv(backend: str, mode: AutoresetMode, n_envs: int) -> vecenv.VecEnv:
    """``n_envs`` ScriptEnvs whose episodes last 3 steps, on ``backend`` ("dummy" or "subproc") in ``mode``."""
    kind = "dummy" if backend == "dummy" else f"subproc-{DEFAULT_START_METHOD}"
    return build(kind, script_fns(n_envs, max_steps=3), autoreset_mode=mode)


def _drive(venv: vecenv.VecEnv, mode: AutoresetMode, n_steps: int) -> list[tuple[np.ndarray, np.ndarray, list]]:
    """Step with STEP actions; in DISABLED mode reset everything when an episode ends (the envs end together)."""
    out = []
    for _ in range(n_steps):
        obs, _, dones, infos = venv.step(np.zeros(venv.num_envs, dtype=np.int64))
        out.append((obs, dones, infos))
        if mode is AutoresetMode.DISABLED and dones.any():
            assert dones.all()
            out.append((venv.reset(), np.zeros(venv.num_envs, dtype=bool), []))
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_vec_monitor_counts_real_episodes_in_every_autoreset_mode(backend, mode, built):
    inner = mode_venv(backend, mode, 2)
    venv = vecenv.VecMonitor(inner)
    built.append(venv)
    venv.reset()
    episodes = [info["episode"] for _, _, infos in _drive(venv, mode, 12) for info in infos if "episode" in info]
    assert len(episodes) >= 6
    assert [(e["r"], e["l"]) for e in episodes] == [(6.0, 3)] * len(episodes)


def _expected_stacks(frames_per_step: list[np.ndarray], starts: list[bool], n_stack: int) -> list[np.ndarray]:
    """The frame stacks a user expects: the last ``n_stack`` observations of the current episode, zero-padded."""
    stacks, history = [], []
    for frame, start in zip(frames_per_step, starts, strict=True):
        history = [frame] if start else [*history, frame]
        padded = [np.zeros_like(frame)] * max(0, n_stack - len(history)) + history[-n_stack:]
        stacks.append(np.concatenate(padded, axis=-1))
    return stacks


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_vec_frame_stack_never_mixes_episodes_in_any_autoreset_mode(backend, mode, built):
    inner = mode_venv(backend, mode, 1)
    venv = vecenv.VecFrameStack(inner, n_stack=2)
    built.append(venv)
    first = venv.reset()
    np.testing.assert_array_equal(first[0], np.concatenate([np.zeros(4, np.float32), expected_obs(0, 0, 0)]))
    frames, starts, got = [expected_obs(0, 0, 0)], [True], [first[0]]
    episode, t = 0, 0
    pending_reset = False
    for obs, dones, infos in _drive(venv, mode, 10):
        if not infos:  # the caller's reset (DISABLED mode)
            episode, t = episode + 1, 0
            frames.append(expected_obs(0, episode, 0))
            starts.append(True)
        elif pending_reset:  # NEXT_STEP: this step reset the env
            episode, t, pending_reset = episode + 1, 0, False
            frames.append(expected_obs(0, episode, 0))
            starts.append(True)
        else:
            t += 1
            frames.append(expected_obs(0, episode, t))
            starts.append(False)
            if dones[0] and mode is AutoresetMode.SAME_STEP:
                terminal = _expected_stacks(frames, starts, 2)[-1]
                np.testing.assert_array_equal(infos[0]["terminal_observation"], terminal)
                episode, t = episode + 1, 0
                frames.append(expected_obs(0, episode, 0))
                starts.append(True)
                frames.pop(-2), starts.pop(-2)  # the step returned the new episode's first frame
            elif dones[0] and mode is AutoresetMode.NEXT_STEP:
                pending_reset = True
        got.append(obs[0])
    expected = _expected_stacks(frames, starts, 2)
    for step, (want, have) in enumerate(zip(expected, got, strict=True)):
        np.testing.assert_array_equal(have, want, err_msg=f"step {step}")


# --- 6. to_gymnasium carries the real flags --------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", "subproc", "monitor", "round-trip"])
def test_to_gymnasium_keeps_terminated_and_truncated_both_set(backend, built):
    fns = script_fns(2)
    if backend == "dummy":
        venv: Any = vecenv.DummyVecEnv(fns)
    elif backend == "subproc":
        venv = vecenv.SubprocVecEnv(fns, n_workers=1)
    elif backend == "monitor":
        venv = vecenv.VecMonitor(vecenv.DummyVecEnv(fns))
    else:
        venv = from_gymnasium(gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP))
    envs = to_gymnasium(venv)
    reference = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    built += [envs, reference]
    envs.reset(seed=0)
    reference.reset(seed=0)
    for step_actions in (actions(BOTH, STEP), actions(TERMINATE, BOTH), actions(STEP, STEP)):
        got = envs.step(step_actions)
        want = reference.step(step_actions)
        for name, a, b in zip(("obs", "rewards", "terminations", "truncations"), got[:4], want[:4], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_script_env_sanity():
    """The hand-computed expectations above match the env stepped by hand."""
    env = make(3)
    obs, info = env.reset(seed=9)
    np.testing.assert_array_equal(obs, expected_obs(3, 0, 0, seed=9))
    assert info == {"reset_episode": 0}
    obs, reward, terminated, truncated, info = env.step(TERMINATE)
    np.testing.assert_array_equal(obs, expected_obs(3, 0, 1, seed=9))
    assert (reward, terminated, truncated, info) == (1.0, True, False, {"last_t": 1})
    start = time.monotonic()
    env.slow = 0.01
    env.step(SLOW)
    assert env.t == 2 and time.monotonic() - start >= 0.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_vec_normalize_return_statistics_in_every_autoreset_mode(backend, mode, built):
    """The return statistics sample each step of each episode once: rewards 1, 2, 3 give the discounted returns
    1, 1g + 2, (1g + 2)g + 3 per episode, whatever the mode (NEXT_STEP's reset steps are no sample)."""
    gamma = 0.9
    venv = vecenv.VecNormalize(mode_venv(backend, mode, 2), gamma=gamma)
    built.append(venv)
    venv.reset()
    _drive(venv, mode, 12 if mode is not AutoresetMode.NEXT_STEP else 15)  # four episodes per env
    episode = [1.0, 1.0 * gamma + 2.0, (1.0 * gamma + 2.0) * gamma + 3.0]
    samples = np.array(episode * 4 * 2)
    assert venv.ret_rms.count == pytest.approx(len(samples), abs=1e-3)
    assert venv.ret_rms.mean == pytest.approx(samples.mean(), rel=1e-4)
    assert venv.ret_rms.var == pytest.approx(samples.var(), rel=1e-3)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED], ids=lambda m: m.name)
def test_from_gymnasium_finishes_a_step_whose_reset_of_finished_envs_raised(mode, built):
    """from_gymnasium resets finished envs right after the step; if that reset raises, the next step finishes it
    and returns that step: env 0's episode end is reported once, with its terminal observation."""
    venv = from_gymnasium(gym.vector.SyncVectorEnv(script_fns(2), autoreset_mode=mode))
    built.append(venv)
    venv.reset()
    with pytest.raises(ScriptFault, match="reset of env 0 failed"):
        venv.step(actions(TERMINATE_BAD_RESET, STEP))
    obs, rewards, dones, infos = venv.step(actions(STEP, STEP))  # the failed step, finished
    np.testing.assert_array_equal(dones, [True, False])
    np.testing.assert_array_equal(rewards, [1.0, 1.0])
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected_obs(0, 0, 1))
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 0), expected_obs(1, 0, 1)])
    obs, _, dones, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(dones, [False, False])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 1), expected_obs(1, 0, 2)])


@pytest.mark.timeout(60)
def test_ctrl_c_then_a_call_then_step_still_returns_the_interrupted_step(built):
    """A call between the interrupted step and the next one (here get_attr) collects the workers' step replies
    instead of dropping them; the next step returns that step."""
    venv = vecenv.SubprocVecEnv(script_fns(2, slow=1.0), n_workers=2)
    built.append(venv)
    venv.reset()
    timer = _interrupt_main_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        venv.step(actions(SLOW, SLOW))
    timer.join()
    assert venv.get_attr("steps_taken") == [1, 1]
    obs, _, _, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 1), expected_obs(1, 0, 1)])
    assert steps_taken(venv) == [1, 1]


@pytest.mark.timeout(60)
def test_partial_batches_restart_a_dead_worker_within_the_budget(built):
    """send() to a dead worker and a worker that dies before recv(): both are restarted (max_restarts=2); the
    envs sent come back from recv() with the restart report."""
    venv = vecenv.SubprocVecEnv(script_fns(4, slow=2.0), n_workers=2, max_restarts=2)
    built.append(venv)
    venv.async_reset()
    venv.recv()
    _kill(venv, 0)
    with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[0, 1\]"):
        venv.send(actions(STEP, STEP), [0, 1])
    venv.send(actions(SLOW, SLOW), [2, 3])  # still stepping when it is killed
    _kill(venv, 1)
    got: dict[int, tuple[np.ndarray, bool, dict]] = {}
    with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[2, 3\]"):
        while len(got) < 4:
            obs, _, dones, infos, env_ids = venv.recv()
            got.update({int(i): (o, bool(d), info) for i, o, d, info in zip(env_ids, obs, dones, infos, strict=True)})
    assert venv.restarts == 2
    for i in range(4):
        row, done, info = got[i]
        assert done and info["vecenv.restarted"]
        np.testing.assert_array_equal(row, expected_obs(i, 0, 0))
    venv.send(actions(STEP, STEP, STEP, STEP), [0, 1, 2, 3])
    obs, _, dones, _, env_ids = venv.recv()
    assert env_ids.tolist() == [0, 1, 2, 3] and not dones.any()
    np.testing.assert_array_equal(obs, [expected_obs(i, 0, 1) for i in range(4)])


@pytest.mark.timeout(60)
def test_async_reset_restarts_a_dead_worker_with_the_seeds(built):
    venv = vecenv.SubprocVecEnv(script_fns(2), n_workers=2, max_restarts=1)
    built.append(venv)
    venv.reset()
    _kill(venv, 1)
    venv.seed(10)
    with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[1\]"):
        venv.async_reset()
    obs, rewards, dones, _infos, env_ids = venv.recv()
    assert env_ids.tolist() == [0, 1] and not dones.any() and rewards.tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 0, seed=10), expected_obs(1, 0, 0, seed=11)])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["env_method", "step"])
def test_an_envs_own_timeout_error_is_not_a_dead_worker(where, built):
    """An env raising TimeoutError itself, from a live worker, is the env's error: no restart, same worker."""
    venv = vecenv.SubprocVecEnv(script_fns(2), n_workers=1, max_restarts=3)
    built.append(venv)
    venv.reset()
    pid = venv.processes[0].pid
    with pytest.raises(TimeoutError, match="the env's own timeout"):
        if where == "env_method":
            venv.env_method("fail_with_timeout", indices=[1])
        else:
            venv.step(actions(STEP, TIMEOUT))
    assert venv.restarts == 0 and venv.processes[0].pid == pid
    obs, _, _, _ = venv.step(actions(STEP, STEP))
    np.testing.assert_array_equal(obs[1], expected_obs(1, 0, 1))


# --- an info that cannot be copied: the step raises, its results are kept ----------------------------------------


def hand_stepped(
    offset: int, seed: int, script: list[int], mode: AutoresetMode = AutoresetMode.SAME_STEP
) -> tuple[list[tuple[np.ndarray, float, bool, np.ndarray | None]], int]:
    """``(obs, reward, done, terminal observation)`` of a :class:`ScriptEnv` stepped by hand with ``script`` after
    ``reset(seed=seed)``, with SB3's automatic reset (``SAME_STEP``) or Gymnasium's reset step (``NEXT_STEP``);
    and the number of ``env.step`` calls."""
    env = make(offset)
    env.reset(seed=seed)
    got: list[tuple[np.ndarray, float, bool, np.ndarray | None]] = []
    reset_now = False
    for action in script:
        if reset_now:
            obs, _ = env.reset()
            got.append((obs, 0.0, False, None))
            reset_now = False
            continue
        obs, reward, terminated, truncated, _ = env.step(action)
        terminal = None
        if terminated or truncated:
            if mode is AutoresetMode.SAME_STEP:
                terminal, (obs, _) = obs, env.reset()
            else:
                reset_now = True
        got.append((obs, reward, terminated or truncated, terminal))
    return got, env.steps_taken


def episodes_of(steps: list[tuple[np.ndarray, float, bool, np.ndarray | None]]) -> list[tuple[float, int]]:
    """``(return, length)`` of each finished episode in ``steps`` (``NEXT_STEP``'s reset steps are no step)."""
    finished, total, length = [], 0.0, 0
    for obs, reward, done, _ in steps:
        if not done and obs[2] == 0:  # a reset step
            continue
        total, length = total + reward, length + 1
        if done:
            finished.append((total, length))
            total, length = 0.0, 0
    return finished


UNCOPYABLE_CASES = [
    *((kind, AutoresetMode.SAME_STEP) for kind in SB3_BACKENDS),
    *((kind, AutoresetMode.NEXT_STEP) for kind in ("dummy", f"subproc-{DEFAULT_START_METHOD}")),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("kind", "mode"), UNCOPYABLE_CASES, ids=lambda v: getattr(v, "name", v))
def test_an_info_that_cannot_be_copied_loses_no_step_and_no_episode_end(kind, mode, built):
    """Env 0 ends its episode with a lock in its info; later env 1 steps with a generator in its info. Each such step
    raises UncopyableInfoError naming the env, the key and the type; the next step returns what every env did in it
    (its new actions ignored, the value left out and named): the sequence each env delivers equals the env stepped
    by hand with the actions that reached it, and VecMonitor records each episode once, as the env played it."""
    venv = vecenv.VecMonitor(build(kind, script_fns(2), autoreset_mode=mode))
    built.append(venv)
    venv.seed(5)
    venv.reset()
    calls = [(STEP, STEP), (TERMINATE_LOCK_INFO, STEP), (STEP, TERMINATE), (STEP, GENERATOR_INFO)]
    calls += [(TERMINATE, TERMINATE), (STEP, STEP), (STEP, STEP)]
    reached = [[STEP, TERMINATE_LOCK_INFO, STEP, STEP, STEP], [STEP, STEP, GENERATOR_INFO, STEP, STEP]]
    delivered: list[list[tuple[np.ndarray, float, bool, np.ndarray | None]]] = [[], []]
    monitored: list[tuple[int, float, int]] = []
    for call, step_actions in enumerate(calls):
        if call in (1, 3):
            bad = 0 if call == 1 else 1
            key, type_name, _ = BAD_INFOS[TERMINATE_LOCK_INFO if call == 1 else GENERATOR_INFO]
            message = rf"env {bad}: info\['{key}'\] is a {type_name} "
            with pytest.raises(vecenv.UncopyableInfoError, match=message) as error:
                venv.step(actions(*step_actions))
            assert isinstance(error.value, TypeError)
            assert error.value.entries == [(bad, key, type_name)]
            continue
        obs, rewards, dones, infos = venv.step(actions(*step_actions))
        for i in range(2):
            terminal = infos[i].get("terminal_observation")
            delivered[i].append((obs[i], float(rewards[i]), bool(dones[i]), terminal))
            if dones[i]:
                monitored.append((i, float(infos[i]["episode"]["r"]), int(infos[i]["episode"]["l"])))
        if call == 2:  # the step kept from call 1
            assert "handle" not in infos[0] and infos[0]["vecenv.uncopyable_info"] == {"handle": "_thread.lock"}
            assert infos[0]["last_t"] == 2
        elif call == 4:
            assert "progress" not in infos[1] and infos[1]["vecenv.uncopyable_info"] == {"progress": "generator"}
        else:
            assert all("vecenv.uncopyable_info" not in info for info in infos)
    expected_episodes, expected_steps_taken = [], []
    for i in range(2):
        expected, taken = hand_stepped(i, 5 + i, reached[i], mode)
        expected_steps_taken.append(taken)
        assert len(delivered[i]) == len(expected)
        for k, (got, want) in enumerate(zip(delivered[i], expected, strict=True)):
            np.testing.assert_array_equal(got[0], want[0], err_msg=f"env {i} step {k} obs")
            assert got[1:3] == want[1:3], (i, k)
            if want[3] is None:
                assert got[3] is None, (i, k)
            else:
                np.testing.assert_array_equal(got[3], want[3], err_msg=f"env {i} step {k} terminal_observation")
        expected_episodes += [(i, r, n) for r, n in episodes_of(expected)]
    assert sorted(monitored) == sorted(expected_episodes) and venv.episode_count == len(expected_episodes)
    assert expected_episodes  # env 0's episode with the lock is one of them
    assert steps_taken(venv) == expected_steps_taken


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", f"subproc-{DEFAULT_START_METHOD}", "subproc-split", "parent"])
def test_an_info_value_pickle_refuses_is_left_out_by_worker_processes_only(kind, built):
    """A value that deep-copies but does not pickle (env 1, in a worker process except with DummyVecEnv): a worker
    process cannot send it, so the step raises and the next one returns it without that value; DummyVecEnv
    returns the info as it is."""
    venv = build(kind, script_fns(2))
    built.append(venv)
    venv.reset()
    key, type_name, value_type = BAD_INFOS[TERMINATE_UNPICKLABLE_INFO]
    if kind != "dummy":
        with pytest.raises(vecenv.UncopyableInfoError, match=rf"env 1: info\['{key}'\] is a {type_name} ") as error:
            venv.step(actions(STEP, TERMINATE_UNPICKLABLE_INFO))
        assert error.value.entries == [(1, key, type_name)]
    obs, rewards, dones, infos = venv.step(actions(STEP, TERMINATE_UNPICKLABLE_INFO))
    np.testing.assert_array_equal(dones, [False, True])
    np.testing.assert_array_equal(rewards, [1.0, 1.0])
    np.testing.assert_array_equal(obs, [expected_obs(0, 0, 1), expected_obs(1, 1, 0)])
    np.testing.assert_array_equal(infos[1]["terminal_observation"], expected_obs(1, 0, 1))
    if kind == "dummy":
        assert isinstance(infos[1][key], value_type) and "vecenv.uncopyable_info" not in infos[1]
    else:
        assert key not in infos[1] and infos[1]["vecenv.uncopyable_info"] == {key: type_name}
    assert steps_taken(venv) == [1, 1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", f"subproc-{DEFAULT_START_METHOD}"])
def test_an_env_error_after_an_uncopyable_info_names_it_in_a_note(kind, built):
    """Env 0's info holds a lock and env 1 raises in the same call: env 1's own error rises, with a note naming the
    value left out of env 0's info; env 0's episode end is reported once by the next step."""
    venv = build(kind, script_fns(2))
    built.append(venv)
    venv.reset()
    with pytest.raises(ScriptFault, match="env 1 raised in step") as error:
        venv.step(actions(TERMINATE_LOCK_INFO, RAISE))
    assert "vecenv: raised by env 1 during step" in error.value.__notes__
    assert any("env 0: info['handle'] is a _thread.lock" in note for note in error.value.__notes__)
    obs, rewards, dones, infos = venv.step(actions(TERMINATE, STEP))
    np.testing.assert_array_equal(dones, [True, False])
    np.testing.assert_array_equal(rewards, [1.0, 1.0])
    np.testing.assert_array_equal(obs, [expected_obs(0, 1, 0), expected_obs(1, 0, 1)])
    assert infos[0]["vecenv.uncopyable_info"] == {"handle": "_thread.lock"}
    assert steps_taken(venv) == [1, 1]


# --- random failure scripts: every env reports each of its steps exactly once ------------------------------

FAILURE_SETTINGS = settings(
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SCRIPT_ACTIONS = st.sampled_from([STEP, STEP, STEP, TERMINATE, TRUNCATE, BOTH, RAISE, TERMINATE_BAD_RESET, *BAD_INFOS])


def _check_script(venv: vecenv.VecEnv, script: list[list[int]], resets: list[bool]) -> None:
    """Run ``script`` (one action per env per call; ``resets[k]`` resets everything before call k), then steps
    until no env holds a result, and check against what the env itself did (independent of vecenv):

    - every returned observation of an env continues its previous one: ``t + 1`` in the same episode, or
      ``(episode + 1, t = 0)`` exactly when ``done`` is reported (the terminal observation being ``t + 1``);
    - the number of steps an env reported equals the number of steps it took (``steps_taken``), less those
      held for the next step when the caller reset instead: none lost, none repeated.
    """
    n = venv.num_envs
    last = [expected_obs(i, 0, 0) for i in range(n)]
    obs = venv.reset()
    reported = [0] * n
    np.testing.assert_array_equal(obs, last)

    def absorb(obs: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        for i in range(n):
            episode, t = int(last[i][1]), int(last[i][2])
            reported[i] += 1
            if dones[i]:
                np.testing.assert_array_equal(infos[i]["terminal_observation"], expected_obs(i, episode, t + 1))
                np.testing.assert_array_equal(obs[i], expected_obs(i, episode + 1, 0))
            else:
                np.testing.assert_array_equal(obs[i], expected_obs(i, episode, t + 1))
            last[i] = obs[i].copy()

    for step_actions, reset in zip(script, resets, strict=True):
        if reset:  # what envs held for the next step is dropped: count it as reported
            reported = steps_taken(venv)
            obs = venv.reset()
            for i in range(n):
                assert obs[i][1] > last[i][1] and obs[i][2] == 0
                last[i] = obs[i].copy()
            continue
        try:
            obs, _, dones, infos = venv.step(np.array(step_actions))
        except (ScriptFault, KeyboardInterrupt, vecenv.UncopyableInfoError):
            continue
        absorb(obs, dones, infos)
    for _ in range(3):  # a step whose actions all succeed returns whatever was held, and then steps
        obs, _, dones, infos = venv.step(np.zeros(n, dtype=np.int64))
        absorb(obs, dones, infos)
    taken = steps_taken(venv)
    assert reported == taken, (reported, taken)


@settings(FAILURE_SETTINGS, max_examples=60)
@given(data=st.data())
@pytest.mark.parametrize("kind", ["dummy", "subproc-split", f"subproc-{DEFAULT_START_METHOD}", "parent"])
def test_random_failures_never_lose_or_repeat_a_step(kind, data, built):
    """Random scripts of steps, episode ends, env errors, failed automatic resets, infos that cannot be copied and
    resets."""
    n = data.draw(st.integers(2 if kind == "parent" else 1, 3), label="num_envs")
    length = data.draw(st.integers(1, 12), label="calls")
    # an env raising KeyboardInterrupt in a worker process ends it: interrupts are drawn where envs run here
    drawn = st.one_of(SCRIPT_ACTIONS, st.just(INTERRUPT)) if kind == "dummy" else SCRIPT_ACTIONS
    script = data.draw(st.lists(st.lists(drawn, min_size=n, max_size=n), min_size=length, max_size=length))
    resets = [data.draw(st.integers(0, 9), label="reset?") == 0 for _ in range(length)]
    venv = build(kind, script_fns(n))
    try:
        _check_script(venv, script, resets)
    finally:
        venv.close()


# --- 6. a worker that dies beside a busy one -------------------------------------------------------------------


def _dead_beside_busy_fns(dying: int, fault: str, busy: dict[str, Any]) -> list[Callable[[], gym.Env]]:
    """Four envs in two workers ([0, 1] and [2, 3]): env ``2 * dying`` ends its worker with ``fault`` in the
    second step (a moment after the step began); env ``2 * (1 - dying)`` does ``busy`` in that step."""
    fns = [functools.partial(make_fault_env, i) for i in range(4)]
    fns[2 * dying] = functools.partial(make_fault_env, 2 * dying, where="step", fault=fault, at=2, delay=0.3)
    fns[2 * (1 - dying)] = functools.partial(make_fault_env, 2 * (1 - dying), **busy)
    return fns


def _assert_all_ended(venv: vecenv.SubprocVecEnv) -> None:
    processes = list(venv.processes)
    venv.close()
    assert all(not process.is_alive() and process.exitcode is not None for process in processes)


@pytest.mark.timeout(60)  # the busy env hangs forever: waiting for its reply first would time the test out
@pytest.mark.parametrize(
    ("start_method", "fault", "dying"),
    [
        *((method, "sigkill", dying) for method in START_METHODS for dying in (0, 1)),
        (DEFAULT_START_METHOD, "exit", 0),
        ("fork", "segfault", 1),
    ],
)
def test_a_worker_that_dies_beside_a_hung_one_raises_at_once(start_method, fault, dying, built, monkeypatch):
    if start_method not in START_METHODS:
        pytest.skip(f"start method {start_method} is not available")
    # the hung worker never answers close(): a short close deadline before it is terminated (the deadline itself
    # is tested in test_faults.py; the default, 5 s, is waited for by the hang case of test_program_shutdown)
    monkeypatch.setattr(vecenv.workers.base, "CLOSE_TIMEOUT", 0.5)
    fns = _dead_beside_busy_fns(dying, fault, {"where": "step", "fault": "hang", "at": 2})
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, start_method=start_method)
    built.append(venv)
    venv.reset()
    venv.step(np.zeros(4, dtype=np.int64))
    dead_envs = [2 * dying, 2 * dying + 1]
    with pytest.raises(WorkerDiedError, match=rf"running envs \{dead_envs}"):
        venv.step(np.zeros(4, dtype=np.int64))
    assert venv.processes[dying].exitcode is not None  # the other worker is still inside its step
    assert venv.processes[1 - dying].is_alive()
    _assert_all_ended(venv)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dying", [0, 1])
def test_a_worker_that_dies_beside_a_slow_one_is_restarted_and_the_step_completes(dying, built):
    fns = _dead_beside_busy_fns(dying, "sigkill", {"slow_step": 2, "slow_sleep": 1.0})
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, max_restarts=1, start_method=DEFAULT_START_METHOD)
    built.append(venv)
    venv.reset()
    venv.step(np.ones(4, dtype=np.int64))
    with pytest.warns(RuntimeWarning, match=rf"restarting the worker of envs \[{2 * dying}, {2 * dying + 1}\]"):
        obs, rewards, dones, infos = venv.step(np.ones(4, dtype=np.int64))
    dead, alive = [2 * dying, 2 * dying + 1], [2 * (1 - dying), 2 * (1 - dying) + 1]
    np.testing.assert_array_equal(dones[dead], [True, True])
    assert all(infos[i]["vecenv.restarted"] for i in dead)
    np.testing.assert_array_equal(obs[dead], [[i, 0, 0] for i in dead])  # new envs, first episode
    np.testing.assert_array_equal(dones[alive], [False, False])
    np.testing.assert_array_equal(obs[alive], [[i, 0, 2] for i in alive])
    np.testing.assert_array_equal(rewards[alive], [3.0, 3.0])  # action 1 + t 2
    _assert_all_ended(venv)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dying", [0, 1])
def test_gymnasium_async_vector_env_raises_for_a_worker_dead_beside_a_hung_one(dying):
    fns = _dead_beside_busy_fns(dying, "sigkill", {"where": "step", "fault": "hang", "at": 2})
    envs = vgym.AsyncVectorEnv(fns, n_workers=2, context=DEFAULT_START_METHOD)
    processes = list(envs.processes)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(4, dtype=np.int64))
        with pytest.raises(WorkerDiedError, match=rf"running envs \[{2 * dying}, {2 * dying + 1}\]"):
            envs.step(np.zeros(4, dtype=np.int64))
    finally:
        envs.close(terminate=True)
    assert all(not process.is_alive() for process in processes)


REFUSED_RESET_LAYOUTS = {
    "dummy": lambda fns, mode: vecenv.DummyVecEnv(fns, autoreset_mode=mode),
    "subproc": lambda fns, mode: vecenv.SubprocVecEnv(fns, n_workers=1, autoreset_mode=mode),
}


def _step_or_error(venv: Any) -> Any:
    try:
        obs, rewards, dones, _ = venv.step(np.zeros(1, dtype=np.int64))
    except ValueError as exc:
        assert "does not fit observation_space" in str(exc)
        return "refused"
    return float(obs[0, 0]), float(rewards[0]), bool(dones[0])


@pytest.mark.parametrize("layout", sorted(REFUSED_RESET_LAYOUTS))
@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP], ids=["same-step", "next-step"])
def test_a_refused_first_observation_of_an_automatic_reset_is_a_failed_reset(layout: str, mode: AutoresetMode) -> None:
    """The automatic reset after an episode end returns an observation that does not fit the space: the step
    raises, and that reset counts as failed, as one that raises does (docs/reliability.md): in SAME_STEP mode the
    next step resets the env again and reports the episode end (its reward, done, its terminal observation); in
    NEXT_STEP mode the next step is the reset again, which returns the first observation."""
    venv = REFUSED_RESET_LAYOUTS[layout]([functools.partial(RefusedResetObsEnv, bad_reset=2)], mode)
    try:
        venv.reset()
        results = [_step_or_error(venv) for _ in range(5)]
        if mode is AutoresetMode.SAME_STEP:
            # t=1; t=2 ends the episode, its reset is refused; the next step resets again and reports the end
            assert results[:4] == [(1.0, 1.0, False), "refused", (0.0, 2.0, True), (1.0, 1.0, False)]
            assert results[4] == (0.0, 2.0, True)
        else:
            # t=1; t=2 ends the episode (its last observation); the reset step is refused, then done again
            assert results == [(1.0, 1.0, False), (2.0, 2.0, True), "refused", (0.0, 0.0, False), (1.0, 1.0, False)]
    finally:
        venv.close()

"""step_timeout / reset_timeout and opt-in worker restarts (max_restarts) of SubprocVecEnv.

Expectations: CounterEnv's documented observations ``[offset, episode, t, noise]``; a restarted worker's envs
start a fresh episode (episode 0, t 0) built from their factories.
"""

from __future__ import annotations

import functools
import os
import signal

import numpy as np
import pytest

import vecenv
from tests.envs import CounterEnv, FaultEnv
from vecenv.errors import WorkerDiedError


def counter_fns(n: int, **kwargs) -> list:
    return [functools.partial(CounterEnv, offset=i, episode_len=50, **kwargs) for i in range(n)]


@pytest.mark.timeout(60)
def test_step_timeout_kills_the_worker_and_names_the_envs():
    fns = [functools.partial(FaultEnv, fail_in="hang", after=2, offset=i) for i in range(3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, step_timeout=1.0)
    try:
        venv.reset()
        venv.step(np.zeros(3, dtype=np.int64))
        pids = [p.pid for p in venv.processes]
        with pytest.raises(TimeoutError, match=r"envs \[0, 1\] did not finish step within 1.0 s") as info:
            venv.step(np.zeros(3, dtype=np.int64))
        assert "was killed" in str(info.value) and "max_restarts" in str(info.value)
        assert not os.path.exists(f"/proc/{pids[0]}") or venv.processes[0].exitcode == -signal.SIGKILL
    finally:
        venv.close()
    assert all(not p.is_alive() for p in venv.processes)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_restart_after_death_reports_a_truncated_episode(how):
    """Worker 1 (envs 2, 3) dies; with max_restarts=1 its envs come back in a fresh episode with dones=True,
    TimeLimit.truncated=True and vecenv.restarted=True, rewards 0, and a RuntimeWarning names the cause; the
    other worker's envs are untouched. The second death is over the budget and raises."""
    fns = counter_fns(2)
    fns += [functools.partial(FaultEnv, fail_in="exit" if how == "exit" else None, after=2, offset=i) for i in (2, 3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, max_restarts=1)
    try:
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        old_pid = venv.processes[1].pid
        if how == "sigkill":
            os.kill(old_pid, signal.SIGKILL)
        with pytest.warns(
            RuntimeWarning, match=r"restarting the worker of envs \[2, 3\] \(restart 1 of max_restarts=1\)"
        ):
            obs, rewards, dones, infos = venv.step(np.ones(4, dtype=np.int64))
        assert venv.restarts == 1 and venv.processes[1].pid != old_pid
        assert dones.tolist() == [False, False, True, True]
        assert rewards[2:].tolist() == [0.0, 0.0]
        assert obs[:, 1:3].tolist() == [[0, 2], [0, 2], [0, 0], [0, 0]]  # fresh episode 0 for envs 2, 3
        for info in infos[2:]:
            assert info["TimeLimit.truncated"] is True and info["vecenv.restarted"] is True
            assert ("WorkerDiedError" in info["vecenv.restart_cause"]) and "terminal_observation" not in info
        assert "vecenv.restarted" not in infos[0]
        obs, _, dones, _ = venv.step(np.zeros(4, dtype=np.int64))
        assert obs[:, 2].tolist() == [3, 3, 1, 1] and not dones.any()
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"envs \[2, 3\] was killed by SIGKILL"):
            venv.step(np.zeros(4, dtype=np.int64))
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_restart_after_timeout_and_at_reset():
    fns = [functools.partial(FaultEnv, fail_in="hang", after=2, offset=i) for i in range(2)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, step_timeout=1.0, max_restarts=3)
    try:
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
        with pytest.warns(RuntimeWarning, match="TimeoutError"):
            obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert dones.tolist() == [True, True] and venv.restarts == 2
        assert obs[:, 1:3].tolist() == [[0, 0], [0, 0]]
        assert all(info["vecenv.restarted"] for info in infos)
        os.kill(venv.processes[0].pid, signal.SIGKILL)
        venv.processes[0].join(5)
        with pytest.warns(RuntimeWarning, match="WorkerDiedError"):
            obs = venv.reset()  # the dead worker is restarted by the reset
        assert venv.restarts == 3 and obs[:, 2].tolist() == [0, 0]
    finally:
        venv.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_timeout": 0}, "step_timeout must be a positive number of seconds or None, got 0"),
        ({"reset_timeout": "1"}, "reset_timeout must be a positive number"),
        ({"max_restarts": -1}, "max_restarts must be a non-negative integer, got -1"),
    ],
)
def test_bad_reliability_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        vecenv.SubprocVecEnv(counter_fns(1), **kwargs)

"""step_timeout / reset_timeout and opt-in worker restarts (max_restarts) of SubprocVecEnv.

Expectations: CounterEnv's documented observations ``[offset, episode, t, noise]``; a restarted worker's envs
start a fresh episode (episode 0, t 0) built from their factories.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import vecenv
from tests.envs import CounterEnv, FaultEnv
from tests.envs_failure import SLOW, STEP, expected_obs, make
from tests.envs_faults import InjectedFault, make_env, make_env_when_flagged
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
@pytest.mark.parametrize("call", ["step", "get_attr", "send-recv"])
def test_the_restart_warning_names_the_programs_line(call):
    """The restart's RuntimeWarning is attributed to the program's line that made the call (its file and line in
    the warning), however deep in vecenv the restart happened."""
    venv = vecenv.SubprocVecEnv(counter_fns(2), n_workers=2, max_restarts=1, start_method="fork")
    try:
        venv.reset()
        _kill_all(venv, [1])
        with pytest.warns(RuntimeWarning, match="restarting the worker") as caught:
            if call == "step":
                line = sys._getframe().f_lineno + 1
                venv.step(np.zeros(2, dtype=np.int64))
            elif call == "get_attr":
                line = sys._getframe().f_lineno + 1
                venv.get_attr("offset")
            else:
                venv.send(np.zeros(1, dtype=np.int64), [0])
                line = sys._getframe().f_lineno + 1
                venv.send(np.zeros(1, dtype=np.int64), [1])
        assert [(w.filename, w.lineno) for w in caught.list] == [(__file__, line)]
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_max_restarts_set_after_construction_restarts_a_dead_worker():
    """``max_restarts`` is a public attribute that the errors name: set after construction, a dead worker is
    restarted all the same (the shared block stays open for it); its envs start a fresh episode."""
    venv = vecenv.SubprocVecEnv(counter_fns(2), n_workers=2)
    try:
        venv.max_restarts = 1
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        venv.processes[1].join(10)
        with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[1\]"):
            obs, _, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert venv.restarts == 1 and dones.tolist() == [False, True]
        assert obs[:, 1:3].tolist() == [[0, 2], [0, 0]]
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_a_restart_warning_raised_as_an_error_loses_nothing():
    """Where warnings are errors (``-W error``, pytest's ``filterwarnings = error``), the restart's
    RuntimeWarning raises from the step that restarted the worker: the restart is done and counted once, and the
    next step returns what that step did (the other worker's envs' step, the restart report) without stepping
    them again."""
    venv = vecenv.SubprocVecEnv(counter_fns(2), n_workers=2, max_restarts=3)
    try:
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        venv.processes[1].join(10)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(RuntimeWarning, match=r"restarting the worker of envs \[1\] \(restart 1 of"):
                venv.step(np.zeros(2, dtype=np.int64))
            obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
            assert venv.restarts == 1 and dones.tolist() == [False, True] and infos[1]["vecenv.restarted"]
            assert obs[:, 1:3].tolist() == [[0, 2], [0, 0]]  # env 0's second step, env 1's fresh episode
            obs, _, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs[:, 1:3].tolist() == [[0, 3], [0, 1]] and not dones.any()
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_a_restart_warning_raised_as_an_error_by_recv_loses_no_env():
    """Partial batches where warnings are errors: ``recv()`` restarts a worker that died while its env stepped and
    raises the restart's warning; a later ``recv()`` returns that env's restart report, so a send / recv loop
    keeps every env."""
    fns = [functools.partial(FaultEnv, offset=0), functools.partial(FaultEnv, fail_in="exit", after=2, offset=1)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, max_restarts=3, batch_size=1)
    try:
        venv.reset()
        restarted = warned = 0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            venv.send(np.zeros(2, dtype=np.int64), [0, 1])
            for _ in range(200):  # env 1's worker exits in its second step
                if restarted:
                    break
                try:
                    _, _, _, infos, env_ids = venv.recv()
                except RuntimeWarning:
                    warned += 1
                    continue
                restarted += sum(bool(info.get("vecenv.restarted")) for info in infos)
                venv.send(np.zeros(len(env_ids), dtype=np.int64), env_ids.tolist())
        assert (warned, restarted, venv.restarts) == (1, 1, 1)
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["reset", "async_reset"])
def test_a_reset_that_meets_a_dead_worker_returns_first_observations(how):
    """A reset (or ``async_reset``) whose request meets a dead worker: the restart is that reset; the envs of the
    restarted worker come back like the others, with first observations, rewards 0 and dones False, and the
    next step steps them from there."""
    venv = vecenv.SubprocVecEnv(counter_fns(2), n_workers=2, max_restarts=1)
    try:
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
        _kill_all(venv, [1])
        with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[1\]"):
            if how == "reset":
                obs = venv.reset()
            else:
                venv.async_reset()
                obs, rewards, dones, _, env_ids = venv.recv()
                assert env_ids.tolist() == [0, 1]
                assert rewards.tolist() == [0.0, 0.0] and dones.tolist() == [False, False]
        assert obs[:, 1:3].tolist() == [[1, 0], [0, 0]]  # env 0's second episode; env 1's first, in a new process
        obs, _, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs[:, 1:3].tolist() == [[1, 1], [0, 1]] and not dones.any()
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


# --- max_restarts is a total budget, counted at each restart -----------------------------------------------------


def _kill_all(venv: vecenv.SubprocVecEnv, workers: list[int]) -> None:
    for w in workers:
        os.kill(venv.processes[w].pid, signal.SIGKILL)
    for w in workers:
        venv.processes[w].join(5)


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited and been reaped (or is at most a zombie about to be)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


ZEROS3 = np.zeros(3, dtype=np.int64)

#: every kind of request that can meet dead workers: what it does once all three workers are dead
BUDGET_PATHS: dict[str, Callable[[vecenv.SubprocVecEnv], Any]] = {
    "step": lambda venv: venv.step(ZEROS3),
    "reset": lambda venv: venv.reset(),
    "seed-then-step": lambda venv: (venv.seed(3), venv.step(ZEROS3)),
    "get_attr": lambda venv: venv.get_attr("offset"),
    "set_attr": lambda venv: venv.set_attr("slow", 0.0),
    "env_method": lambda venv: venv.env_method("_obs"),
    "step_stats": lambda venv: venv.step_stats(),
    "async_reset": lambda venv: venv.async_reset(),
    "send": lambda venv: venv.send(ZEROS3, [0, 1, 2]),
    "recv": lambda venv: venv.recv(),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", list(BUDGET_PATHS))
def test_max_restarts_is_a_total_budget_on_every_path(path):
    """Three workers dead, max_restarts=1: whatever request meets them restarts one (the first), then raises the
    next one's WorkerDiedError; the vector env is left closable and no process outlives close()."""
    venv = vecenv.SubprocVecEnv([functools.partial(make, i, slow=60.0) for i in range(3)], n_workers=3, max_restarts=1)
    pids = [p.pid for p in venv.processes]
    try:
        venv.reset()
        if path == "recv":  # the workers die while their envs are in flight
            venv.send(np.full(3, SLOW, dtype=np.int64), [0, 1, 2])
        _kill_all(venv, [0, 1, 2])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(WorkerDiedError, match=r"running envs \[1\] was killed by SIGKILL"):
                BUDGET_PATHS[path](venv)
        restarts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(restarts) == 1 and "envs [0] (restart 1 of max_restarts=1)" in restarts[0], restarts
        assert venv.restarts == 1
        pids.append(venv.processes[0].pid)  # the restarted worker
        assert pids[-1] != pids[0]
    finally:
        venv.close()
    assert all(_gone(pid) for pid in pids)


@pytest.mark.timeout(60)
def test_budget_spent_in_a_step_keeps_the_other_results_for_the_next_step():
    """Workers 0, 1, 2 dead, worker 3 alive, max_restarts=1: the step restarts worker 0, then raises for worker
    1; env 0's restart report and env 3's step are held (the held-results rule), so once the budget allows,
    the next step returns them with the restarts of envs 1 and 2, and env 3 is not stepped twice."""
    venv = vecenv.SubprocVecEnv([functools.partial(make, i) for i in range(4)], n_workers=4, max_restarts=1)
    try:
        venv.reset()
        _kill_all(venv, [0, 1, 2])
        with (
            pytest.warns(RuntimeWarning, match=r"envs \[0\] \(restart 1 of max_restarts=1\)"),
            pytest.raises(WorkerDiedError, match=r"envs \[1\]"),
        ):
            venv.step(np.full(4, STEP, dtype=np.int64))
        assert venv.restarts == 1
        with pytest.raises(WorkerDiedError, match=r"envs \[1\]"):  # still over the budget: nothing changed
            venv.step(np.full(4, STEP, dtype=np.int64))
        assert venv.restarts == 1
        venv.max_restarts = 3
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            obs, rewards, dones, infos = venv.step(np.full(4, STEP, dtype=np.int64))
        assert venv.restarts == 3
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 2, messages
        assert "envs [1] (restart 2 of max_restarts=3)" in messages[0]
        assert "envs [2] (restart 3 of max_restarts=3)" in messages[1]
        np.testing.assert_array_equal(dones, [True, True, True, False])
        np.testing.assert_array_equal(rewards, [0.0, 0.0, 0.0, 1.0])
        assert [bool(info.get("vecenv.restarted")) for info in infos] == [True, True, True, False]
        np.testing.assert_array_equal(obs, [expected_obs(i, 0, 0) for i in range(3)] + [expected_obs(3, 0, 1)])
        assert venv.get_attr("steps_taken") == [0, 0, 0, 1]  # env 3 stepped once in the two failed steps
        obs, _, dones, _ = venv.step(np.full(4, STEP, dtype=np.int64))
        assert not dones.any()
        np.testing.assert_array_equal(obs, [expected_obs(i, 0, 1) for i in range(3)] + [expected_obs(3, 0, 2)])
    finally:
        venv.close()


# --- partial batches honour the timeouts; a restart that fails leaves the worker dead, never half built -------


def fault_fns(n: int, **fault_kwargs: Any) -> list[Callable[[], Any]]:
    """Env 0 with the fault, envs 1..n-1 plain (tests.envs_faults: observation ``[offset, episode, t]``)."""
    return [functools.partial(make_env, i, **(fault_kwargs if i == 0 else {})) for i in range(n)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("max_restarts", [0, 1])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_partial_batch_step_timeout(batch_size: int, max_restarts: int) -> None:
    """send() to an env that hangs, step_timeout=1: recv() returns the other envs' results, and the hung env's
    recv() raises TimeoutError (or, with a restart, reports the restart) after about 1 s instead of waiting."""
    venv = vecenv.SubprocVecEnv(
        fault_fns(3, where="step", fault="hang"),
        n_workers=3,
        batch_size=batch_size,
        step_timeout=1.0,
        max_restarts=max_restarts,
    )
    try:
        venv.async_reset()
        got: list[int] = []
        while len(got) < 3:
            got += venv.recv()[4].tolist()
        venv.send(np.zeros(3, dtype=np.int64), [0, 1, 2])
        returned: list[int] = []
        outcomes = []
        while len(returned) < 3:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    obs, _, dones, infos, env_ids = venv.recv()
            except TimeoutError as exc:
                assert max_restarts == 0 and "envs [0] did not finish step within 1.0 s" in str(exc)
                outcomes.append("timeout")
                returned.append(0)
                continue
            for k, env_id in enumerate(env_ids.tolist()):
                returned.append(env_id)
                if env_id == 0:
                    assert max_restarts == 1 and dones[k] and infos[k]["vecenv.restarted"] is True
                    assert "TimeoutError" in infos[k]["vecenv.restart_cause"]
                    assert obs[k].tolist() == [0, 0, 0] and any("restarting" in str(w.message) for w in caught)
                    outcomes.append("restarted")
                else:
                    assert obs[k].tolist() == [env_id, 0, 1] and not dones[k]
        assert sorted(returned) == [0, 1, 2]
        assert outcomes == ["restarted" if max_restarts else "timeout"]
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_partial_batch_reset_timeout() -> None:
    """async_reset() with an env whose second reset hangs, reset_timeout=1: recv() raises TimeoutError."""
    venv = vecenv.SubprocVecEnv(fault_fns(2, where="reset", fault="hang", at=2), n_workers=2, reset_timeout=1.0)
    try:
        venv.reset()
        venv.async_reset()
        with pytest.raises(TimeoutError, match=r"envs \[0\] did not finish reset within 1.0 s"):
            while True:
                venv.recv()
    finally:
        venv.close()


@contextlib.contextmanager
def _worker_1_killed(
    tmp_path: Any, fault: dict[str, Any], steps: int = 0, **venv_kwargs: Any
) -> Iterator[tuple[vecenv.SubprocVecEnv, str]]:
    """Two envs in two workers, env 1 meeting ``fault`` (tests.envs_faults) once the returned flag file exists:
    reset, ``steps`` steps, then the flag is made and worker 1 killed, so that its restart meets the fault.
    Yields ``(venv, flag)``; the vector env is closed at the end."""
    flag = str(tmp_path / "flag")
    fns = [functools.partial(make_env, 0), functools.partial(make_env_when_flagged, flag, 1, **fault)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, **venv_kwargs)
    try:
        venv.reset()
        for _ in range(steps):
            venv.step(np.zeros(2, dtype=np.int64))
        open(flag, "w").close()
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        venv.processes[1].join(5)
        yield venv, flag
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_restart_whose_factory_hangs_is_bounded_by_reset_timeout(tmp_path: Any) -> None:
    hang = {"where": "factory", "fault": "hang"}
    with _worker_1_killed(tmp_path, hang, step_timeout=5.0, reset_timeout=1.0, max_restarts=1) as (venv, _):
        with pytest.warns(RuntimeWarning, match="restarting"), pytest.raises(TimeoutError) as info:
            venv.step(np.zeros(2, dtype=np.int64))
        assert "envs [1] did not finish env construction within 1.0 s" in str(info.value)
        assert any("raised while restarting the worker of envs [1]" in note for note in info.value.__notes__)
        with pytest.raises(WorkerDiedError, match=r"did not finish within reset_timeout=1.0 s"):
            venv.step(np.zeros(2, dtype=np.int64))  # the budget is spent: the dead worker's error
    assert all(not p.is_alive() for p in venv.processes)


@pytest.mark.timeout(60)
def test_restart_whose_reset_raises_is_restarted_again_and_reported(tmp_path: Any) -> None:
    """The restarted env's first reset raises: the step raises it (noted as a restart's), and the next step
    restarts the worker again and reports the cut episode; the env that was built and never reset is not used."""
    with _worker_1_killed(tmp_path, {"where": "reset", "fault": "raise"}, steps=1, max_restarts=3) as (venv, flag):
        with pytest.warns(RuntimeWarning, match="restart 1 of"), pytest.raises(InjectedFault) as info:
            venv.step(np.zeros(2, dtype=np.int64))
        assert any("raised while restarting the worker of envs [1]" in note for note in info.value.__notes__)
        os.unlink(flag)
        with pytest.warns(RuntimeWarning, match="restart 2 of"):
            obs, rewards, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.tolist() == [[0, 0, 2], [1, 0, 0]]  # env 0's held step; env 1 in the new worker's first episode
        assert dones.tolist() == [False, True] and rewards[1] == 0.0
        assert infos[1]["vecenv.restarted"] is True
        assert "failed during its reset" in infos[1]["vecenv.restart_cause"]
        obs, _, dones, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.tolist() == [[0, 0, 3], [1, 0, 1]] and not dones.any()


@pytest.mark.timeout(60)
def test_restart_whose_factory_raises_is_named_by_later_errors(tmp_path: Any) -> None:
    with _worker_1_killed(tmp_path, {"where": "factory", "fault": "raise"}, max_restarts=1) as (venv, _):
        with pytest.warns(RuntimeWarning, match="restarting"), pytest.raises(InjectedFault):
            venv.step(np.zeros(2, dtype=np.int64))
        for _ in range(2):
            with pytest.raises(WorkerDiedError) as info:
                venv.step(np.zeros(2, dtype=np.int64))
            message = str(info.value)
            assert "started to replace a dead one, failed during its env construction" in message
            assert "InjectedFault: injected fault in factory of env offset 1" in message


@pytest.mark.timeout(60)
def test_ctrl_c_during_a_restart_leaves_the_worker_dead_not_half_built(tmp_path: Any) -> None:
    """Ctrl-C while a restarted worker builds its envs: the step raises KeyboardInterrupt; the next step restarts
    the worker again (the budget allows) and reports it; env 0's result of the interrupted step is not lost."""
    with _worker_1_killed(tmp_path, {"where": "factory", "fault": "hang"}, steps=1, max_restarts=3) as (venv, flag):
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                with pytest.raises(KeyboardInterrupt):
                    venv.step(np.zeros(2, dtype=np.int64))
        finally:
            timer.join()
        os.unlink(flag)
        with pytest.warns(RuntimeWarning, match="restart 2 of"):
            obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.tolist() == [[0, 0, 2], [1, 0, 0]] and dones.tolist() == [False, True]
        assert "KeyboardInterrupt" in infos[1]["vecenv.restart_cause"]
        obs, _, _, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.tolist() == [[0, 0, 3], [1, 0, 1]]
    assert all(not p.is_alive() for p in venv.processes)

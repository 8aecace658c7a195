"""``SubprocVecEnv(parent_envs=k)``: the calling process steps envs ``0..k-1`` itself, workers the rest.

Parity with DummyVecEnv over long rollouts is in test_workers.py (``PARITY``); here the references are
DummyVecEnv on the same factories, seeds and actions, the process each env reports (``PidEnv``), and
CounterEnv's documented observations ``[offset, episode, t, noise]``.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import signal

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import vecenv
from tests.envs import CounterEnv, EnvFaultError, FaultEnv, ShapeEnv
from tests.envs_perf import PidEnv, assert_same
from tests.test_workers import new_vecenv_workers
from vecenv.errors import WorkerDiedError
from vecenv.workers import InProcessWorker


@pytest.mark.parametrize(("n_workers", "parent_envs", "groups"), [(1, 2, [[2, 3, 4]]), (2, 1, [[1, 2], [3, 4]])])
def test_envs_live_where_asked(n_workers, parent_envs, groups):
    """Envs 0..parent_envs-1 report this process; the others the worker process of their contiguous group."""
    venv = vecenv.SubprocVecEnv(
        [functools.partial(PidEnv, offset=i) for i in range(5)], n_workers=n_workers, parent_envs=parent_envs
    )
    try:
        pids = venv.get_attr("pid")
        assert pids[:parent_envs] == [os.getpid()] * parent_envs
        assert len(venv.processes) == len(venv.remotes) == n_workers
        assert [[pids[i] for i in group] for group in groups] == [
            [p.pid] * len(g) for p, g in zip(venv.processes, groups, strict=True)
        ]
        assert os.getpid() not in pids[parent_envs:]
    finally:
        venv.close()
    assert all(not p.is_alive() for p in venv.processes)


@pytest.mark.parametrize("num_envs", [2, 8])
def test_default_n_workers_leaves_a_core_to_the_parent(num_envs):
    """n_workers=None with parent_envs: one worker per CPU minus one (at least one, at most the envs left)."""
    from vecenv.workers.spin import usable_cores

    cpus = usable_cores()
    venv = vecenv.SubprocVecEnv([functools.partial(PidEnv, offset=i) for i in range(num_envs)], parent_envs=1)
    try:
        expected = min(max(1, cpus - 1), num_envs - 1)
        assert venv.n_workers == len(venv.processes) == expected
        assert len(set(venv.get_attr("pid")[1:])) == expected
    finally:
        venv.close()


@pytest.mark.parametrize("parent_envs", [-1, 3, 4, 1.5, True, "1", None])
def test_parent_envs_invalid(parent_envs):
    """Outside 0..num_envs-1, not an integer, or a bool: ValueError naming the argument and the range, before any
    env is built or worker started."""
    before = {p.pid for p in mp.active_children()}
    built: list[int] = []

    def factory(i: int) -> CounterEnv:
        built.append(i)
        return CounterEnv(offset=i)

    with pytest.raises(ValueError, match=r"parent_envs must be an integer in 0\.\.2 .*got " + repr(parent_envs)):
        vecenv.SubprocVecEnv([functools.partial(factory, i) for i in range(3)], parent_envs=parent_envs)
    assert built == [] and new_vecenv_workers(before) == []


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_autoreset_modes_match_dummy(mode):
    """Every autoreset mode: the same outputs as DummyVecEnv (DISABLED: finished envs reset by the caller)."""
    ends = ("terminate", "truncate")
    fns = [functools.partial(CounterEnv, offset=i, episode_len=2, end=ends[i % 2]) for i in range(4)]
    dummy = vecenv.DummyVecEnv(fns, autoreset_mode=mode)
    subproc = vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2, autoreset_mode=mode)
    try:
        assert subproc.autoreset_mode is mode
        for venv in (dummy, subproc):
            venv.seed(3)
        assert_same(subproc.reset(), dummy.reset())
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(12):
            actions = rng.integers(0, 3, size=4)
            expected, got = dummy.step(actions), subproc.step(actions)
            assert_same(list(got), list(expected))
            assert_same(subproc.reset_infos, dummy.reset_infos)
            ends += int(expected[2].sum())
            if mode is AutoresetMode.DISABLED and expected[2].any():
                for venv in (dummy, subproc):
                    venv.reset()
        assert ends >= 4
    finally:
        dummy.close()
        subproc.close()


@pytest.mark.parametrize("env_index", [0, 2])
def test_env_error_names_the_env_on_either_side(env_index):
    """An env raising in step: its own exception type, a note naming the env index (parent or worker side);
    the other envs are still usable after a reset."""
    fns = [functools.partial(FaultEnv, fail_in="step" if i == env_index else None, after=2, offset=i) for i in range(3)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2)
    try:
        venv.reset()
        venv.step(np.zeros(3, dtype=np.int64))
        with pytest.raises(EnvFaultError, match="custom fault in step") as info:
            venv.step(np.zeros(3, dtype=np.int64))
        assert f"vecenv: raised by env {env_index} during step" in getattr(info.value, "__notes__", [])
        assert not venv.waiting
        obs = venv.reset()
        assert obs[:, 0].tolist() == [0, 1, 2] and obs[:, 2].tolist() == [0, 0, 0]
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_worker_restart_leaves_the_parent_envs_alone():
    """The worker process (envs 2, 3) is killed; with max_restarts=1 its envs restart (truncated episode end),
    while the parent's envs 0, 1 continue their episodes untouched."""
    fns = [functools.partial(CounterEnv, offset=i, episode_len=50) for i in range(4)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2, max_restarts=1)
    try:
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        os.kill(venv.processes[0].pid, signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match=r"restarting the worker of envs \[2, 3\]"):
            obs, rewards, dones, infos = venv.step(np.ones(4, dtype=np.int64))
        assert dones.tolist() == [False, False, True, True]
        assert obs[:, 1:3].tolist() == [[0, 2], [0, 2], [0, 0], [0, 0]]
        assert rewards.tolist() == [1 + 0.5 * 2, 1 + 0.5 * 2, 0.0, 0.0]
        assert "vecenv.restarted" not in infos[0] and infos[2]["vecenv.restarted"] is True
        os.kill(venv.processes[0].pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"envs \[2, 3\]"):
            venv.step(np.zeros(4, dtype=np.int64))
    finally:
        venv.close()


def test_close_closes_the_parent_envs_and_the_workers():
    """close(): the parent's envs get close() (seen on the objects themselves), worker processes end."""
    venv = vecenv.SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(3)], n_workers=1, parent_envs=2)
    parent_worker = venv._workers[0]
    assert isinstance(parent_worker, InProcessWorker)
    parent_envs = parent_worker.group.envs
    processes = venv.processes
    venv.close()
    assert [env.unwrapped.close_calls for env in parent_envs] == [1, 1]
    assert all(not p.is_alive() for p in processes)


@pytest.mark.parametrize("where", ["parent", "worker"])
def test_construction_errors_name_the_env_and_leave_no_process(where):
    """A factory raising on either side: its exception with a note naming the env; spaces differing between the
    parent's envs and a worker's: ValueError naming the env and both spaces. No worker process is left."""
    before = {p.pid for p in mp.active_children()}
    bad = 0 if where == "parent" else 2
    fns = [functools.partial(FaultEnv, fail_in="init" if i == bad else None, offset=i) for i in range(3)]
    with pytest.raises(EnvFaultError, match="custom fault in init") as info:
        vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2)
    assert any(f"env {bad}" in note for note in getattr(info.value, "__notes__", []))
    fns = [functools.partial(ShapeEnv, size=2 if i < 2 else 3) for i in range(3)]
    with pytest.raises(ValueError, match=r"env 2 has observation_space .* while env 0 has"):
        vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2)
    for process in new_vecenv_workers(before):
        process.join(5)
    assert new_vecenv_workers(before) == []

"""The common step sent and collected in one loop each (:class:`vecenv.workers.common_step.CommonStep`).

Expectations: the same envs stepped one by one with SB3's rule (``tests/reference.py``: observations, rewards,
dones, infos with their terminal observations, reset infos), and the general path (each worker's ``recv``) on
the same script where a step fails. Whether the loops served a step is read from the calls to
``SubprocWorker.send`` and ``recv``, which they do not make.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from tests.envs import CounterEnv, EnvFaultError, FaultEnv
from tests.reference import ReferenceVecEnv, assert_infos_equal, assert_step_equal
from vecenv.workers.common_step import CommonStep
from vecenv.workers.subproc import SubprocWorker


class NoInfo(gym.Wrapper):
    """Its env's step and reset with empty infos: the replies that are one byte."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, _ = self.env.reset(**kwargs)
        return obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return obs, reward, terminated, truncated, {}


def _counter(offset: int, end: str, quiet: bool) -> gym.Env:
    env = CounterEnv(episode_len=3, end=end, offset=offset % 3)
    return NoInfo(env) if quiet else env


def _env_fns(n: int) -> list:
    """Envs that end by termination, truncation or both, some with infos and some without."""
    ends = ("terminate", "truncate", "both")
    return [functools.partial(_counter, i, ends[i % 3], i % 4 < 2) for i in range(n)]


@pytest.fixture
def general_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``"send"`` / ``"recv"`` for each ``SubprocWorker.send`` / ``recv`` call made in this test (the general
    path)."""
    calls: list[str] = []
    send, recv = SubprocWorker.send, SubprocWorker.recv

    def counted_send(self: SubprocWorker, command: Any, payload: Any) -> None:
        calls.append("send")
        send(self, command, payload)

    def counted_recv(self: SubprocWorker) -> Any:
        calls.append("recv")
        return recv(self)

    monkeypatch.setattr(SubprocWorker, "send", counted_send)
    monkeypatch.setattr(SubprocWorker, "recv", counted_recv)
    return calls


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wait_mode", ["block", "spin", "auto"])
def test_every_step_collected_in_one_loop_equals_each_env_stepped_by_hand(general_calls, wait_mode):
    n = 12
    reference = ReferenceVecEnv(_env_fns(n))
    venv = vecenv.SubprocVecEnv(_env_fns(n), n_workers=4, wait_mode=wait_mode)
    try:
        venv.seed(7)
        np.testing.assert_array_equal(venv.reset(), reference.reset(seed=7))
        assert_infos_equal(venv.reset_infos, reference.reset_infos)
        rng = np.random.default_rng(0)
        for _ in range(20):
            actions = rng.integers(0, 3, n)
            del general_calls[:]
            assert_step_equal(venv, reference, actions)  # (SB3's rule, each env stepped by hand)
            assert general_calls == []  # the loops sent and collected the step, spinning or blocking
        stats = venv.step_stats()
        assert stats.steps == 20 and stats.env_steps == 20 * n and stats.wait_seconds > 0.0
        if wait_mode == "spin":  # the calling process spun on the reply counters
            assert stats.spin_waits > 0 and stats.wait_mode == "spin"
    finally:
        venv.close()


def _run_with_a_failing_env(collect_in_one_loop: bool) -> list[Any]:
    """What a script sees when env 5 raises at its 3rd step: each step's outcome, then the steps after it."""
    fns = [functools.partial(CounterEnv, episode_len=4, offset=i) for i in range(8)]
    fns[5] = functools.partial(FaultEnv, fail_in="step", after=3, offset=5, episode_len=4)
    venv = vecenv.SubprocVecEnv(fns, n_workers=4, wait_mode="block")
    if not collect_in_one_loop:
        venv._common_step = None
    seen: list[Any] = []
    try:
        venv.seed(3)
        seen.append(venv.reset())
        for t in range(6):
            try:
                obs, rewards, dones, infos = venv.step(np.full(8, t % 3, dtype=np.int64))
            except EnvFaultError as exc:
                seen.append(("raised", str(exc).splitlines()[0]))
            else:
                seen.append((obs, rewards, dones, [sorted(info) for info in infos]))
    finally:
        venv.close()
    return seen


@pytest.mark.timeout(60)
def test_a_failed_step_read_by_the_loop_is_raised_as_by_the_general_path(monkeypatch):
    handed_back: list[bytes] = []
    hand_back = SubprocWorker.hand_back

    def spied(self: SubprocWorker, data: bytes) -> None:
        handed_back.append(data)
        hand_back(self, data)

    monkeypatch.setattr(SubprocWorker, "hand_back", spied)
    ours = _run_with_a_failing_env(collect_in_one_loop=True)
    assert len(handed_back) == 1  # the failed step's reply, read by the loop, decoded by recv
    general = _run_with_a_failing_env(collect_in_one_loop=False)
    assert len(handed_back) == 1
    assert [type(x) for x in ours] == [type(x) for x in general]
    raised = [x for x in ours if isinstance(x, tuple) and isinstance(x[0], str)]
    # (the env raises at every step from its 3rd; after the first, its results are held and the general path
    # collects: the loop read one failed reply)
    assert raised == [("raised", "custom fault in step")] * 4
    for mine, theirs in zip(ours, general, strict=True):
        if isinstance(mine, tuple) and isinstance(mine[0], str):
            assert mine == theirs
        elif isinstance(mine, tuple):
            for a, b in zip(mine[:3], theirs[:3], strict=True):
                np.testing.assert_array_equal(a, b)
            assert mine[3] == theirs[3]
        else:
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.timeout(60)
def test_a_restarted_worker_is_served_by_the_loops_again(general_calls):
    fns = [functools.partial(CounterEnv, episode_len=50, offset=i) for i in range(4)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, max_restarts=1, wait_mode="block")
    try:
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        venv.processes[1].join(timeout=10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _, _, dones, infos = venv.step(np.zeros(4, dtype=np.int64))
        assert dones.tolist() == [False, False, True, True] and infos[2]["vecenv.restarted"]
        del general_calls[:]
        obs, _, dones, _ = venv.step(np.zeros(4, dtype=np.int64))
        assert general_calls == []  # the new process's pipes and sentinel are the loops' now
        # worker 0's envs go on; worker 1's started a fresh episode at the restart: [offset, episode, t, noise]
        assert obs[:, :3].tolist() == [[0, 0, 3], [1, 0, 3], [2, 0, 1], [3, 0, 1]]
    finally:
        venv.close()


def test_a_restarted_worker_on_other_descriptors_is_polled_by_the_loops(general_calls, monkeypatch):
    """The restarted process's pipe and sentinel get descriptors other than the dead one's (pipes held open while
    it starts take those): the loops' poll set is rebuilt for them, and the dead worker's closed descriptors are
    not watched (poll would report them as invalid, which ends the loop)."""
    start = SubprocWorker._start_process

    def start_elsewhere(self: SubprocWorker) -> None:
        held = [os.pipe() for _ in range(4)]  # the lowest free descriptors: those the dead worker's pipes left
        try:
            start(self)
        finally:
            for fds in held:
                os.close(fds[0])
                os.close(fds[1])

    fns = [functools.partial(CounterEnv, episode_len=50, offset=i) for i in range(4)]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2, max_restarts=1, wait_mode="block")
    try:
        venv.reset()
        venv.step(np.zeros(4, dtype=np.int64))
        old = (venv._workers[1]._conn_fd, venv._workers[1]._sentinel)
        monkeypatch.setattr(SubprocWorker, "_start_process", start_elsewhere)
        os.kill(venv.processes[1].pid, signal.SIGKILL)
        venv.processes[1].join(timeout=10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            venv.step(np.zeros(4, dtype=np.int64))
        assert {venv._workers[1]._conn_fd, venv._workers[1]._sentinel}.isdisjoint(old)
        del general_calls[:]
        obs, _, _, _ = venv.step(np.zeros(4, dtype=np.int64))
        assert general_calls == []
        assert obs[:, :3].tolist() == [[0, 0, 3], [1, 0, 3], [2, 0, 1], [3, 0, 1]]
    finally:
        venv.close()


def test_the_loop_is_only_for_worker_processes():
    venv = vecenv.SubprocVecEnv(_env_fns(4), n_workers=2, parent_envs=1)
    try:
        assert venv._common_step is None  # in-process and process workers: each worker's recv
    finally:
        venv.close()
    venv = vecenv.SubprocVecEnv(_env_fns(4), n_workers=2)
    try:
        assert isinstance(venv._common_step, CommonStep)
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.skipif(sys.implementation.name != "cpython", reason="counts references as CPython does")
def test_each_steps_infos_are_fresh_dicts_the_caller_keeps_and_the_vec_env_lets_go_of():
    """The default infos are built while the workers step and the infos of two steps ago are freed then: every
    step still hands out new dicts, one per env, that later steps never touch, and the vec env keeps no
    reference to a step's infos once the step after next is sent."""
    n = 12
    reference = ReferenceVecEnv(_env_fns(n))
    venv = vecenv.SubprocVecEnv(_env_fns(n), n_workers=4, wait_mode="block")
    try:
        venv.seed(5)
        reference.reset(seed=5)
        venv.reset()
        kept: list[list[dict[str, Any]]] = []
        for t in range(8):
            actions = np.full(n, t % 3, dtype=np.int64)
            _, _, _, infos = venv.step(actions)
            _, _, _, expected = reference.step(actions)
            assert_infos_equal(infos, expected)  # (SB3's rule, each env stepped by hand)
            assert len({id(info) for info in infos}) == n  # one dict per env
            earlier = {id(info) for step in kept for info in step}
            assert not earlier & {id(info) for info in infos}  # none of them handed out before
            for info in infos:
                info["mine"] = t  # the caller's to change: nothing later sees it
            kept.append(infos)
            if t >= 2:  # the infos of two steps ago: held here and by sys.getrefcount's argument alone
                references = sys.getrefcount(kept[t - 2])  # (outside the assert, which pytest rewrites)
                assert references == 2
        for t, infos in enumerate(kept):
            assert [info["mine"] for info in infos] == [t] * n
            assert all("mine" not in info for info in venv.reset_infos)
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_the_default_infos_handed_out_are_those_built_once_the_requests_were_out():
    fns = [functools.partial(_counter, i, "terminate", quiet=True) for i in range(6)]  # one-byte replies
    venv = vecenv.SubprocVecEnv(fns, n_workers=3, wait_mode="block")
    try:
        venv.reset()
        for t in range(4):
            venv.step_async(np.full(6, t % 3, dtype=np.int64))
            prepared = [worker._fresh_infos for worker in venv._workers]  # (built after the last request)
            assert all(infos is not None and len(infos) == 2 for infos in prepared)
            _, _, dones, infos = venv.step_wait()
            assert [id(info) for info in infos] == [id(info) for part in prepared for info in part]
            assert all(worker._fresh_infos is None for worker in venv._workers)  # each list used once
            assert [sorted(info) for info in infos] == [
                ["TimeLimit.truncated", "terminal_observation"] if done else ["TimeLimit.truncated"] for done in dones
            ]
    finally:
        venv.close()

"""Ctrl-C never splits vecenv's bookkeeping (vecenv.interrupts): wherever a SIGINT lands inside a call, the
steps returned before and after the ``KeyboardInterrupt`` are each env's own steps, in order, none lost and none
repeated, as an env stepped by hand gives them.

The deterministic tests deliver SIGINT at the exact points where it used to break the protocol (as a request's
``write(2)`` returns, as a reply's ``read(2)`` returns, between ``step_async`` and ``step_wait``); the stress test
sends SIGINT at random times from another thread while a loop catches ``KeyboardInterrupt`` and steps on.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from tests.conftest import HAS_RAY, RAY_TEST_OPTIONS
from vecenv.interrupts import GUARD
from vecenv.workers import common_step, pipes, subproc

WAIT_MODES = ["block", "spin", "auto"]
NEEDS_RAY = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the ray extra)")


class TrackEnv(gym.Env):
    """Observation ``[episode, t]``, reward ``1000 * episode + t``; episode ``e`` of env ``index`` terminates
    after ``3 + (5 * index + 3 * e) % 7`` steps. Actions are ignored: the stream of steps is fixed."""

    observation_space = gym.spaces.Box(0, 1e6, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, index: int) -> None:
        self.index = index
        self.episode = -1
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        terminated = self.t >= 3 + (5 * self.index + 3 * self.episode) % 7
        return self._obs(), float(1000 * self.episode + self.t), terminated, False, {}


def track_fns(n: int) -> list[Callable[[], gym.Env]]:
    return [lambda i=i: TrackEnv(i) for i in range(n)]


class HandStepped:
    """The same envs stepped by hand, autoreset as SB3: what each returned step of the vector env must be."""

    def __init__(self, n: int) -> None:
        self.envs = [TrackEnv(i) for i in range(n)]
        self.first = self.reset()
        self.steps = 0

    def reset(self) -> np.ndarray:
        """Reset every env by hand (a new episode each); :return: the first observations."""
        return np.stack([env.reset()[0] for env in self.envs])

    def check(self, obs: np.ndarray, rewards: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        """Step every env by hand and compare with one step's results of the vector env."""
        for i, env in enumerate(self.envs):
            expected_obs, reward, terminated, truncated, _ = env.step(0)
            done = terminated or truncated
            assert rewards[i] == reward, (self.steps, i, rewards[i], reward)
            assert dones[i] == done, (self.steps, i, dones[i], done)
            if done:
                np.testing.assert_array_equal(infos[i]["terminal_observation"], expected_obs)
                expected_obs, _ = env.reset()
            else:
                assert "terminal_observation" not in infos[i]
            np.testing.assert_array_equal(obs[i], expected_obs, err_msg=f"step {self.steps}, env {i}")
        self.steps += 1


def subproc_venv(built: list[Any], n_envs: int, wait_mode: str) -> vecenv.SubprocVecEnv:
    venv = vecenv.SubprocVecEnv(track_fns(n_envs), n_workers=2, wait_mode=wait_mode)
    built.append(venv)
    return venv


class _SigintAt:
    """Stands in for the ``os`` module in :mod:`vecenv.workers.subproc`, :mod:`~vecenv.workers.pipes` and
    :mod:`~vecenv.workers.common_step` (see :func:`fake_os`): the ``call``-th call of ``name`` (write, read)
    delivers SIGINT to this process as it returns, as a Ctrl-C does when it arrives during that system call."""

    def __init__(self, name: str, call: int) -> None:
        self.name, self.call, self.calls, self.delivered = name, call, 0, False

    def __getattr__(self, attr: str) -> Any:
        real = getattr(os, attr)
        if attr != self.name:
            return real

        def wrapped(*args: Any) -> Any:
            result = real(*args)
            self.calls += 1
            if self.calls == self.call:
                self.delivered = True
                signal.raise_signal(signal.SIGINT)
            return result

        return wrapped


def fake_os(monkeypatch: Any, fake: _SigintAt) -> _SigintAt:
    """Put ``fake`` in place of ``os`` where the calling process writes requests and reads replies."""
    monkeypatch.setattr(subproc, "os", fake)
    monkeypatch.setattr(pipes, "os", fake)
    monkeypatch.setattr(common_step, "os", fake)
    return fake


def steps_until_interrupted(venv: Any, hand: HandStepped, n_steps: int) -> int:
    """Step ``n_steps`` times, checking each step against ``hand``, catching KeyboardInterrupt and stepping on
    (the documented loop); :return: how many calls raised it."""
    interrupted = done = 0
    where: list[tuple[int, list[str]]] = []
    while done < n_steps:
        try:
            result = venv.step(np.zeros(venv.num_envs, dtype=np.int64))
        except KeyboardInterrupt as exc:
            interrupted += 1
            where.append((done, traceback.format_tb(exc.__traceback__)[-3:]))
            continue
        try:
            hand.check(*result)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the last interrupts (step, where): {where[-3:]}") from None
        done += 1
    return interrupted


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wait_mode", WAIT_MODES)
@pytest.mark.parametrize("call", [1, 2])
def test_sigint_as_a_step_request_is_written(wait_mode: str, call: int, built: list[Any], monkeypatch) -> None:
    """SIGINT lands as the STEP request's write(2) returns (first or second worker): the request is recorded as
    in flight all the same, so no reply is orphaned: the steps stay each env's own, and reset() works after."""
    venv = subproc_venv(built, 4, wait_mode)
    hand = HandStepped(4)
    np.testing.assert_array_equal(venv.reset(), hand.first)
    steps_until_interrupted(venv, hand, 3)
    fake = fake_os(monkeypatch, _SigintAt("write", call))
    assert steps_until_interrupted(venv, hand, 20) == 1
    assert fake.delivered
    monkeypatch.undo()
    np.testing.assert_array_equal(venv.reset(), hand.reset())
    steps_until_interrupted(venv, hand, 10)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wait_mode", WAIT_MODES)
@pytest.mark.parametrize("call", [1, 2])
def test_sigint_as_a_step_reply_is_read(wait_mode: str, call: int, built: list[Any], monkeypatch) -> None:
    """SIGINT lands as a STEP reply's read(2) returns: the reply is not lost with the request still marked in
    flight (the next step used to wait forever): the step is returned now or by the next call, and nothing
    hangs."""
    venv = subproc_venv(built, 4, wait_mode)
    hand = HandStepped(4)
    venv.reset()
    steps_until_interrupted(venv, hand, 3)
    fake = fake_os(monkeypatch, _SigintAt("read", call))
    assert steps_until_interrupted(venv, hand, 20) == 1
    assert fake.delivered


class _SigintAfter:
    """Wraps a bound method: SIGINT is delivered as the ``call``-th call returns."""

    def __init__(self, method: Callable[..., Any], call: int = 1) -> None:
        self.method, self.call, self.calls = method, call, 0

    def __call__(self, *args: Any) -> Any:
        result = self.method(*args)
        self.calls += 1
        if self.calls == self.call:
            signal.raise_signal(signal.SIGINT)
        return result


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "subproc", "wrapped", pytest.param("ray", marks=NEEDS_RAY)])
def test_sigint_between_step_async_and_step_wait(kind: str, built: list[Any], request) -> None:
    """SIGINT lands as step() moves from step_async to step_wait: the next step() works (no
    AlreadyPendingCallError) and no step is lost or repeated."""
    if kind == "dummy":
        venv: Any = vecenv.DummyVecEnv(track_fns(3))
    elif kind == "ray":
        request.getfixturevalue("ray_session")
        venv = vecenv.RayVecEnv(track_fns(3), **RAY_TEST_OPTIONS)  # type: ignore[arg-type]
    else:
        venv = vecenv.SubprocVecEnv(track_fns(3), n_workers=2)
    built.append(venv)
    inner = venv
    if kind == "wrapped":  # a wrapper's step(): the window is between its own two halves
        venv = vecenv.VecMonitor(venv)
    hand = HandStepped(3)
    venv.reset()
    steps_until_interrupted(venv, hand, 2)
    if kind == "wrapped":  # the wrapper's step() (VecEnv.step, inside its section) as it moves to step_wait
        from vecenv import base

        between = _deliver_sigint_in(base, "step", "return self.step_wait()", lambda frame: GUARD.depth > 0)
        sys.settrace(between)
        try:
            assert steps_until_interrupted(venv, hand, 15) == 1
        finally:
            sys.settrace(None)
    else:  # vecenv's own step() calls the body of step_async
        venv._step_async = _SigintAfter(venv._step_async)
        assert steps_until_interrupted(venv, hand, 15) == 1
    assert not inner.waiting


def _deliver_sigint_in(
    module: Any, code_name: str, line_text: str, when: Callable[[FrameType], bool] = lambda frame: True
) -> Callable[..., Any]:
    """A trace function that calls the installed SIGINT handler with the frame of ``code_name`` (a function of
    vecenv's ``module``), once, as that frame reaches a line holding ``line_text`` where ``when(frame)``: what
    CPython does when a Ctrl-C lands on that line."""
    lines = Path(module.__file__).read_text().splitlines()
    targets = {number + 1 for number, text in enumerate(lines) if line_text in text}
    delivered: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno in targets and not delivered and when(frame):
            delivered.append(1)
            signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)  # type: ignore[operator]
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == module.__file__ and frame.f_code.co_name == code_name:
            return local
        return None

    return tracer


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "parent_envs"])
def test_sigint_in_the_bookkeeping_after_an_in_process_env_stepped(kind: str, built: list[Any]) -> None:
    """SIGINT lands in vecenv's own code right after an env of the calling process returned its step (as its
    observation row is written): that env has stepped, so the interrupt waits for the step's end, whose results
    the next step returns; no transition is lost or repeated. In the env's own code it is raised at once."""
    if kind == "dummy":
        venv: Any = vecenv.DummyVecEnv(track_fns(3))
    else:
        venv = vecenv.SubprocVecEnv(track_fns(4), n_workers=1, parent_envs=3)
    built.append(venv)
    hand = HandStepped(venv.num_envs)
    venv.reset()
    steps_until_interrupted(venv, hand, 2)
    from vecenv import env_group

    row_write = _deliver_sigint_in(env_group, "step", "rows[j][...] = obs", lambda frame: frame.f_locals.get("j") == 1)
    sys.settrace(row_write)  # (this thread's frames)
    try:
        with pytest.raises(KeyboardInterrupt):
            venv.step(np.zeros(venv.num_envs, dtype=np.int64))
    finally:
        sys.settrace(None)
    assert steps_until_interrupted(venv, hand, 10) == 0


@pytest.mark.timeout(60)
def test_sigint_in_a_wrappers_bookkeeping_is_raised_by_the_next_call(built: list[Any]) -> None:
    """SIGINT lands after the vector env returned a step to a wrapper, inside the wrapper's step_wait: raising it
    there would drop a finished step, so it is raised by the next call, before that call does anything."""
    from vecenv.wrappers import vec_monitor

    venv = vecenv.DummyVecEnv(track_fns(2))
    built.append(venv)
    wrapped = vecenv.VecMonitor(venv)
    hand = HandStepped(2)
    wrapped.reset()
    hand.check(*wrapped.step(np.zeros(2, dtype=np.int64)))
    # SIGINT lands on the line after VecMonitor.step_wait's call of the vector env's step_wait
    sys.settrace(_deliver_sigint_in(vec_monitor, "step_wait", "if self._next_step:"))
    try:
        hand.check(*wrapped.step(np.zeros(2, dtype=np.int64)))  # SIGINT arrives in here, after the envs stepped
    finally:
        sys.settrace(None)
    with pytest.raises(KeyboardInterrupt):
        wrapped.step(np.zeros(2, dtype=np.int64))
    assert steps_until_interrupted(wrapped, hand, 10) == 0


@pytest.mark.timeout(60)
def test_sigint_in_get_attr_and_reset_is_raised_as_they_return(built: list[Any], monkeypatch) -> None:
    """In a call that returns no step (get_attr, reset), a deferred interrupt is raised as the call ends; the
    vector env is idle and consistent after it."""
    venv = subproc_venv(built, 4, "block")
    venv.reset()
    fake_os(monkeypatch, _SigintAt("write", 1))
    with pytest.raises(KeyboardInterrupt):
        venv.get_attr("index")
    monkeypatch.undo()
    assert venv.get_attr("index") == [0, 1, 2, 3]
    hand = HandStepped(4)
    np.testing.assert_array_equal(venv.reset(), hand.reset())
    steps_until_interrupted(venv, hand, 5)


class OwnHandler:
    """The program's own SIGINT handler, installed for one test: :attr:`calls` lists the interrupts it got."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.calls.append(signum)


@pytest.fixture
def own_handler() -> Iterator[OwnHandler]:
    """The program's own SIGINT handler in place (and the one found before put back after); skips where vector
    envs other tests left open are still open once collected (vecenv's handler would stay in front)."""
    gc.collect()
    if GUARD.users:
        pytest.skip(f"{GUARD.users} vector envs are still open in this process")
    mine = OwnHandler()
    previous = signal.signal(signal.SIGINT, mine)
    try:
        yield mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_handler_is_put_back_when_the_last_vector_env_closes(own_handler: OwnHandler) -> None:
    """vecenv's SIGINT handler stands in front of the program's own only while a vector env is open; the
    program's handler still gets every interrupt."""
    first, second = vecenv.DummyVecEnv(track_fns(1)), vecenv.DummyVecEnv(track_fns(1))
    first.reset()
    assert signal.getsignal(signal.SIGINT) is not own_handler
    signal.raise_signal(signal.SIGINT)  # outside any call: straight to the program's handler
    assert own_handler.calls == [signal.SIGINT]
    first.close()
    assert signal.getsignal(signal.SIGINT) is not own_handler  # the second one is still open
    second.close()
    assert signal.getsignal(signal.SIGINT) is own_handler


@pytest.mark.parametrize("then", ["interrupt", "vecenv-call"])
def test_the_handler_is_put_back_when_another_thread_closes_the_last_vector_env(
    then: str, own_handler: OwnHandler
) -> None:
    """Only the main thread can install a signal handler: when another thread closes the last vector env, the
    main thread puts the program's handler back at the next interrupt (which that handler then gets, once) or at
    its next call of a vector env."""
    venv = vecenv.DummyVecEnv(track_fns(1))
    venv.reset()
    assert signal.getsignal(signal.SIGINT) is not own_handler
    closer = threading.Thread(target=venv.close)
    closer.start()
    closer.join()
    if then == "interrupt":
        signal.raise_signal(signal.SIGINT)
        assert own_handler.calls == [signal.SIGINT]
    else:
        with pytest.raises(vecenv.errors.ClosedVecEnvError):
            venv.step(np.zeros(1, dtype=np.int64))
        assert own_handler.calls == []
    assert signal.getsignal(signal.SIGINT) is own_handler


def test_no_handler_is_installed_over_sig_ign() -> None:
    """A program that ignores SIGINT gets no Python-level interrupt: vecenv installs nothing."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        venv = vecenv.DummyVecEnv(track_fns(1))
        venv.reset()
        venv.step(np.zeros(1, dtype=np.int64))
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        venv.close()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_vector_env_stepped_from_another_thread_defers_nothing(built: list[Any]) -> None:
    """Python raises KeyboardInterrupt in the main thread only: a vector env stepped in another thread neither
    counts sections nor defers the main thread's interrupts."""
    venv = vecenv.DummyVecEnv(track_fns(2))
    built.append(venv)
    depths: list[int] = []
    original = venv._group.step

    def step(actions: Any) -> Any:
        depths.append(GUARD.depth)
        return original(actions)

    venv._group.step = step

    def run() -> None:
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert depths == [0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("wait_mode", WAIT_MODES)
def test_random_sigint_stress(wait_mode: str, built: list[Any]) -> None:
    """Thousands of steps while another thread sends SIGINT at random times; the loop catches KeyboardInterrupt
    and steps on. Every step returned is each env's own next step (checked against envs stepped by hand), and
    the interrupts landed both in waits and in vecenv's bookkeeping (where they were deferred).

    The program's handler raises KeyboardInterrupt only for an interrupt that vecenv delivers inside one of its
    calls: one that lands in this test's own code would break the test's bookkeeping, not vecenv's."""
    main = threading.main_thread().ident
    assert main is not None
    raised = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if GUARD.depth:
            raised.append(signum)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    stop = threading.Event()
    rng = np.random.default_rng(0)
    delays = rng.uniform(0.0, 0.002, size=100_000)
    deferred_before = GUARD.deferrals

    def pester() -> None:
        for delay in delays:
            if stop.wait(delay):
                return
            signal.pthread_kill(main, signal.SIGINT)

    try:
        venv = subproc_venv(built, 4, wait_mode)
        hand = HandStepped(4)
        np.testing.assert_array_equal(venv.reset(), hand.first)
        thread = threading.Thread(target=pester, daemon=True)
        thread.start()
        try:
            interrupted = steps_until_interrupted(venv, hand, 3000)
        finally:
            stop.set()
            thread.join()
        time.sleep(0.01)  # (a signal sent as the thread stopped is handled before the handler is put back)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted >= 20, interrupted
    assert GUARD.deferrals - deferred_before >= 1


def test_nothing_is_installed_for_a_vector_env_that_is_not_vecenvs() -> None:
    """Stepping a VecEnv that is not one of vecenv's (here an adapted Gymnasium vector env) while none of vecenv's
    is open installs nothing: the handler is put back only by closing vecenv's own."""
    from vecenv.adapters import from_gymnasium

    gc.collect()
    if GUARD.users:
        pytest.skip(f"{GUARD.users} vector envs are still open in this process")
    previous = signal.getsignal(signal.SIGINT)
    venv = from_gymnasium(gym.vector.SyncVectorEnv([lambda: TrackEnv(0)]))
    try:
        venv.reset()
        venv.step(np.zeros(1, dtype=np.int64))
        assert signal.getsignal(signal.SIGINT) is previous
    finally:
        venv.close()


def _child_pids() -> set[int]:
    pids: set[int] = set()
    for path in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        pids.update(int(pid) for pid in path.read_text().split())
    return pids


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_sigint_as_a_worker_is_forked_in_the_constructor_leaves_nothing(monkeypatch) -> None:
    """A Ctrl-C right after the constructor forked a worker process (inside multiprocessing's ``start()``, before
    the process is known): the constructor raises ``KeyboardInterrupt`` once the worker is recorded and ends it,
    so no child process (nor zombie) is left."""
    forked: list[int] = []
    real_fork = os.fork

    def fork_then_sigint() -> int:
        pid = real_fork()
        if pid and not forked:
            forked.append(pid)
            signal.raise_signal(signal.SIGINT)
        return pid

    before = _child_pids()
    monkeypatch.setattr(os, "fork", fork_then_sigint)
    with pytest.raises(KeyboardInterrupt):
        vecenv.SubprocVecEnv(track_fns(4), n_workers=2, start_method="fork")
    monkeypatch.undo()
    assert forked and forked[0] not in _child_pids() - before


class RichTrackEnv(TrackEnv):
    """:class:`TrackEnv` with Dict observations ``{"x": [episode, t]}`` and an info holding a list: vecenv deep-copies
    both (the info at every step, the last observation for ``terminal_observation``), with the standard library's
    ``copy.deepcopy``."""

    observation_space = gym.spaces.Dict({"x": TrackEnv.observation_space})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = super().reset(seed=seed, options=options)
        return {"x": obs}, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, _ = super().step(action)
        return {"x": obs}, reward, terminated, truncated, {"t": [self.t]}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("copied_in", ["copy_info", "copy_observation"])
def test_sigint_in_vecenvs_deep_copy_after_an_env_stepped_is_deferred(copied_in: str, built: list[Any]) -> None:
    """SIGINT lands in ``copy.deepcopy`` called by vecenv's bookkeeping (an info's copy, or the copy of an ended
    episode's last observation before the automatic reset): not the env's code, so deferred to the step's end as
    in vecenv's own code; each env's steps are returned once, the episode ends included."""
    import copy

    venv = vecenv.DummyVecEnv([lambda i=i: RichTrackEnv(i) for i in range(2)])
    built.append(venv)
    hand = [RichTrackEnv(i) for i in range(2)]
    venv.reset()
    for env in hand:
        env.reset()

    def check(obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        for i, env in enumerate(hand):
            expected, reward, terminated, truncated, info = env.step(0)
            assert (rewards[i], dones[i], infos[i]["t"]) == (reward, terminated or truncated, info["t"])
            if dones[i]:
                np.testing.assert_array_equal(infos[i]["terminal_observation"]["x"], expected["x"])
                expected, _ = env.reset()
            np.testing.assert_array_equal(obs["x"][i], expected["x"])

    ends = interrupted = 0
    for _ in range(12):  # the first episode of env 0 ends at its third step
        sys.settrace(
            _deliver_sigint_in(copy, "deepcopy", "cls = type(x)", lambda f: f.f_back.f_code.co_name == copied_in)
        )
        try:
            result = venv.step(np.zeros(2, dtype=np.int64))
        except KeyboardInterrupt:  # (raised as the step ends; its results are held for the next step)
            interrupted += 1
            result = venv.step(np.zeros(2, dtype=np.int64))
        finally:
            sys.settrace(None)
        check(*result)
        ends += int(result[2].sum())
    assert interrupted >= 3
    assert ends >= 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dummy", "subproc"])
def test_a_programs_handler_that_returns_gets_each_step_once(kind: str, built: list[Any], own_handler) -> None:
    """A program's own SIGINT handler that returns (a "stop after this iteration" flag) instead of raising: an
    interrupt deferred in a step's bookkeeping is handed to it as the step ends, and the step returns as usual;
    the next step is each env's next one, not the same results again."""
    from vecenv import env_group

    hand = HandStepped(4)
    if kind == "dummy":
        venv: Any = vecenv.DummyVecEnv(track_fns(4))
        deliver = _deliver_sigint_in(
            env_group, "step", "rows[j][...] = obs", lambda frame: frame.f_locals.get("j") == 1
        )
    else:
        venv = subproc_venv(built, 4, "block")
    built.append(venv)
    np.testing.assert_array_equal(venv.reset(), hand.first)
    hand.check(*venv.step(np.zeros(4, dtype=np.int64)))
    if kind == "dummy":
        sys.settrace(deliver)
        try:
            hand.check(*venv.step(np.zeros(4, dtype=np.int64)))
        finally:
            sys.settrace(None)
    else:
        with pytest.MonkeyPatch.context() as monkeypatch:
            fake = fake_os(monkeypatch, _SigintAt("read", 2))  # (as the last reply is read: no wait after it)
            hand.check(*venv.step(np.zeros(4, dtype=np.int64)))
        assert fake.delivered
    assert own_handler.calls == [signal.SIGINT]
    assert steps_until_interrupted(venv, hand, 8) == 0


@pytest.mark.timeout(60)
def test_close_releases_everything_before_raising_a_held_over_interrupt(built: list[Any]) -> None:
    """An interrupt that landed in a wrapper's bookkeeping is raised by the next vecenv call; where that call is
    ``close()``, the envs are closed first (and a second ``close()`` has nothing left to do)."""
    from vecenv.wrappers import vec_monitor

    closed: list[int] = []

    class ClosingEnv(TrackEnv):
        def close(self) -> None:
            closed.append(self.index)

    wrapped = vecenv.VecMonitor(vecenv.DummyVecEnv([lambda i=i: ClosingEnv(i) for i in range(2)]))
    built.append(wrapped)
    wrapped.reset()
    sys.settrace(_deliver_sigint_in(vec_monitor, "step_wait", "if self._next_step:"))
    try:
        wrapped.step(np.zeros(2, dtype=np.int64))
    finally:
        sys.settrace(None)
    with pytest.raises(KeyboardInterrupt):
        wrapped.close()
    assert sorted(closed) == [0, 1]
    wrapped.close()
    assert sorted(closed) == [0, 1]


def test_a_sigint_as_vecenvs_handler_is_installed_reaches_the_programs(own_handler, monkeypatch) -> None:
    """A Ctrl-C that arrives as soon as vecenv's handler is in place (its first call) is handed to the program's
    own handler, which is put back when the vector env closes."""
    from vecenv import interrupts

    real_signal = signal.signal

    def install_then_sigint(signum: int, handler: Any) -> Any:
        previous = real_signal(signum, handler)
        if handler == GUARD.handler:
            handler(signum, sys._getframe())  # (CPython runs the handler now in place as this call returns)
        return previous

    venv = vecenv.DummyVecEnv(track_fns(1))
    monkeypatch.setattr(interrupts.signal, "signal", install_then_sigint)
    try:
        venv.reset()
    except KeyboardInterrupt:
        pytest.fail("Python's KeyboardInterrupt was raised in place of the program's handler")
    finally:
        monkeypatch.undo()
    assert own_handler.calls == [signal.SIGINT]
    venv.close()
    assert signal.getsignal(signal.SIGINT) is own_handler


@pytest.mark.timeout(60)
def test_sigint_in_to_gymnasiums_conversion_is_raised_by_the_next_call(built: list[Any]) -> None:
    """SIGINT lands in ``to_gymnasium``'s step after the vector env stepped (converting the flags): as in a
    vecenv wrapper, it is raised by the next call and the step is returned, not lost."""
    from vecenv.adapters import to_gymnasium, vecenv_to_gymnasium

    venv = vecenv.DummyVecEnv(track_fns(2))
    built.append(venv)
    genv = to_gymnasium(venv)
    hand = HandStepped(2)
    genv.reset()

    def check(result: tuple[Any, ...]) -> None:
        obs, rewards, terminations, truncations, infos = result
        dones = terminations | truncations
        hand_infos = [{"terminal_observation": infos["final_obs"][i]} if dones[i] else {} for i in range(2)]
        hand.check(obs, rewards, dones, hand_infos)

    sys.settrace(_deliver_sigint_in(vecenv_to_gymnasium, "_step", "terminations, truncations = self._flags("))
    try:
        check(genv.step(np.zeros(2, dtype=np.int64)))
    finally:
        sys.settrace(None)
    with pytest.raises(KeyboardInterrupt):
        genv.step(np.zeros(2, dtype=np.int64))
    for _ in range(8):
        check(genv.step(np.zeros(2, dtype=np.int64)))


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_child_forked_by_an_env_during_a_step_gets_its_ctrl_c(built: list[Any]) -> None:
    """An env that forks during its step (``os.fork()``): the child returns through vecenv's step as the parent
    does, and leaves nothing counted (no section, no wait: the sections begun before the fork are the parent's);
    Ctrl-C in the child afterwards raises ``KeyboardInterrupt`` there."""
    parent = os.getpid()

    class ForkingEnv(TrackEnv):
        child = 0

        def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
            if action == 1:
                ForkingEnv.child = os.fork()
            return super().step(action)

    venv = vecenv.DummyVecEnv([lambda: ForkingEnv(0)])
    built.append(venv)
    venv.reset()
    venv.step(np.ones(1, dtype=np.int64))
    if os.getpid() != parent:  # the child, back from the step
        code = 1
        try:
            code = 2 if (GUARD.depth, GUARD.waiting, GUARD.envs_waiting) != (0, 0, 0) else 1
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            code = code if code == 2 else 0
        finally:
            os._exit(code)
    _, status = os.waitpid(ForkingEnv.child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


class _InterruptedCopy:
    """An info value whose ``__deepcopy__`` (the program's code, which ``copy.deepcopy`` calls) gets a Ctrl-C."""

    copied_after_it = False

    def __deepcopy__(self, memo: dict) -> _InterruptedCopy:
        signal.raise_signal(signal.SIGINT)
        _InterruptedCopy.copied_after_it = True
        return _InterruptedCopy()


@pytest.mark.timeout(60)
def test_sigint_in_a_programs_deepcopy_of_an_info_is_raised_at_once(built: list[Any]) -> None:
    """vecenv's deep copy of an info calls the program's own ``__deepcopy__``: a Ctrl-C there is raised at once, as
    in any code of the program's (one that blocks could never be interrupted otherwise)."""

    class InfoEnv(TrackEnv):
        def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
            obs, reward, terminated, truncated, _ = super().step(action)
            return obs, reward, terminated, truncated, {"value": _InterruptedCopy()}

    venv = vecenv.DummyVecEnv([lambda: InfoEnv(0)])
    built.append(venv)
    venv.reset()
    with pytest.raises(KeyboardInterrupt):
        venv.step(np.zeros(1, dtype=np.int64))
    assert not _InterruptedCopy.copied_after_it


@pytest.mark.timeout(60)
def test_to_gymnasium_over_a_subclass_with_its_own_step_interrupts_it_at_once(built: list[Any]) -> None:
    """``to_gymnasium`` over a vector env whose ``step`` is the program's (a subclass): a Ctrl-C in that code is raised
    at once, as when the program calls that ``step`` itself."""
    from vecenv.adapters import to_gymnasium

    class OwnStep(vecenv.DummyVecEnv):
        finished = False

        def step(self, actions: Any) -> Any:
            signal.raise_signal(signal.SIGINT)
            self.finished = True
            return super().step(actions)

    venv = OwnStep(track_fns(1))
    built.append(venv)
    genv = to_gymnasium(venv)
    genv.reset()
    with pytest.raises(KeyboardInterrupt):
        genv.step(np.zeros(1, dtype=np.int64))
    assert not venv.finished

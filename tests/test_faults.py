"""Fault injection and shutdown matrix (the guarantees of docs/reliability.md).

Extends tests/test_errors.py (which covers: raise in step / reset / env_method / get_attr / __init__ on
every backend with one env per worker, SIGKILL of an idle worker and of a worker hung in step,
``os._exit(3)`` in step, workers ignoring SIGINT, close() with a hung worker, GC and interpreter exit).

Here, with :mod:`tests.envs_faults` and 3 envs on 2 workers (groups ``[0, 1]`` and ``[2]``, the faulty env
is env 1, the second env of the first group):

* env exceptions in every entry point (factory, step, reset, env_method, get_attr, set_attr, render,
  close), at the k-th call, with the group semantics (who stepped), the env's own type and attributes,
  the env / command / worker notes, the remote traceback as ``__cause__``, exceptions that cannot be
  pickled or rebuilt, and reuse of the failing env afterwards;
* worker death (``os._exit``, ``sys.exit``, SIGKILL / SIGTERM to itself, segfault, external SIGKILL while
  the parent is blocked in env_method or in a partial-batch recv) in every command, with the message
  (pid, envs, command, exit code or signal, out-of-memory hint only for SIGKILL), the surviving worker,
  the next calls (WorkerDiedError again, never EOFError / BrokenPipeError) and close();
* shutdown of a whole program (a child process) on Ctrl-C mid-step, an exception in user code, dropping
  the vec env, SIGTERM, SIGKILL, and Ctrl-C out of a hung env followed by close(): no worker left (not
  even a zombie), no traceback from workers, nothing new in /dev/shm (no semaphores).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.process
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vecenv
import vecenv.gymnasium as vgym
import vecenv.workers.base
from tests.conftest import DEFAULT_START_METHOD, START_METHODS
from tests.envs_faults import ArgsFault, InjectedFault, UnpicklableFault, fault_message, make_env
from tests.processes import ROOT, repo_env, run_python
from vecenv.errors import RemoteTraceback, VecEnvError, WorkerDiedError

NUM_ENVS = 3
BAD = 1  # the faulty env: the second env of worker 0's group [0, 1]
GROUP = [0, 1]  # envs of the worker that runs the faulty env (SubprocVecEnv with 2 workers)
ZEROS = np.zeros(NUM_ENVS, dtype=np.int64)
ONES = np.ones(NUM_ENVS, dtype=np.int64)
DEFAULT_BACKEND = f"subproc-{DEFAULT_START_METHOD}"
SUBPROC_BACKENDS = [f"subproc-{method}" for method in START_METHODS]

#: the command named in the note / message for a fault in each entry point
COMMAND = {
    "factory": "env construction",
    "step": "step",
    "reset": "reset",
    "env_method": "env_method",
    "get_attr": "get_attr",
    "set_attr": "set_attr",
    "render": "render",
    "close": "close",
}


# --- helpers ---------------------------------------------------------------------------------------------


def fault_fns(**fault: Any) -> list[Callable[[], Any]]:
    """3 env factories; env ``BAD`` gets the fault keyword arguments of :func:`tests.envs_faults.make_env`."""
    return [functools.partial(make_env, offset=i, **(fault if i == BAD else {})) for i in range(NUM_ENVS)]


def build(backend: str, fns: list[Callable[[], Any]]) -> vecenv.VecEnv:
    """DummyVecEnv, or SubprocVecEnv with 2 workers (groups [0, 1] and [2]) and the backend's start method."""
    if backend == "dummy":
        return vecenv.DummyVecEnv(fns)
    return vecenv.SubprocVecEnv(fns, start_method=backend.removeprefix("subproc-"), n_workers=2)


@pytest.fixture
def venvs() -> Iterator[list[vecenv.VecEnv]]:
    """A list to put vec envs in; each is closed at teardown (errors ignored)."""
    built: list[vecenv.VecEnv] = []
    yield built
    for venv in built:
        with contextlib.suppress(Exception):
            venv.close()


def notes_of(exc: BaseException) -> list[str]:
    return list(getattr(exc, "__notes__", []))


def vecenv_workers() -> set[int]:
    """Pids of this process's live vecenv worker processes."""
    return {p.pid for p in mp.active_children() if p.name.startswith("vecenv") and p.pid is not None}


def proc_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``"Z"`` for a zombie), or None if it no longer exists at all."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def not_gone(pids: list[int], patience: float = 10.0) -> dict[int, str]:
    """Wait (bounded) until every pid has vanished from /proc (exited AND reaped); return the rest with their state."""
    deadline = time.monotonic() + patience
    while True:
        left = {pid: state for pid in pids if (state := proc_state(pid)) is not None}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def assert_not_pipe_error(exc: BaseException) -> None:
    """vecenv never lets a raw pipe error escape: those mean "the worker is gone" and become WorkerDiedError."""
    assert not isinstance(exc, (EOFError, BrokenPipeError, ConnectionError)), repr(exc)


# --- 1. exceptions raised by an env ----------------------------------------------------------------------

#: the call number k at which env 1 faults, per entry point (1 if absent)
AT = {"step": 2, "reset": 2}


def _trigger(venv: vecenv.VecEnv, where: str) -> None:
    """Make the env reach call ``AT[where]`` of entry point ``where`` (the last call made here raises)."""
    if where == "step":
        venv.step(ONES)
        venv.step(ONES)
    elif where == "reset":
        venv.step(ONES)
        venv.reset()
    elif where == "env_method":
        venv.env_method("poke", 5)
    elif where == "get_attr":
        venv.get_attr("probe")
    elif where == "set_attr":
        venv.set_attr("knob", 9)
    elif where == "render":
        venv.get_images()
    elif where == "close":
        venv.close()
    else:  # pragma: no cover
        raise AssertionError(where)


def _check_state_after_fault(venv: vecenv.VecEnv, where: str, dummy: bool) -> None:
    """What the failing call did and did not do: envs before env 1 in its group ran, env 1 did not, envs
    after it in the same group did not, the other group did (DummyVecEnv: one group [0, 1, 2])."""
    env2_ran = not dummy  # env 2 is in the other group for SubprocVecEnv, after env 1 in the same one for Dummy
    if where == "step":  # t after the first (complete) step is 1; the failing step is the second
        assert venv.get_attr("t") == [2, 1, 2 if env2_ran else 1]
    elif where == "reset":  # the first reset made episode 0, the failing one would make episode 1
        assert venv.get_attr("episode") == [1, 0, 1 if env2_ran else 0]
        assert venv.get_attr("t") == [0, 1, 0 if env2_ran else 1]
    elif where == "set_attr":  # the setter raised before assigning
        assert venv.get_attr("knob") == [9, 0, 9 if env2_ran else 0]


def _check_reusable(venv: vecenv.VecEnv, where: str) -> None:
    """The failing env (and every other) answers the same entry point again, then resets and steps."""
    if where == "env_method":
        assert venv.env_method("poke", 5) == [5, 105, 205]
    elif where == "get_attr":
        assert venv.get_attr("probe") == [0, 10, 20]
    elif where == "set_attr":
        venv.set_attr("knob", 4)
        assert venv.get_attr("knob") == [4, 4, 4]
    elif where == "render":
        frames = venv.get_images()
        assert [int(frame[0, 0, 0]) for frame in frames] == [10, 11, 12]
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(obs[:, 2], [0, 0, 0])
    for t in (1, 2, 3):
        obs, rewards, dones, _ = venv.step(ONES)
        np.testing.assert_array_equal(obs[:, 2], [t, t, t])
        np.testing.assert_array_equal(rewards, [1 + t] * 3)
        assert not dones.any()
    assert venv.get_attr("calls", indices=[BAD])[0][where] >= AT.get(where, 1)


def _check_env_exception(exc: BaseException, where: str, backend: str, worker_pid: int | None) -> None:
    k = AT.get(where, 1)
    assert type(exc) is InjectedFault, repr(exc)
    assert str(exc) == fault_message(where, BAD, k)
    assert (exc.where, exc.offset, exc.count) == (where, BAD, k)  # the exception's own attributes survive
    notes = notes_of(exc)
    assert sum(f"vecenv: raised by env {BAD} during {COMMAND[where]}" in note for note in notes) == 1, notes
    if backend == "dummy":
        assert exc.__cause__ is None
        assert not any("worker process" in note for note in notes), notes
        return
    assert isinstance(exc.__cause__, RemoteTraceback)
    remote_tb = exc.__cause__.tb
    assert remote_tb.startswith("Traceback (most recent call last):"), remote_tb
    assert "in inject" in remote_tb and f"InjectedFault: {fault_message(where, BAD, k)}" in remote_tb, remote_tb
    if where == "factory":
        assert "in make_env" in remote_tb
    else:
        assert "in _enter" in remote_tb
    pid = r"\d+" if worker_pid is None else str(worker_pid)
    worker_notes = [note for note in notes if "worker process" in note]
    assert len(worker_notes) == 1, notes
    assert re.fullmatch(
        rf"vecenv: raised in worker process {pid} \(envs \[0, 1\]\); its traceback is chained above as RemoteTraceback",
        worker_notes[0],
    ), worker_notes


# step / reset / env_method / get_attr raising are covered on every start method by test_errors; here they
# run on one start method, in a 2-envs-per-worker group and at the k-th call. The entry points test_errors
# does not cover run on more start methods: factory and close (process start and shutdown) on all of them.
RAISE_CASES = [
    *(
        (where, backend)
        for where in ("step", "reset", "env_method", "get_attr")
        for backend in ("dummy", DEFAULT_BACKEND)
    ),
    *((where, backend) for where in ("set_attr", "render") for backend in ("dummy", DEFAULT_BACKEND, "subproc-fork")),
    # construction and shutdown are where the start methods differ
    *((where, backend) for where in ("factory", "close") for backend in ("dummy", *SUBPROC_BACKENDS)),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("where", "backend"), RAISE_CASES, ids=[f"{w}-{b}" for w, b in RAISE_CASES])
def test_env_exception(where, backend, venvs):
    """The env's own exception (type, message, attributes) with notes naming env 1 and the command (and for
    worker processes: the worker's pid and envs, and its traceback as __cause__); the other worker keeps its
    process; the failing env can be used again (factory: nothing is left running; close: every worker ends)."""
    dummy = backend == "dummy"
    fns = fault_fns(where=where, at=AT.get(where, 1))
    before = vecenv_workers()
    if where == "factory":
        with pytest.raises(InjectedFault) as info:
            build(backend, fns)
        _check_env_exception(info.value, where, backend, None)
        assert not_gone(list(vecenv_workers() - before)) == {}
        return
    venv = build(backend, fns)
    venvs.append(venv)
    venv.reset()
    pids = venv.env_method("getpid")
    if dummy:
        assert pids == [os.getpid()] * 3
        worker_pid = None
    else:
        worker_pid = venv.processes[0].pid
        assert pids == [worker_pid, worker_pid, venv.processes[1].pid]
    with pytest.raises(InjectedFault) as info:
        _trigger(venv, where)
    _check_env_exception(info.value, where, backend, worker_pid)
    if where == "close":
        # raised after everything was released: every worker has ended, and close() is now a no-op
        assert venv.closed
        if not dummy:
            assert not_gone(pids) == {}
        venv.close()
        with pytest.raises(vecenv.ClosedVecEnvError):
            venv.step(ZEROS)
        return
    _check_state_after_fault(venv, where, dummy)
    assert venv.env_method("getpid") == pids  # the same processes: no worker died or was replaced
    _check_reusable(venv, where)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["dummy", DEFAULT_BACKEND])
@pytest.mark.parametrize("fault", ["unpicklable", "args"])
def test_exception_that_cannot_travel(backend, fault, venvs):
    """An exception object that cannot be pickled keeps its type and message; one that cannot be rebuilt from its
    pickle becomes a RuntimeError naming its type. Both keep the notes; the worker is not disturbed."""
    venv = build(backend, fault_fns(where="step", fault=fault))
    venvs.append(venv)
    venv.reset()
    with pytest.raises(Exception) as info:  # the type is what is checked below
        venv.step(ZEROS)
    exc = info.value
    if backend == "dummy":
        assert type(exc) is (UnpicklableFault if fault == "unpicklable" else ArgsFault)
    elif fault == "unpicklable":
        assert type(exc) is UnpicklableFault
        assert str(exc) == fault_message("step", BAD, 1)
    else:
        assert type(exc) is RuntimeError
        assert str(exc) == "tests.envs_faults.ArgsFault: args fault in step (call 1)"
    assert f"vecenv: raised by env {BAD} during step" in notes_of(exc)
    if backend != "dummy":
        assert isinstance(exc.__cause__, RemoteTraceback)
        assert "in inject" in exc.__cause__.tb
    # the next step completes the failed one: the envs that stepped in it return that result (t = 1) instead of
    # stepping again; the faulty env (it raised before counting its first step) and those after it step now
    obs, _, _, _ = venv.step(ZEROS)
    np.testing.assert_array_equal(obs[:, 2], [1, 1, 1])
    obs, _, _, _ = venv.step(ZEROS)
    np.testing.assert_array_equal(obs[:, 2], [2, 2, 2])


# --- 2. worker death -------------------------------------------------------------------------------------


def _death_text(fault: str) -> str:
    return {
        "exit": "exited with code 7",
        "sys_exit": "exited with code 7",
        "sigkill": "was killed by SIGKILL (most often the out-of-memory killer)",
        "sigterm": "was killed by SIGTERM",
        "segfault": "was killed by SIGSEGV",
    }[fault]


EXIT_CODES = {
    "exit": 7,
    "sys_exit": 7,
    "sigkill": -signal.SIGKILL,
    "sigterm": -signal.SIGTERM,
    "segfault": -signal.SIGSEGV,
}

DEATH_CASES = [
    # dying in step while the parent is blocked in step_wait (the env sleeps 0.3 s first)
    *(("step", fault, DEFAULT_BACKEND) for fault in ("exit", "sys_exit", "sigkill", "sigterm", "segfault")),
    *(("step", "sigkill", backend) for backend in SUBPROC_BACKENDS if backend != DEFAULT_BACKEND),
    *(("step", "segfault", backend) for backend in ("subproc-fork",) if backend in SUBPROC_BACKENDS),
    # every other command
    *((where, "exit", DEFAULT_BACKEND) for where in ("reset", "env_method", "get_attr", "set_attr", "render")),
]


def _death_trigger(venv: vecenv.VecEnv, where: str) -> None:
    if where == "step":
        venv.step_async(ONES)
        venv.step_wait()
    else:
        _trigger(venv, where)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("where", "fault", "backend"), DEATH_CASES, ids=["-".join(case) for case in DEATH_CASES])
def test_worker_death(where, fault, backend, venvs):
    """A worker that dies in any command: WorkerDiedError (a RuntimeError) naming the pid, the envs of its group,
    the exit code or signal (the out-of-memory hint only for SIGKILL) and the command; never a pipe error. The
    other worker keeps answering; every later call that reaches the dead worker raises the same WorkerDiedError;
    close() returns and no worker process is left (not even a zombie)."""
    # the fault fires at the first step (the parent is blocked in step_wait by then), the second reset, or
    # the first call of the other commands
    venv = build(backend, fault_fns(where=where, fault=fault, at=2 if where == "reset" else 1, delay=0.3))
    venvs.append(venv)
    venv.reset()
    dead, alive = venv.processes
    pids = [dead.pid, alive.pid]
    with pytest.raises(WorkerDiedError) as info:
        _death_trigger(venv, where)
    exc = info.value
    assert isinstance(exc, RuntimeError) and isinstance(exc, VecEnvError)
    message = str(exc)
    assert message.startswith(
        f"The worker process {dead.pid} running envs [0, 1] {_death_text(fault)} during {COMMAND[where]}."
    )
    assert ("out-of-memory" in message) == (fault == "sigkill")
    assert dead.exitcode == EXIT_CODES[fault]  # independent of the message: what the OS reported
    # the other worker is untouched: same process, env 2's state is exact
    assert alive.is_alive()
    assert venv.env_method("getpid", indices=[2]) == [alive.pid]
    assert venv.get_attr("t", indices=[2]) == [1 if where == "step" else 0]  # stepped / reset / untouched
    assert venv.env_method("poke", 1, indices=2) == [201]
    # every call that reaches the dead worker raises WorkerDiedError again (never EOFError / BrokenPipeError)
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("step", lambda: venv.step(ZEROS)),
        ("reset", venv.reset),
        ("get_attr", lambda: venv.get_attr("t", indices=[0])),
        ("set_attr", lambda: venv.set_attr("knob", 1, indices=[1])),
        ("env_method", lambda: venv.env_method("poke", 1)),
        ("render", venv.get_images),
    ]
    for command, call in calls:
        with pytest.raises(WorkerDiedError) as again:
            call()
        assert_not_pipe_error(again.value)
        # what happened, when it happened: the later calls did not meet a worker that died in their own command
        assert str(again.value) == message, command
    assert venv.env_method("poke", 2, indices=[2]) == [202]  # still answering after all that
    venv.close()
    assert not_gone(pids) == {}
    venv.close()


DEATH_IN_FACTORY = [("exit", DEFAULT_BACKEND), ("sigkill", DEFAULT_BACKEND), ("segfault", SUBPROC_BACKENDS[0])]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("fault", "backend"), DEATH_IN_FACTORY, ids=["-".join(c) for c in DEATH_IN_FACTORY])
def test_worker_death_in_factory(fault, backend):
    """A worker that dies while building its envs: the constructor raises WorkerDiedError naming the group and
    "env construction"; no worker process is left."""
    before = vecenv_workers()
    with pytest.raises(WorkerDiedError) as info:
        build(backend, fault_fns(where="factory", fault=fault))
    assert_not_pipe_error(info.value)
    assert " running envs [0, 1] " in str(info.value)
    assert f"{_death_text(fault)} during env construction." in str(info.value)
    assert not_gone(list(vecenv_workers() - before)) == {}


@pytest.mark.timeout(30)
def test_worker_death_in_close(venvs):
    """A worker that dies inside env.close(): close() neither hangs nor leaks a pipe error; every worker ends."""
    venv = build(DEFAULT_BACKEND, fault_fns(where="close", fault="exit"))
    venvs.append(venv)
    venv.reset()
    pids = [p.pid for p in venv.processes]
    try:
        venv.close()
    except WorkerDiedError as exc:  # either outcome is acceptable; a raw EOFError / BrokenPipeError is not
        assert "during close" in str(exc)
    assert venv.closed
    assert not_gone(pids) == {}


@pytest.mark.timeout(30)
def test_killed_from_outside_while_parent_blocked_in_env_method(venvs):
    """SIGKILL from outside on a worker whose env hangs in env_method, while the parent waits for it."""
    venv = build(DEFAULT_BACKEND, fault_fns(where="env_method", fault="hang"))
    venvs.append(venv)
    venv.reset()
    dead = venv.processes[0]
    killer = threading.Timer(0.3, os.kill, (dead.pid, signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(WorkerDiedError) as info:
            venv.env_method("poke", 5)
    finally:
        killer.join()
    assert str(info.value).startswith(
        f"The worker process {dead.pid} running envs [0, 1] was killed by SIGKILL (most often the out-of-memory "
        "killer) during env_method."
    )
    assert venv.env_method("poke", 5, indices=[2]) == [205]
    venv.close()
    assert not_gone([p.pid for p in venv.processes]) == {}


@pytest.mark.timeout(30)
def test_killed_from_outside_during_partial_batch(venvs):
    """Partial batches: a worker killed while recv() waits raises WorkerDiedError; the surviving group's results
    are still delivered by the next recv(), it keeps stepping, and the dead envs refuse send / async_reset."""
    venv = build(DEFAULT_BACKEND, fault_fns(where="step", fault="hang"))
    venvs.append(venv)
    venv.reset()
    dead = venv.processes[0]
    venv.send(ONES, [0, 1, 2])
    killer = threading.Timer(0.3, os.kill, (dead.pid, signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(WorkerDiedError, match=r"running envs \[0, 1\] was killed by SIGKILL .* during step\."):
            venv.recv()
    finally:
        killer.join()
    obs, rewards, dones, _, env_ids = venv.recv()  # env 2 stepped fine: its result is not lost
    assert env_ids.tolist() == [2]
    np.testing.assert_array_equal(obs, [[2, 0, 1]])
    assert rewards.tolist() == [2.0] and dones.tolist() == [False]
    venv.send(np.array([0]), [2])
    obs, rewards, _, _, env_ids = venv.recv()
    assert env_ids.tolist() == [2] and obs[0, 2] == 2 and rewards.tolist() == [2.0]
    for call in (lambda: venv.send(np.array([0]), [0]), venv.async_reset):
        with pytest.raises(WorkerDiedError) as info:
            call()
        assert_not_pipe_error(info.value)
    venv.close()
    assert not_gone([p.pid for p in venv.processes]) == {}


# --- close() with an outstanding step --------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_close_error_not_lost_behind_slow_pending_step(venvs):
    """env.close() raises while its step was still running (1.5 s) at close(): close() re-raises the close error."""
    venv = build(DEFAULT_BACKEND, fault_fns(where="close", slow_step=1, slow_sleep=1.5))
    venvs.append(venv)
    venv.reset()
    venv.step_async(ZEROS)
    with pytest.raises(InjectedFault, match=r"injected fault in close"):
        venv.close()


@pytest.mark.timeout(30)
def test_close_does_not_raise_error_of_abandoned_step(venvs):
    """A step left running at close() raises after 1.5 s: that is not an env.close() error, close() returns."""
    venv = build(DEFAULT_BACKEND, fault_fns(where="step", at=1, delay=1.5))
    venvs.append(venv)
    venv.reset()
    venv.step_async(ZEROS)
    venv.close()  # DummyVecEnv drops the pending step too: close() raises nothing there
    assert venv.closed


# --- close() bounded by one deadline, and env.close() errors ----------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["close", "gc"])
def test_shutdown_of_stuck_workers_waits_against_one_deadline(how, monkeypatch):
    """6 workers stuck inside env.step: close() (or garbage collection) asks every worker to close before waiting
    for any, waits for them all against one deadline (CLOSE_TIMEOUT, made short here), then terminates them all
    before waiting for any of them to end. Checked on the waits themselves, not on durations: every blocking wait
    (a pipe poll, a process join) is recorded with when it began and its timeout, and none may reach past the
    deadline plus the terminate grace, counted from the first wait (when the deadline was already set)."""
    n = 6
    monkeypatch.setattr(vecenv.workers.base, "CLOSE_TIMEOUT", 0.5)
    fns = [functools.partial(make_env, offset=i, where="step", fault="hang") for i in range(n)]
    venv = vecenv.SubprocVecEnv(fns, start_method=DEFAULT_START_METHOD, n_workers=n)
    venv.reset()
    pids = [p.pid for p in venv.processes]
    venv.step_async(np.zeros(n, dtype=np.int64))
    events: list[tuple[str, float, float]] = []  # ("wait", began, timeout) / ("terminate", when, pid)
    poll, join, terminate = mp.connection.Connection.poll, mp.process.BaseProcess.join, mp.process.BaseProcess.terminate

    def recorded_poll(self: Any, timeout: float | None = 0.0) -> bool:
        events.append(("wait", time.monotonic(), float("inf") if timeout is None else timeout))
        return poll(self, timeout)

    def recorded_join(self: Any, timeout: float | None = None) -> None:
        events.append(("wait", time.monotonic(), float("inf") if timeout is None else timeout))
        join(self, timeout)

    def recorded_terminate(self: Any) -> None:
        events.append(("terminate", time.monotonic(), self.pid))
        terminate(self)

    monkeypatch.setattr(mp.connection.Connection, "poll", recorded_poll)
    monkeypatch.setattr(mp.process.BaseProcess, "join", recorded_join)
    monkeypatch.setattr(mp.process.BaseProcess, "terminate", recorded_terminate)
    if how == "close":
        venv.close()
    else:
        del venv
        gc.collect()
    monkeypatch.undo()
    blocking = [(began, timeout) for kind, began, timeout in events if kind == "wait" and timeout > 0]
    assert blocking, events  # the shutdown waited through the recorded calls
    bound = blocking[0][0] + 0.5 + vecenv.workers.base.TERMINATE_TIMEOUT
    assert [(began, timeout) for began, timeout in blocking if began + timeout > bound] == []
    signalled = [k for k, event in enumerate(events) if event[0] == "terminate"]
    assert sorted(events[k][2] for k in signalled) == sorted(pids)  # each stuck worker, once
    between = events[signalled[0] : signalled[-1]]
    assert [event for event in between if event[0] == "wait" and event[2] > 0] == []  # all signalled, then waited
    assert not_gone(pids) == {}


CLOSE_ERRORS = {"connection_reset": ConnectionResetError, "permission": PermissionError}
CLOSE_BACKENDS = ["dummy", DEFAULT_BACKEND, "parent", "gym-sync", "gym-async"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", CLOSE_BACKENDS)
@pytest.mark.parametrize("fault", list(CLOSE_ERRORS))
def test_env_close_oserror_reaches_the_caller(fault, backend, venvs):
    """An OSError that env.close() raises (a simulator bridge's ConnectionResetError, a PermissionError) is the
    env's error like any other: close() re-raises it with its type, message and notes, on every backend (not
    taken for a broken pipe to the worker); every worker process has ended."""
    fns = fault_fns(where="close", fault=fault)
    if backend == "parent":  # env 1 is closed by this process, env 2 by a worker
        venv: Any = vecenv.SubprocVecEnv(fns, n_workers=1, parent_envs=2)
    elif backend == "gym-sync":
        venv = vgym.SyncVectorEnv(fns)
    elif backend == "gym-async":
        venv = vgym.AsyncVectorEnv(fns, n_workers=2)
    else:
        venv = build(backend, fns)
    venvs.append(venv)
    venv.reset()
    pids = list(venv.call("getpid") if backend.startswith("gym") else venv.env_method("getpid"))
    with pytest.raises(CLOSE_ERRORS[fault]) as info:
        venv.close()
    exc = info.value
    assert type(exc) is CLOSE_ERRORS[fault] and str(exc) == fault_message("close", BAD, 1)
    notes = notes_of(exc)
    assert notes.count(f"vecenv: raised by env {BAD} during close") == 1, notes
    in_worker = backend in (DEFAULT_BACKEND, "gym-async")
    assert isinstance(exc.__cause__, RemoteTraceback) == in_worker
    if in_worker:
        assert f"{CLOSE_ERRORS[fault].__name__}: {fault_message('close', BAD, 1)}" in exc.__cause__.tb
        assert [note for note in notes if "worker process" in note] == [
            f"vecenv: raised in worker process {pids[BAD]} (envs [0, 1]); its traceback is chained above as "
            "RemoteTraceback"
        ]
    venv.close()  # closed: a no-op
    assert not_gone([pid for pid in pids if pid != os.getpid()]) == {}


# --- 3. shutdown of a whole program ----------------------------------------------------------------------

#: Runs the scenario script as its child and adopts every orphan of it (PR_SET_CHILD_SUBREAPER), so that a
#: worker that outlives its parent is reaped here and "gone from /proc" means exited (PID 1 of a container may
#: never reap). Ignores the Ctrl-C sent to the process group (with a Python handler: the child gets SIG_DFL and
#: so a normal KeyboardInterrupt). Prints "EXIT <code>" when the child ends; exits when no descendant is left.
REAPER = r"""
import ctypes, os, signal, subprocess, sys
signal.signal(signal.SIGINT, lambda signum, frame: None)
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
child = subprocess.Popen([sys.executable, "-c", *sys.argv[1:]])
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if pid == child.pid:
        print("EXIT", os.waitstatus_to_exitcode(status), flush=True)
"""

#: The program under test: 3 envs on 2 workers; prints "PIDS <own pid> <worker pids>" first. Envs print
#: "IN_STEP <env>" from inside a step that then sleeps (sigint*) or hangs for good (hang, sigterm, sigkill),
#: so the test's signal lands while the parent is blocked in step_wait.
SCENARIO = r"""
import functools, gc, os, sys
import numpy as np
from vecenv import SubprocVecEnv
from tests.envs_faults import make_env

def main(scenario, method):
    if scenario.startswith("sigint"):
        special = {2: dict(slow_step=3, slow_sleep=1.6)}
    elif scenario in ("hang", "sigterm", "sigkill", "sigkill-forked"):
        special = {2: dict(slow_step=3, slow_sleep=0.6, where="step", fault="hang_noterm", at=3)}
    else:
        special = {}
    fns = [functools.partial(make_env, offset=i, **special.get(i, {})) for i in range(3)]
    venv = SubprocVecEnv(fns, start_method=method, n_workers=2)
    venv.reset()
    print("PIDS", os.getpid(), *(p.pid for p in venv.processes), flush=True)
    actions = np.zeros(3, dtype=np.int64)
    if scenario == "sigkill-forked":  # a helper forked now holds a copy of every pipe end the program holds
        import multiprocessing, time
        helper = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,))
        helper.start()
        print("HELPER", helper.pid, flush=True)
    if scenario.startswith("fork-child"):  # a child forked by the program ends normally (its exit handlers run)
        pid = os.fork()
        if pid == 0:
            if scenario == "fork-child-closes":
                venv.close()
            sys.exit(0)
        os.waitpid(pid, 0)
        obs, rewards, dones, infos = venv.step(actions)
        print("STEPPED", obs.tolist(), rewards.tolist(), flush=True)
        processes = venv.processes
        venv.close()
        print("CLOSED", *(p.exitcode for p in processes), flush=True)
        sys.stdin.readline()
        return
    if scenario == "error":
        venv.step(actions)
        raise RuntimeError("user code failed")
    if scenario == "gc":
        venv.step(actions)
        del venv
        gc.collect()
        print("DROPPED", flush=True)
        sys.stdin.readline()
        return
    if scenario in ("sigint-recover", "hang"):
        try:
            for _ in range(10):
                venv.step(actions)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        if scenario == "sigint-recover":
            obs = venv.reset()
            obs, rewards, dones, infos = venv.step(np.ones(3, dtype=np.int64))
            print("RECOVERED", obs.tolist(), rewards.tolist(), venv.get_attr("t"), flush=True)
        processes = venv.processes
        venv.close()
        print("CLOSED", *(p.exitcode for p in processes), flush=True)
        sys.stdin.readline()
        return
    for _ in range(10):  # sigint (uncaught), sigterm, sigkill: stopped by the test during step 3
        venv.step(actions)
    print("NOT STOPPED", flush=True)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
"""


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


class Program:
    """The scenario program, run under :data:`REAPER` in a new session, with its output read by threads."""

    def __init__(self, scenario: str, start_method: str) -> None:
        self.shm_before = shm_entries()
        env = repo_env()
        env.pop("PYTHONFAULTHANDLER", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", REAPER, SCENARIO, scenario, start_method],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr, None), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        pids = [int(word) for word in self.expect("PIDS").split()[1:]]
        self.pid, self.worker_pids = pids[0], pids[1:]
        assert len(self.worker_pids) == 2

    @staticmethod
    def _pump(stream: Any, sink: list[str], lines: queue.Queue[str | None] | None) -> None:
        for line in stream:
            sink.append(line)
            if lines is not None:
                lines.put(line)
        if lines is not None:
            lines.put(None)

    def output(self) -> str:
        return f"stdout:\n{''.join(self.stdout)}\nstderr:\n{''.join(self.stderr)}"

    def expect(self, prefix: str, timeout: float = 30.0) -> str:
        """The next stdout line starting with ``prefix`` (other lines are skipped); fails after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line within {timeout} s\n{self.output()}") from None
            if line is None:
                raise AssertionError(f"the program ended without a {prefix!r} line\n{self.output()}")
            if line.startswith(prefix):
                return line.strip()

    def ctrl_c(self) -> None:
        """SIGINT to the whole process group, as a terminal's Ctrl-C does (workers and forkserver included)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def release(self) -> None:
        """Let a program waiting on its stdin finish."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.close()

    def finish(self, timeout: float = 30.0) -> int:
        """Wait (bounded) for the program AND every process it left behind to end; return its exit code."""
        line = self.expect("EXIT", timeout)
        try:
            self.proc.wait(timeout=timeout)  # the reaper exits only once no descendant is left
        except subprocess.TimeoutExpired:
            raise AssertionError(f"processes of the program still running {timeout} s after it ended") from None
        for thread in self._threads:
            thread.join(timeout=10)
        return int(line.split()[1])

    def kill(self) -> None:
        """Teardown after a failure: SIGKILL whatever is left in the program's session."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def check_no_leftovers(self) -> None:
        """No worker process (not even a zombie), nothing new in /dev/shm (no semaphore sem.* either)."""
        assert not_gone(self.worker_pids) == {}
        new = shm_entries() - self.shm_before
        assert not {name for name in new if name.startswith("sem.")}, new
        assert not new, new


@pytest.fixture
def program() -> Iterator[Callable[[str, str], Program]]:
    started: list[Program] = []

    def start(scenario: str, start_method: str) -> Program:
        started.append(Program(scenario, start_method))
        return started[-1]

    yield start
    for prog in started:
        prog.kill()


def tracebacks(stderr: str) -> int:
    return stderr.count("Traceback (most recent call last):")


# Every scenario on the default start method; the ones where the start method matters (a forkserver in the
# process group, who reaps the workers, how a worker watches its parent) on the other methods too.
SHUTDOWN_CASES = [
    *(("sigint", method) for method in START_METHODS if method != "spawn"),
    ("sigint-recover", DEFAULT_START_METHOD),
    ("error", DEFAULT_START_METHOD),
    *(("gc", method) for method in START_METHODS if method != "spawn"),
    ("sigterm", DEFAULT_START_METHOD),
    *(("sigkill", method) for method in START_METHODS),
    ("hang", DEFAULT_START_METHOD),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("scenario", "start_method"), SHUTDOWN_CASES, ids=["-".join(c) for c in SHUTDOWN_CASES])
def test_program_shutdown(scenario, start_method, program):
    """However the program ends (Ctrl-C mid-step, an exception, dropping the vec env, SIGTERM, SIGKILL, Ctrl-C out
    of a hung env then close()), its workers end with it: none left (not even a zombie), no worker traceback on
    stderr, nothing new in /dev/shm."""
    prog = program(scenario, start_method)
    expected_exit = 0
    if scenario.startswith("sigint"):
        prog.expect("IN_STEP 2")  # env 2 is inside its (slow) step 3: the parent is blocked in step_wait
        prog.ctrl_c()
        if scenario == "sigint":
            expected_exit = -signal.SIGINT  # an uncaught KeyboardInterrupt ends Python with SIGINT
        else:
            prog.expect("INTERRUPTED")
            # reset() collected and dropped the interrupted step; the next step is exact
            assert prog.expect("RECOVERED") == "RECOVERED [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0]] " + (
                "[2.0, 2.0, 2.0] [1, 1, 1]"
            )
            assert prog.expect("CLOSED") == "CLOSED 0 0"
            assert not_gone(prog.worker_pids) == {}  # while the program still runs: ended and reaped
            prog.release()
    elif scenario == "error":
        expected_exit = 1
    elif scenario == "gc":
        prog.expect("DROPPED")
        assert not_gone(prog.worker_pids) == {}  # while the program still runs: ended and reaped
        prog.release()
    elif scenario == "hang":
        prog.expect("IN_STEP 2")  # env 2 hangs in step for good and ignores SIGTERM
        prog.ctrl_c()
        prog.expect("INTERRUPTED")
        # close() returned (bounded by the expect timeout); the healthy worker closed its envs and exited
        # normally, the hung one ignored SIGTERM and was ended by SIGKILL
        assert prog.expect("CLOSED") == f"CLOSED 0 {-signal.SIGKILL}"
        assert not_gone(prog.worker_pids) == {}
        prog.release()
    else:  # sigterm / sigkill to the program only (not its workers), while it waits on a hung env
        prog.expect("IN_STEP 2")
        sig = signal.SIGTERM if scenario == "sigterm" else signal.SIGKILL
        os.kill(prog.pid, sig)
        expected_exit = -sig
    exit_code = prog.finish()
    stderr = "".join(prog.stderr)
    assert exit_code == expected_exit, prog.output()
    prog.check_no_leftovers()
    assert "NOT STOPPED" not in "".join(prog.stdout)
    # only the program's own traceback, where one is expected; nothing from the workers
    # (multiprocessing prints "Process vecenv-worker-<i>:" above a worker's traceback)
    for noise in (
        "vecenv-worker",
        "EOFError",
        "BrokenPipeError",
        "ConnectionResetError",
        "Exception ignored",
        "leaked",
        "resource_tracker",
        "Fatal Python error",
    ):
        assert noise not in stderr, prog.output()
    if scenario == "sigint":
        assert tracebacks(stderr) == 1, prog.output()
        assert stderr.rstrip().endswith("KeyboardInterrupt"), prog.output()
        assert "step_wait" in stderr, prog.output()  # it was interrupted while waiting for the step
    elif scenario == "error":
        assert tracebacks(stderr) == 1, prog.output()
        assert stderr.rstrip().endswith("RuntimeError: user code failed"), prog.output()
    else:
        assert stderr == "", prog.output()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_end_with_a_killed_parent_that_forked_a_helper(start_method, program):
    """A process the program forks after building the vector env holds a copy of the pipe end each worker watches
    (multiprocessing's sentinel of the parent): the workers still end as soon as the program is killed, not when
    that helper ends."""
    prog = program("sigkill-forked", start_method)
    helper = int(prog.expect("HELPER").split()[1])
    prog.expect("IN_STEP 2")
    os.kill(prog.pid, signal.SIGKILL)
    try:
        assert not_gone(prog.worker_pids) == {}, "the workers outlived their killed parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
    assert prog.finish() == -signal.SIGKILL, prog.output()
    prog.check_no_leftovers()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scenario", ["fork-child-exits", "fork-child-closes"])
def test_a_forked_child_that_exits_leaves_the_parents_workers_alone(scenario, program):
    """A child forked by the program (``os.fork()``) inherits the vector env; when it exits normally, with or
    without calling ``close()``, the parent's workers go on: the parent's next step is exact and its close() ends
    them normally."""
    prog = program(scenario, DEFAULT_START_METHOD)
    fns = [functools.partial(make_env, offset=i) for i in range(3)]
    expected_venv = vecenv.DummyVecEnv(fns)
    expected_venv.reset()
    obs, rewards, _, _ = expected_venv.step(np.zeros(3, dtype=np.int64))
    expected_venv.close()
    assert prog.expect("STEPPED") == f"STEPPED {obs.tolist()} {rewards.tolist()}", prog.output()
    assert prog.expect("CLOSED") == "CLOSED 0 0", prog.output()
    prog.release()
    assert prog.finish() == 0, prog.output()
    prog.check_no_leftovers()
    assert "".join(prog.stderr) == "", prog.output()


#: A vector env left open until its process ends: in a multiprocessing child process, or in a program that
#: created a ``weakref.finalize`` before importing vecenv (and multiprocessing), which registers the exit hooks in
#: another order. Its envs log their close() to the file given.
LEFT_OPEN = r"""
import sys, tempfile
early = tempfile.TemporaryDirectory() if sys.argv[1] == "finalizer-first" else None
import functools, multiprocessing
from vecenv import DummyVecEnv, SubprocVecEnv
from tests.envs_faults import make_env

def left_open(kind, log):
    global kept
    fns = [functools.partial(make_env, offset=i, close_log=log) for i in range(2)]
    kept = SubprocVecEnv(fns, n_workers=2) if kind == "subproc" else DummyVecEnv(fns)
    kept.reset()

if __name__ == "__main__":
    where, kind, log = sys.argv[1:4]
    if where.startswith("mp-child"):
        child = multiprocessing.get_context(where.split("-")[-1]).Process(target=left_open, args=(kind, log))
        child.start()
        child.join()
        print("CHILD", child.exitcode, flush=True)
    else:
        left_open(kind, log)
    sys.exit(0)
"""

LEFT_OPEN_CASES = [
    ("mp-child-fork", "subproc"),
    ("mp-child-spawn", "subproc"),
    ("mp-child-fork", "dummy"),
    ("finalizer-first", "subproc"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("where", "kind"), LEFT_OPEN_CASES, ids=["-".join(c) for c in LEFT_OPEN_CASES])
def test_envs_left_open_are_closed_when_their_process_ends(where, kind, tmp_path):
    """The envs of a vector env left open are closed when the process ends, also in a multiprocessing child
    process (which ends without running the interpreter's exit hooks) and whatever order the exit hooks were
    registered in (multiprocessing ends its daemon children, the workers, at exit: the envs are closed first)."""
    script, log = tmp_path / "left_open.py", tmp_path / "closed.log"
    script.write_text(LEFT_OPEN)
    done = run_python(str(script), where, kind, str(log), timeout=100)
    assert done.returncode == 0, done.stdout + done.stderr
    if where.startswith("mp-child"):
        assert done.stdout.strip() == "CHILD 0", done.stdout + done.stderr
    closed = sorted(log.read_text().splitlines()) if log.exists() else []
    assert closed == ["closed 0", "closed 1"], done.stdout + done.stderr


@pytest.mark.timeout(60)
def test_a_step_collected_while_another_thread_closes_the_vector_env_raises_closed(monkeypatch):
    """One thread waits in step() for an env that hangs while another thread closes the vector env: the waiting
    thread gets ClosedVecEnvError (caused by what the closing did to its pipes), not an internal error."""
    monkeypatch.setattr(vecenv.workers.base, "CLOSE_TIMEOUT", 0.5)
    fns = [
        functools.partial(make_env, offset=0),
        functools.partial(make_env, offset=1, where="step", fault="hang", at=2),
    ]
    venv = vecenv.SubprocVecEnv(fns, n_workers=2)
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    caught: list[BaseException] = []

    def stepper() -> None:
        try:
            venv.step(np.zeros(2, dtype=np.int64))  # env 1 hangs in this step
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=stepper)
    thread.start()
    time.sleep(0.5)  # (let the step reach the workers; closing earlier is a ClosedVecEnvError all the same)
    venv.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(caught) == 1, caught
    assert isinstance(caught[0], vecenv.errors.ClosedVecEnvError), repr(caught[0])

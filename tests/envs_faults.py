"""Fault-injection environments for tests/test_faults.py.

They live in an importable module so worker processes (fork, forkserver and spawn) unpickle them by
reference as ``tests.envs_faults.X``. :class:`FaultInjectEnv` is a tiny deterministic env (observation
``[offset, episode, t]``) that injects one fault on the ``at``-th call of one entry point (``where``):
it raises an exception, exits the interpreter, kills itself, segfaults or hangs. The fault fires exactly
once, so after an exception the env keeps working (it can be reset and stepped again).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: the entry points a fault can be injected into (``"factory"``: the env factory :func:`make_env` itself)
WHERE = ("factory", "step", "reset", "env_method", "get_attr", "set_attr", "render", "close")

#: the faults :func:`inject` knows
FAULTS = (
    "raise",  # InjectedFault (picklable, with attributes)
    "connection_reset",  # ConnectionResetError: an OSError, as a simulator bridge raises when its socket drops
    "permission",  # PermissionError: another OSError
    "unpicklable",  # UnpicklableFault: the exception object cannot be pickled (holds a lock)
    "args",  # ArgsFault: pickles, but cannot be rebuilt from its args (required constructor arguments)
    "exit",  # os._exit(exit_code)
    "sys_exit",  # sys.exit(exit_code): SystemExit, not an Exception
    "sigkill",  # SIGKILL to itself (what the out-of-memory killer does)
    "sigterm",  # SIGTERM to itself
    "segfault",  # ctypes.string_at(0): SIGSEGV in native code
    "hang",  # sleeps forever
    "hang_noterm",  # ignores SIGTERM, then sleeps forever
)


class InjectedFault(Exception):
    """The exception :func:`inject` raises for ``fault="raise"``; its attributes travel back to the parent."""

    def __init__(self, message: str, where: str = "", offset: int = -1, count: int = 0) -> None:
        super().__init__(message)
        self.where = where
        self.offset = offset
        self.count = count

    def __reduce__(self) -> Any:
        return (type(self), (self.args[0], self.where, self.offset, self.count))


class UnpicklableFault(Exception):
    """An exception that cannot be pickled (it holds a lock); only its type and message can travel."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


class ArgsFault(Exception):
    """An exception with two required constructor arguments: it pickles, but unpickling it fails.

    (``BaseException.__reduce__`` rebuilds it as ``ArgsFault(message)``, which raises TypeError.)
    """

    def __init__(self, where: str, count: int) -> None:
        super().__init__(f"args fault in {where} (call {count})")


def fault_message(where: str, offset: int, count: int) -> str:
    """The message of the :class:`InjectedFault` raised by the env with ``offset`` at call ``count`` of ``where``."""
    return f"injected fault in {where} of env offset {offset} (call {count})"


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def inject(fault: str, where: str, offset: int, count: int, exit_code: int = 7, delay: float = 0.0) -> None:
    """Produce ``fault`` now (after sleeping ``delay`` seconds, so a parent waiting for us is blocked by then)."""
    if delay:
        time.sleep(delay)
    if fault == "raise":
        raise InjectedFault(fault_message(where, offset, count), where=where, offset=offset, count=count)
    if fault == "connection_reset":
        raise ConnectionResetError(fault_message(where, offset, count))
    if fault == "permission":
        raise PermissionError(fault_message(where, offset, count))
    if fault == "unpicklable":
        raise UnpicklableFault(fault_message(where, offset, count))
    if fault == "args":
        raise ArgsFault(where, count)
    if fault == "exit":
        os._exit(exit_code)
    if fault == "sys_exit":
        sys.exit(exit_code)
    if fault in ("sigkill", "sigterm"):
        os.kill(os.getpid(), signal.SIGKILL if fault == "sigkill" else signal.SIGTERM)
        _sleep_forever()  # the signal is delivered before this; never returns
    if fault == "segfault":
        faulthandler.disable()  # no "Fatal Python error" dump (pytest enables it, fork inherits it)
        ctypes.string_at(0)
        _sleep_forever()  # pragma: no cover - not reached
    if fault == "hang_noterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _sleep_forever()
    if fault == "hang":
        _sleep_forever()
    raise ValueError(f"unknown fault {fault!r}")


class FaultInjectEnv(gym.Env):
    """Observation ``[offset, episode, t]`` (float32), action Discrete(2), reward ``action + t``; never ends.

    :param offset: identifies the env (first observation entry; ``poke`` and ``render`` depend on it).
    :param where: the entry point to inject the fault into (see :data:`WHERE`; ``"factory"`` is handled by
        :func:`make_env`), or None for no fault.
    :param fault: what happens (see :data:`FAULTS`).
    :param at: inject on this call of ``where`` (1 = the first call); later calls work normally.
    :param exit_code: the exit code for ``"exit"`` and ``"sys_exit"``.
    :param delay: seconds to sleep right before injecting the fault.
    :param slow_step: at this step number (``t`` after the step; 1 = the first step), sleep ``slow_sleep``
        seconds inside ``step``, printing ``IN_STEP <offset>`` to stdout half-way (so whoever reads it knows
        the step request arrived a while ago and the step is still running).
    :param slow_sleep: see ``slow_step``.
    :param close_log: a file to which ``close()`` appends a line ``closed <offset>`` (None: none), so that a test
        sees which envs were closed, in whichever process.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        offset: int = 0,
        where: str | None = None,
        fault: str = "raise",
        at: int = 1,
        exit_code: int = 7,
        delay: float = 0.0,
        slow_step: int | None = None,
        slow_sleep: float = 0.0,
        close_log: str | None = None,
    ) -> None:
        assert where is None or where in WHERE, where
        assert fault in FAULTS, fault
        self.offset = offset
        self.where = where
        self.fault = fault
        self.at = at
        self.exit_code = exit_code
        self.delay = delay
        self.slow_step = slow_step
        self.slow_sleep = slow_sleep
        self.close_log = close_log
        self.render_mode = "rgb_array"
        self.observation_space = spaces.Box(-1e6, 1e6, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.calls: dict[str, int] = dict.fromkeys(WHERE, 0)
        self.episode = -1
        self.t = 0
        self._knob = 0

    def _enter(self, where: str) -> None:
        self.calls[where] += 1
        if where == self.where and self.calls[where] == self.at:
            inject(self.fault, where, self.offset, self.at, self.exit_code, self.delay)

    def _obs(self) -> np.ndarray:
        return np.array([self.offset, self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._enter("reset")
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.slow_step is not None and self.t + 1 == self.slow_step:
            time.sleep(self.slow_sleep / 2)
            print(f"IN_STEP {self.offset}", flush=True)
            time.sleep(self.slow_sleep / 2)
        self._enter("step")
        self.t += 1
        return self._obs(), float(int(action) + self.t), False, False, {}

    def render(self) -> np.ndarray:
        self._enter("render")
        return np.full((2, 2, 3), 10 + self.offset, dtype=np.uint8)

    def close(self) -> None:
        self._enter("close")
        if self.close_log is not None:
            with open(self.close_log, "a") as log:
                log.write(f"closed {self.offset}\n")

    def poke(self, x: int) -> int:
        """The ``env_method`` entry point: returns ``100 * offset + x``."""
        self._enter("env_method")
        return 100 * self.offset + x

    def getpid(self) -> int:
        """The pid of the process this env lives in."""
        return os.getpid()

    @property
    def probe(self) -> int:
        """The ``get_attr`` entry point: ``10 * offset + t``."""
        self._enter("get_attr")
        return 10 * self.offset + self.t

    @property
    def knob(self) -> int:
        """The ``set_attr`` entry point (its setter may fault); plain value otherwise."""
        return self._knob

    @knob.setter
    def knob(self, value: int) -> None:
        self._enter("set_attr")
        self._knob = value


def make_env(offset: int = 0, where: str | None = None, fault: str = "raise", **kwargs: Any) -> FaultInjectEnv:
    """Env factory: injects ``fault`` itself if ``where == "factory"``, else builds a :class:`FaultInjectEnv`."""
    if where == "factory":
        inject(fault, "factory", offset, 1, kwargs.get("exit_code", 7), kwargs.get("delay", 0.0))
    return FaultInjectEnv(offset, where, fault, **kwargs)


def make_env_when_flagged(flag: str, offset: int = 0, **fault_kwargs: Any) -> FaultInjectEnv:
    """Env factory: :func:`make_env` with ``fault_kwargs`` while the file ``flag`` exists, else a plain env; so
    that a worker built once the test creates the file (a restarted one) meets the fault, and the first one not."""
    if os.path.exists(flag):
        return make_env(offset, **fault_kwargs)
    return FaultInjectEnv(offset)

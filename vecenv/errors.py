"""Exception types raised by vecenv, and the helpers that attach env context to an env's own exception.

This module imports nothing from the rest of vecenv.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
from gymnasium import error as gym_error

__all__ = [
    "AlreadyPendingCallError",
    "ClosedVecEnvError",
    "NoAsyncCallError",
    "RemoteTraceback",
    "VecEnvError",
    "WorkerDiedError",
]


class VecEnvError(Exception):
    """Base class of the errors that vecenv itself raises (as opposed to errors raised by an env)."""


class ClosedVecEnvError(VecEnvError, gym_error.ClosedEnvironmentError):
    """An operation was requested on a vectorized environment after :meth:`~vecenv.VecEnv.close`.

    Also a :class:`gymnasium.error.ClosedEnvironmentError`, so Gymnasium users' handlers catch it.
    """


class AlreadyPendingCallError(VecEnvError, gym_error.AlreadyPendingCallError):
    """A call that needs the envs idle was made while a step or partial batches were still pending.

    For example ``step_async`` (or ``get_attr``, ``env_method``, ...) before ``step_wait`` collected the
    previous ``step_async``, ``step_async`` while partial batches are in flight, or ``send`` to an env whose
    worker is still stepping envs sent earlier (the message says which, and what to call first).

    Also a :class:`gymnasium.error.AlreadyPendingCallError` (``name``: the pending call, as Gymnasium's).
    """

    def __init__(self, message: str, name: str = "step") -> None:
        gym_error.AlreadyPendingCallError.__init__(self, message, name)


class NoAsyncCallError(VecEnvError, gym_error.NoAsyncCallError):
    """``step_wait`` was called without a pending ``step_async``, or ``recv`` with nothing in flight.

    Also a :class:`gymnasium.error.NoAsyncCallError` (``name``: the call that was expected, as Gymnasium's).
    """

    def __init__(self, message: str, name: str = "step") -> None:
        gym_error.NoAsyncCallError.__init__(self, message, name)


class WorkerDiedError(VecEnvError, RuntimeError):
    """A worker process ended while the parent was waiting for it (killed, crashed or exited)."""


class RemoteTraceback(Exception):
    """Carries the traceback text of an exception raised in a worker process.

    It is attached as ``__cause__`` of the re-raised exception, so Python prints the remote
    traceback above the local one (the same device :mod:`concurrent.futures` uses).
    """

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n" + self.tb


def add_note(exc: BaseException, note: str) -> None:
    """Attach ``note`` to ``exc`` (PEP 678 notes; on Python 3.10 they are stored but not printed)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # pragma: no cover - Python 3.10
        notes = getattr(exc, "__notes__", None)
        if notes is None:
            notes = []
            exc.__notes__ = notes  # type: ignore[attr-defined]
        notes.append(note)


def env_context_note(env_index: int, command: str) -> str:
    """The note vecenv adds to an exception raised by sub-env ``env_index`` while running ``command``."""
    return f"vecenv: raised by env {env_index} during {command}"


class PackedException:
    """A picklable record of an exception raised in a worker, rebuilt in the parent by :meth:`rebuild`.

    The exception object itself is cloudpickled when possible so the parent re-raises the env's own
    type with its own attributes; if it cannot be pickled (or unpickled), the parent builds
    ``type(message)`` or, failing that, a :class:`RuntimeError` naming the original type.
    """

    def __init__(self, exc: BaseException, tb: str) -> None:
        self.type_name = f"{type(exc).__module__}.{type(exc).__qualname__}"
        self.message = str(exc)
        self.notes = list(getattr(exc, "__notes__", []))
        self.tb = tb
        try:
            self.payload: bytes | None = cloudpickle.dumps(exc)
        except Exception:
            self.payload = None
        try:
            self.type_payload: bytes | None = cloudpickle.dumps(type(exc))
        except Exception:
            self.type_payload = None

    def rebuild(self, where: str) -> BaseException:
        """Return the exception to raise in the parent, with the remote traceback chained as its cause.

        :param where: a short description of the remote side, e.g. ``"worker process 1234"``.
        """
        exc = self._load()
        # Notes added in the worker travel inside the pickled exception; add them if they did not.
        existing = list(getattr(exc, "__notes__", []))
        for note in self.notes:
            if note not in existing:
                add_note(exc, note)
        add_note(exc, f"vecenv: raised in {where}; its traceback is chained above as RemoteTraceback")
        exc.__cause__ = RemoteTraceback(self.tb)
        return exc

    def _load(self) -> BaseException:
        if self.payload is not None:
            try:
                exc = pickle.loads(self.payload)
                if isinstance(exc, BaseException):
                    return exc
            except Exception:
                pass
        if self.type_payload is not None:
            try:
                exc_type: Any = pickle.loads(self.type_payload)
                exc = exc_type(self.message)
                if isinstance(exc, BaseException):
                    return exc
            except Exception:
                pass
        return RuntimeError(f"{self.type_name}: {self.message}")

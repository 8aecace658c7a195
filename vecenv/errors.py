"""Exception types raised by vecenv, the helpers that attach env context to an env's own exception, and those that
keep a worker's traceback readable (:func:`dumps_keeping_file_names`, :func:`add_source_lines`).

This module imports nothing from the rest of vecenv.
"""

from __future__ import annotations

import io
import linecache
import marshal
import os
import pickle
import re
import sys
import types
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import cloudpickle
from gymnasium import error as gym_error

__all__ = [
    "ActionsWithoutEnvAxisError",
    "AlreadyPendingCallError",
    "ClosedVecEnvError",
    "NoAsyncCallError",
    "RemoteObject",
    "RemoteTraceback",
    "UncopyableInfoError",
    "VecEnvError",
    "WorkerDiedError",
    "add_source_lines",
    "dumps_keeping_file_names",
    "other_errors",
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


#: the info key under which vecenv names the values it removed from an info because they could not be copied:
#: ``{key: type name of the removed value}`` (see :class:`UncopyableInfoError`)
UNCOPYABLE_INFO_KEY = "vecenv.uncopyable_info"


class ActionsWithoutEnvAxisError(VecEnvError, ValueError, TypeError):
    """``step()`` got actions without an env axis (a scalar, a 0-d array, a dict of scalars): a ``ValueError`` as
    vecenv's other refused action batches, and a ``TypeError`` as Gymnasium's vector envs raise for them (they
    cannot iterate over the batch)."""

    @classmethod
    def for_batch(cls, action_space: Any, actions: Any, num_envs: int) -> ActionsWithoutEnvAxisError:
        """The error for ``actions`` given to ``num_envs`` envs of ``action_space``: what was expected and got."""
        shape = getattr(action_space, "shape", None)
        layout = f"shape {(num_envs, *shape)}" if shape is not None else f"{num_envs} actions"
        return cls(
            f"actions must hold one action per env: expected a batch of {layout}, got {actions!r:.80} (type "
            f"{type(actions).__name__}), which has no env axis"
        )


class UncopyableInfoError(VecEnvError, TypeError):
    """An env returned an info (or, from a worker process, a reset info) holding a value that vecenv cannot
    deep-copy or, to send it from a worker process, pickle: a lock, a generator, an open file, a native handle.

    The step that raises it did happen, and nothing of it is lost: vecenv finished it (the automatic reset of an
    env whose episode ended included) and keeps its results; the next step returns them without stepping those
    envs again (their new actions are ignored), with each such value removed from its info and named in
    ``info["vecenv.uncopyable_info"]`` (``{key: type name}``). Also a :class:`TypeError`, which deep-copying or
    pickling such a value raises.

    :param message: names each env index, info key and value type.
    :param entries: ``(env index, key, type name)`` of each value removed; for a value removed from one agent's
        info inside an agent stack's info, the key is an :class:`AgentInfoKey` (``(agent index, key)``), and
        :class:`vecenv.pettingzoo.AgentVecEnv` reports ``(row, key, type name)`` instead.
    """

    def __init__(self, message: str, entries: Sequence[tuple[int, Any, str]] = ()) -> None:
        super().__init__(message)
        #: ``(env index, key, type name)`` of each value removed from an info
        self.entries = list(entries)

    def absorb(self, other: UncopyableInfoError) -> None:
        """Also name the values ``other`` (raised by another worker in the same step) names: added to
        :attr:`entries` and to a note."""
        self.entries += other.entries
        items = "; ".join(f"env {i}: info{_subscript(key)} is a {type_name}" for i, key, type_name in other.entries)
        add_note(self, f"vecenv: another worker also left out info values it could not copy: {items}")

    @classmethod
    def from_dropped(cls, dropped: Sequence[tuple[int, str, Any, str, str]]) -> UncopyableInfoError:
        """The error for ``dropped``: ``(env index, "info" or "reset info", key, type name, reason)`` of each value
        removed."""
        items = describe_dropped(dropped)
        return cls(
            f"vecenv could not copy values the envs returned in their infos: {items}. The step happened and its "
            "results are kept: the next step returns them without stepping these envs again (their new actions are "
            f"ignored), with those values removed and named in info[{UNCOPYABLE_INFO_KEY!r}]. Return values that can "
            "be deep-copied and pickled in infos (e.g. a number, or a string describing the object) instead.",
            [(env_index, key, type_name) for env_index, _, key, type_name, _ in dropped],
        )


class AgentInfoKey(NamedTuple):
    """Where a value left out of an agent stack's info was (see :func:`drop_uncopyable`): ``info[agent][key]``,
    ``agent`` being the agent's index (the int key its info is nested under)."""

    agent: int
    key: Any


def _subscript(key: Any) -> str:
    """``['lock']`` for an info key, ``[1]['lock']`` for an :class:`AgentInfoKey`."""
    if isinstance(key, AgentInfoKey):
        return f"[{key.agent!r}][{key.key!r}]"
    return f"[{key!r}]"


def describe_dropped(dropped: Sequence[tuple[int, str, Any, str, str]]) -> str:
    """``env 0: info['lock'] is a _thread.lock (TypeError: ...); ...`` for :meth:`UncopyableInfoError.from_dropped`'s
    ``dropped`` (``env 0: info[1]['lock'] ...`` for a value left out of agent 1's info)."""
    return "; ".join(
        f"env {env_index}: {what}{_subscript(key)} is a {type_name} ({reason})"
        for env_index, what, key, type_name, reason in dropped
    )


def drop_uncopyable(
    info: dict[Any, Any], copy: Callable[[Any], Any], agent_infos: bool = False
) -> tuple[dict[Any, Any], list[tuple[Any, str, str]]]:
    """``info`` without the values ``copy`` raises on, the others replaced by what it returns; the keys removed are
    added to ``info[UNCOPYABLE_INFO_KEY]`` (``{key: type name}``).

    :param agent_infos: ``info`` is an agent stack's (:class:`vecenv.pettingzoo.AgentStackEnv`), holding each
        agent's info (a dict) under an int key: the rule then applies within each agent's info, which keeps its
        other values and names the removed ones in its own ``UNCOPYABLE_INFO_KEY``; such a value is reported
        under the key ``AgentInfoKey(agent, key)``. Otherwise only ``info``'s own keys are looked at.
    :return: ``(new info, [(key, type name, reason)] of the values removed)``.
    """
    kept: dict[Any, Any] = {}
    dropped: list[tuple[Any, str, str]] = []
    listed_here: dict[Any, str] = {}
    for key, value in info.items():
        try:
            kept[key] = copy(value)
        except Exception as exc:
            if agent_infos and type(key) is int and isinstance(value, dict):
                kept[key], inner = drop_uncopyable(value, copy)
                dropped += [(AgentInfoKey(key, inner_key), type_name, why) for inner_key, type_name, why in inner]
                continue
            value_type = type(value)
            module = "" if value_type.__module__ == "builtins" else f"{value_type.__module__}."
            dropped.append((key, f"{module}{value_type.__qualname__}", f"{type(exc).__name__}: {exc}"))
            listed_here[key] = dropped[-1][1]
    if listed_here:
        listed = kept.get(UNCOPYABLE_INFO_KEY)
        kept[UNCOPYABLE_INFO_KEY] = {**(listed if isinstance(listed, dict) else {}), **listed_here}
    return kept, dropped


# --- readable worker tracebacks ----------------------------------------------------------------------

#: cloudpickle's own reducer of code objects (it names their file ``<dynamic-code>``)
_CLOUDPICKLE_REDUCE_CODE: Callable[[types.CodeType], Any] | None = cloudpickle.Pickler.dispatch_table.get(
    types.CodeType
)


def _reduce_code(code: types.CodeType) -> Any:
    """Pickle ``code`` whole through :mod:`marshal`, its file name included (cloudpickle writes
    ``<dynamic-code>`` instead). Both ends run the same Python version, as cloudpickle's own code
    pickling requires too. A code object that marshal refuses is left to cloudpickle."""
    try:
        return marshal.loads, (marshal.dumps(code),)
    except ValueError:
        if _CLOUDPICKLE_REDUCE_CODE is None:
            raise
        return _CLOUDPICKLE_REDUCE_CODE(code)


class _FileNamePickler(cloudpickle.Pickler):
    """cloudpickle's pickler, but the code of the functions and classes it pickles by value (those of the main
    script, of a notebook, local functions) keeps its file name."""

    dispatch_table = ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def dumps_keeping_file_names(obj: Any) -> bytes:
    """``obj`` pickled by cloudpickle, the code it pickles by value keeping its file name.

    cloudpickle pickles the classes and functions of the main script by value and names their code's file
    ``<dynamic-code>``, so a traceback raised in a worker process by an env class of the main script would
    read ``File "<dynamic-code>", line 15, in step``. Pickled by this function, it reads the script's path, and
    the worker's traceback shows the source line, read from that file. For what is pickled once per worker
    (its env factories), not for each step.

    :param obj: the object, e.g. a list of env factories.
    :return: bytes that :func:`pickle.loads` reads back.
    """
    buffer = io.BytesIO()
    _FileNamePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


#: a frame line of a formatted traceback: ``  File "PATH", line N, in NAME``
_FRAME_LINE = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in ')


def add_source_lines(tb: str) -> str:
    """``tb``, a traceback formatted in another process, with the source line of each frame that has none
    (the file or the line was not there: a Ray actor on another machine, a notebook's cell) read from this
    process's files and :mod:`linecache` (which holds a notebook's cells), where it has them.

    :param tb: the text of :func:`traceback.format_exc` or :func:`traceback.format_exception`.
    :return: the text with those source lines added; frames whose file this process cannot read stay as they are.
    """
    lines = tb.splitlines(keepends=True)
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        match = _FRAME_LINE.match(line)
        if match is None or (i + 1 < len(lines) and lines[i + 1].startswith("    ")):
            continue
        source = linecache.getline(match["path"], int(match["line"])).strip()
        if source:
            if not line.endswith("\n"):
                out[-1] += "\n"
            out.append(f"    {source}\n")
    return "".join(out)


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


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def program_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller of this function name the program's line: the
    first frame up the stack whose code is not vecenv's (however deep in vecenv the warning is issued)."""
    frame: types.FrameType | None = sys._getframe(1)  # (the frame that calls warnings.warn: its stacklevel 1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


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


#: the attributes vecenv sets on an env's exception: the env that raised it; the errors of the other workers
#: answering the same request
_ENV_INDEX = "_vecenv_env_index"
_OTHER_ERRORS = "_vecenv_other_errors"


def add_env_context(exc: BaseException, env_index: int, command: str) -> None:
    """Mark ``exc`` as raised by sub-env ``env_index`` while running ``command``: a note saying so (see
    :func:`env_context_note`), and the env index, read back with :func:`env_index_of`."""
    add_note(exc, env_context_note(env_index, command))
    setattr(exc, _ENV_INDEX, env_index)


def env_index_of(exc: BaseException) -> int | None:
    """The sub-env that raised ``exc`` (see :func:`add_env_context`); None if it was not raised by an env."""
    env_index = getattr(exc, _ENV_INDEX, None)
    return env_index if isinstance(env_index, int) else None


def add_other_errors(exc: BaseException, others: list[BaseException]) -> None:
    """Record on ``exc``, the error a request raises, the errors other workers raised answering the same request
    (read back with :func:`other_errors`), and name each in a note of ``exc``, so that the printed traceback shows
    them too."""
    setattr(exc, _OTHER_ERRORS, [*other_errors(exc), *others])
    for other in others:
        index = env_index_of(other)
        by = "another worker" if index is None else f"env {index}"
        add_note(
            exc,
            f"vecenv: {by} also raised answering the same request: {type(other).__name__}: {other} "
            "(vecenv.errors.other_errors(exc) holds it, with its traceback)",
        )


def other_errors(exc: BaseException) -> list[BaseException]:
    """The errors other workers raised answering the request that raised ``exc``, in the order they arrived."""
    return list(getattr(exc, _OTHER_ERRORS, []))


class RemoteObject:
    """Stands in the calling process for the object of an :class:`AttributeError` raised in a worker (its ``obj``,
    which cannot travel): it lists the original object's attribute names, so that Python's "Did you mean: ...?"
    hint, computed from ``name`` and ``dir(obj)`` when the error is printed, is the one the worker would print.

    :param description: what the original object was, e.g. ``"<MyEnv object in a worker>"``.
    :param names: ``dir()`` of the original object.
    """

    def __init__(self, description: str, names: list[str]) -> None:
        self._description = description
        self._names = names

    def __dir__(self) -> list[str]:
        return list(self._names)

    def __repr__(self) -> str:
        return self._description


def _missing_attribute(exc: BaseException) -> tuple[str, str, list[str]] | None:
    """``(name, description of obj, dir(obj))`` of an :class:`AttributeError` that knows its ``name`` and ``obj``
    (Python's hint needs both); None otherwise."""
    name, obj = getattr(exc, "name", None), getattr(exc, "obj", None)
    if not isinstance(exc, AttributeError) or not isinstance(name, str) or obj is None:
        return None
    try:
        names = [n for n in dir(obj) if isinstance(n, str)]
    except Exception:
        return None
    return name, f"<{type(obj).__qualname__} object in a worker>", names


class PackedException:
    """A picklable record of an exception raised in a worker, rebuilt in the parent by :meth:`rebuild`.

    The exception object itself is cloudpickled when possible so the parent re-raises the env's own
    type with its own attributes; if it cannot be pickled (or unpickled), the parent builds
    ``type(message)`` or, failing that, a :class:`RuntimeError` naming the original type. An
    :class:`AttributeError` gets back its ``name`` and, as ``obj``, a :class:`RemoteObject` (pickling drops both),
    so Python still prints its "Did you mean: ...?" hint.
    """

    def __init__(self, exc: BaseException, tb: str) -> None:
        self.type_name = f"{type(exc).__module__}.{type(exc).__qualname__}"
        self.message = str(exc)
        self.notes = list(getattr(exc, "__notes__", []))
        self.tb = tb
        self.missing_attribute = _missing_attribute(exc)
        self.env_index = env_index_of(exc)
        try:  # (keeping file names: see vecenv.workers.messages.dumps)
            self.payload: bytes | None = dumps_keeping_file_names(exc)
        except Exception:
            self.payload = None
        try:
            self.type_payload: bytes | None = dumps_keeping_file_names(type(exc))
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
        if self.env_index is not None:
            setattr(exc, _ENV_INDEX, self.env_index)
        if isinstance(exc, AttributeError) and self.missing_attribute is not None:
            name, description, names = self.missing_attribute
            exc.name, exc.obj = name, RemoteObject(description, names)
        exc.__cause__ = RemoteTraceback(add_source_lines(self.tb))
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
